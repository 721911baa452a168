"""Whole DHEN modules: their contribution's magnitude, and the spec without the weakest ones.

A DHEN layer mixes modules (dot, attention, DCN, linear, conv); dropping one removes all its
weights at once. Its magnitude in a concat ensemble is that of the weights producing and reading
its rows; in a sum, that of its last linear map (times its softmax weight for ``weighted_sum``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

import torch
from torch import nn

from autorec.arch import (
    ArchSpec,
    DhenConfig,
)
from autorec.growth.checks import check_model, state_dict_of
from autorec.growth.layout import unit_norms
from autorec.growth.plan import GrowthError, build_plan

StateDict = dict[str, torch.Tensor]

# Modules of a DHEN layer whose last linear map decides their output (scaled or zeroed as a whole).
DHEN_FINAL = {"dot": ("linear.weight", "linear.bias"), "attention": ("project.linear.weight",),
               "dcn": ("linear.weight", "linear.bias"), "linear": ("linear.weight",),
               "conv": ("conv.weight", "conv.bias")}



def module_scores(model: nn.Module, spec: ArchSpec) -> dict[str, dict[str, float]]:
    """Per DHEN layer (``layers.<i>``), the magnitude of each module's contribution.

    Concat: sqrt(sum of squares of the weights producing its rows) x sqrt(sum of squares of
    the weights reading them); a sum: the norm of its last linear map (times its softmax weight
    for ``weighted_sum``)."""
    sd = state_dict_of(model)
    check_model(spec, sd)
    plan = build_plan(spec, spec)
    scores: dict[str, dict[str, float]] = {}
    for i, config in enumerate(spec.layers):
        if not isinstance(config, DhenConfig):
            continue
        path = f"layers.{i}"
        layer: dict[str, float] = {}
        weights = (torch.softmax(sd[f"{path}.ensemble_logits"], 0)
                   if config.ensemble == "weighted_sum" else torch.ones(len(config.modules)))
        for m, module in enumerate(config.modules):
            if config.ensemble == "concat":
                produced = consumed = 0.0
                for key, axes in plan.rules.items():
                    p, c = unit_norms(sd[key], axes, f"{path}.n_out.{module}", plan.spaces)
                    produced, consumed = produced + float(p.sum()), consumed + float(c.sum())
                layer[module] = math.sqrt(produced * consumed)
            else:
                norm = sum(float(sd[f"{path}.interactions.{module}.{k}"].pow(2).sum())
                           for k in DHEN_FINAL[module])
                layer[module] = math.sqrt(norm) * float(weights[m])
        scores[path] = layer
    return scores


def drop_modules(model: nn.Module, spec: ArchSpec, count: int | Mapping[str, int]) -> ArchSpec:
    """``spec`` without the ``count`` DHEN modules of least magnitude (:func:`module_scores`)
    in each DHEN layer (or per layer: ``{"layers.1": 2}``); at least one module stays. Pass the
    result to :func:`prune` to remove them.

    Example:
        >>> from autorec.arch import ArchSpec, TableSpec, DhenConfig
        >>> from autorec.models import build_model
        >>> t = (TableSpec(name="t", features=("a", "b"), num_embeddings=10, dim=4),)
        >>> spec = ArchSpec(dim=4, tables=t, layers=(DhenConfig(modules=("dot", "linear", "conv"),
        ...                                                     ensemble="sum", n_out=2),))
        >>> model = build_model(spec)
        >>> with torch.no_grad():
        ...     _ = model.layers[0].interactions.conv.conv.weight.zero_()
        ...     _ = model.layers[0].interactions.conv.conv.bias.zero_()
        >>> drop_modules(model, spec, 1).layers[0].modules
        ('dot', 'linear')
    """
    scores = module_scores(model, spec)
    counts = dict.fromkeys(scores, count) if isinstance(count, int) else dict(count)
    for path, n in counts.items():
        if path not in scores:
            raise GrowthError(f"count[{path!r}]: not a DHEN layer; expected one of "
                              f"{', '.join(scores) or '(none)'}")
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise GrowthError(f"count[{path!r}]: expected an integer >= 0, got {n!r}")
    layers = list(spec.layers)
    for path, n in counts.items():
        i = int(path.split(".")[1])
        config = layers[i]
        assert isinstance(config, DhenConfig)
        ranked = sorted(config.modules, key=lambda m: scores[path][m])
        gone = set(ranked[:min(n, len(ranked) - 1)])
        layers[i] = replace(config, modules=tuple(m for m in config.modules if m not in gone))
    return spec.replace(layers=tuple(layers))

