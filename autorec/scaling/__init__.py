"""Scaling laws: ladders of one architecture family grown by its blocks' rules, trained as the
trials of a study, and a power law of test logloss against training compute fitted to them."""

from autorec.scaling.ladder import LadderError, build_ladder, families, family_start, scale_layer, scale_spec

__all__ = ["LadderError", "build_ladder", "families", "family_start", "scale_layer", "scale_spec"]
