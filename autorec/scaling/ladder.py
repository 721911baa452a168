"""Scaling ladders: one architecture grown rung by rung by its blocks' rules.

Every rule lives with its kind (:class:`autorec.blocks.ScalingRule` in the registry): which of
a layer's fields widen by ``factor`` per rung, which deepen by a step, how often the kind adds a
layer. :func:`scale_spec` applies, to each layer, the rule of its kind, and widens the over-arch
MLP by the largest factor among the kinds it holds; a kind without a rule keeps its layers. A
family's ladder starts from :func:`family_start` (the rule's ``start`` layer, ``layers`` deep,
on one table per feature of ``dim`` wide), a searched architecture's from itself.

Example:
    >>> from autorec.data import Schema, SparseFeature
    >>> schema = Schema(("x",), tuple(SparseFeature(f"f{i}", 100) for i in range(4)))
    >>> [s.layers[0].num_layers for s in build_ladder(family_start("dcnv2", schema, dim=8), rungs=3)]
    [1, 2, 3]
"""

from __future__ import annotations

import dataclasses
from typing import Any

from autorec.arch import ArchSpec, BlockConfig
from autorec.blocks import KINDS, kind
from autorec.blocks.registry import ScalingRule
from autorec.data.schema import Schema
from autorec.presets import tables_for

SCALE_ATTR = "scale"  # the user attribute of a rung's trial: {"family": ..., "rung": ...}
SEARCHED = "searched"  # the family of an exported (searched) architecture


class LadderError(ValueError):
    """A family or architecture that cannot be scaled; the message names it and why."""


def rule(name: str) -> ScalingRule:
    """The scaling rule of kind ``name``; a :class:`LadderError` lists the kinds that have one."""
    entry = KINDS.get(name)
    if entry is None or entry.scaling is None:
        raise LadderError(f"no scaling rule for family {name!r}; the kinds with one: "
                          f"{', '.join(families())}")
    return entry.scaling


def families() -> tuple[str, ...]:
    """The kinds whose registry entry states a scaling rule (each is a family of its own)."""
    return tuple(sorted(name for name, entry in KINDS.items() if entry.scaling is not None))


def family_start(family: str, schema: Schema, dim: int = 16) -> ArchSpec:
    """Rung 0 of ``family``'s ladder on ``schema``: one table per feature, ``dim`` wide, a
    dense MLP of 64 (when the data has dense features), the rule's start layers and over-arch."""
    found = rule(family)
    return ArchSpec(name=f"{family}-r0", dim=dim, tables=tables_for(schema, dim), n_dense=schema.n_dense,
                    dense_arch=(64,) if schema.n_dense else (), layers=(found.start,) * found.layers,
                    over_arch=found.over_arch)


def _grow(value: Any, times: float) -> Any:
    if isinstance(value, tuple):
        return tuple(_grow(v, times) for v in value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise LadderError(f"a widened field must be an int or a tuple of ints, got {value!r}")
    return value if value == 0 else max(1, round(value * times))  # 0 keeps its meaning (full rank)


def scale_layer(config: BlockConfig, rung: int) -> BlockConfig:
    """``config`` at rung ``rung`` of its kind's rule (unchanged for a kind without one)."""
    found = kind(config.kind).scaling
    if found is None or rung == 0:
        return config
    changes = {name: _grow(getattr(config, name), found.factor ** rung) for name in found.widen}
    changes.update({name: getattr(config, name) + step * rung for name, step in found.deepen.items()})
    return dataclasses.replace(config, **changes)


def scale_spec(spec: ArchSpec, rung: int) -> ArchSpec:
    """``spec`` grown to rung ``rung`` (0: itself): every layer by its kind's rule, one more layer
    of a kind every ``depth_every`` rungs (a copy of its last, inserted after it), the over-arch
    widths by the largest factor of the kinds present. Raises :class:`LadderError` for a negative
    rung or an architecture none of whose kinds has a rule."""
    if rung < 0:
        raise LadderError(f"rung: expected an integer >= 0, got {rung}")
    rules = {c.kind: kind(c.kind).scaling for c in spec.layers}
    if not any(rules.values()):
        raise LadderError(f"{spec.name}: none of its layer kinds ({', '.join(sorted(rules)) or 'no layers'}) "
                          f"has a scaling rule; the kinds with one: {', '.join(families())}")
    layers = [scale_layer(c, rung) for c in spec.layers]
    for name, found in rules.items():
        if found is not None and found.depth_every:
            last = max(i for i, c in enumerate(layers) if c.kind == name)
            layers[last + 1:last + 1] = [layers[last]] * (rung // found.depth_every)
    factor = max(found.factor for found in rules.values() if found is not None)
    over_arch = tuple(_grow(w, factor ** rung) for w in spec.over_arch)
    stem, _, number = spec.name.rpartition("-r")
    base = stem if stem and number.isdigit() else spec.name  # "wukong-r2" grows as "wukong"
    return spec.replace(name=f"{base}-r{rung}", layers=tuple(layers), over_arch=over_arch)


def build_ladder(spec: ArchSpec, rungs: int) -> list[ArchSpec]:
    """Rungs 0 .. ``rungs`` - 1 of ``spec``'s ladder."""
    if rungs < 1:
        raise LadderError(f"rungs: expected an integer >= 1, got {rungs}")
    return [scale_spec(spec, r) for r in range(rungs)]
