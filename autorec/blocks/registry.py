"""The registry of block kinds: one :class:`BlockKind` per kind says everything the rest of
autorec needs to know about it, so no other module branches on a kind's name.

A kind module (``autorec/blocks/wukong.py``, ...) defines its block and calls
:func:`register_kind` once; a kind defined anywhere else (a plugin, a test) does the same and
is then parsed from arch.json, searched by a space, built, trained, costed, exported and
reported like the built-in ones. What a kind owns:

- ``config``: its config dataclass (a :class:`~autorec.arch.BlockConfig`; the torch-free part,
  which also gives ``out_features``), registered into ``autorec.arch.BLOCK_CONFIGS`` so
  ArchSpec JSON names it;
- ``block``: the ``nn.Module`` built from the config, ``[B, F_in, D] -> [B, F_out, D]``;
- ``rules``: the search rules a :class:`~autorec.space.SearchSpace` applies to its fields
  (:class:`SearchRules`);
- ``tower_module``: the config a DMT tower uses when a space names this kind as tower module;
- ``pass_through``: the layer hands its input rows on unchanged (growth plans see through it);
- ``identity``: the layer is the identity, the kind a search uses to drop a layer;
- ``default``: the kind a space's layers take when it names none (one kind at most);
- ``latency_inputs`` / ``latency_modules``: its features in the learned latency model
  (:mod:`autorec.costs.latency`);
- ``scaling``: how a layer of the kind grows along a scaling ladder (:class:`ScalingRule`,
  used by :mod:`autorec.scaling`); None: the kind has no ladder and a searched architecture
  that holds it keeps its layers as they are.

FLOPs and bytes need no entry: :mod:`autorec.costs.analytic` counts them on the built block.
The supernet's weight-shared op and the growth layout are looked up by kind in their own rooms
(:mod:`autorec.supernet.ops`, :mod:`autorec.growth.plan`); a kind without them is refused by
the one-shot search with a message that says so, and carried unchanged through growth.

Example:
    >>> from autorec.blocks import kind
    >>> kind("wukong").config.__name__, kind("wukong").block.__name__
    ('WukongConfig', 'WukongLayer')
    >>> kind("transformer")
    Traceback (most recent call last):
    ...
    KeyError: "no block kind 'transformer' is registered; known: dcnv2, dhen, dlrm, mlp, skip, wukong"
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from autorec.arch import BLOCK_CONFIGS, BlockConfig

if TYPE_CHECKING:
    from autorec.blocks.base import InteractionBlock

Values = tuple[Any, ...]


class SearchRules:
    """How a search space walks a kind's fields; the defaults fit a kind whose every field is
    free and whose output width depends on none of them. Override per kind.

    Attributes:
        shape_fields: fields that can change the layer's output vectors, or which values of a
            later field are valid; counting a space enumerates these and multiplies by the
            number of valid values of the others.
        searched: False for a kind with nothing to choose (it counts once; a space section for
            it is refused).
    """

    shape_fields: tuple[str, ...] = ()
    searched: bool = True

    def active(self, key: str, chosen: Mapping[str, Any]) -> bool:
        """Whether field ``key`` matters given the fields chosen before it (in field order)."""
        return True

    def valid(self, key: str, value: Any, chosen: Mapping[str, Any], fields: Mapping[str, Values],
              dim: int, f_in: int) -> bool:
        """Whether ``value`` of ``key`` can still complete to a valid layer for ``[B, f_in, dim]``;
        ``fields`` are the space's values of every field."""
        return True

    def depends(self, key: str, dim: int, f_in: int) -> dict[str, int]:
        """What the valid values of ``key`` depend on, named in a narrowed parameter's name."""
        return {"dim": dim, "f_in": f_in}


@dataclass(frozen=True)
class ScalingRule:
    """How a kind's layers grow along a scaling ladder (:mod:`autorec.scaling`). At rung ``r``
    (0: the start) every field named in ``widen`` is multiplied by ``factor ** r`` (rounded; a
    tuple field elementwise), every field in ``deepen`` gains ``deepen[field] * r``, the
    architecture gets one more layer of the kind (a copy of its last one) every ``depth_every``
    rungs, and the over-arch MLP widths are multiplied by ``factor ** r``. The embedding width
    stays as it is: on one machine the tables' memory, not their FLOPs, bounds it.

    Args:
        start: the rung-0 layer of the kind's own ladder (the family ``autorec scale`` names
            by the kind).
        layers: how many ``start`` layers rung 0 stacks.
        over_arch: the over-arch widths of rung 0 of the kind's own ladder.
        widen / deepen / depth_every / factor: the growth per rung (above).
    """

    start: BlockConfig
    layers: int = 1
    over_arch: tuple[int, ...] = (64, 32)
    widen: tuple[str, ...] = ()
    deepen: Mapping[str, int] = field(default_factory=dict)
    depth_every: int = 0
    factor: float = 2.0


def _inputs(config: BlockConfig, f_in: int, dim: int) -> int:
    return f_in * dim


def _no_modules(config: BlockConfig) -> tuple[str, ...]:
    return ()


@dataclass(frozen=True)
class BlockKind:
    """Everything about one block kind (see the module docstring).

    Args:
        config: the config class; its ``kind`` class variable is the kind's name.
        block: the ``nn.Module`` class, built as ``block(config, num_in, dim)``.
        rules: search rules (defaults: every field free).
        tower_module: the module config of a DMT tower of this kind (None: not a tower module).
        pass_through: hands its input rows on unchanged.
        identity: the identity layer (one kind at most).
        default: a space's layer kind when the space names none (one kind at most).
        latency_inputs: ``(config, f_in, dim) -> int``, the ``inputs`` feature of the latency model.
        latency_modules: ``config -> names``, the sub-modules the latency model prices apart.
        scaling: the kind's scaling-ladder rule (None: none).
    """

    config: type[BlockConfig]
    block: type[InteractionBlock]
    rules: SearchRules = field(default_factory=SearchRules)
    tower_module: BlockConfig | None = None
    pass_through: bool = False
    identity: bool = False
    default: bool = False
    latency_inputs: Callable[[BlockConfig, int, int], int] = _inputs
    latency_modules: Callable[[BlockConfig], tuple[str, ...]] = _no_modules
    scaling: ScalingRule | None = None

    @property
    def name(self) -> str:
        return self.config.kind


KINDS: dict[str, BlockKind] = {}


def register_kind(entry: BlockKind) -> BlockKind:
    """Register ``entry`` under its config's ``kind`` (again: replaced), and its config class
    for ArchSpec parsing. Returns it.

    Example:
        >>> from autorec.arch import DotConfig
        >>> from autorec.blocks import SkipBlock
        >>> register_kind(BlockKind(DotConfig, SkipBlock))
        Traceback (most recent call last):
        ...
        ValueError: SkipBlock.config_type is SkipConfig, not DotConfig
    """
    name = entry.config.kind
    if not name or not isinstance(name, str):
        raise ValueError(f"{entry.config.__name__}.kind: expected the kind's name, got {name!r}")
    if entry.block.config_type is not entry.config:
        raise ValueError(f"{entry.block.__name__}.config_type is {entry.block.config_type.__name__}, "
                         f"not {entry.config.__name__}")
    for flag, find in (("identity", identity_kind), ("default", default_kind)):
        if getattr(entry, flag) and any(getattr(k, flag) for n, k in KINDS.items() if n != name):
            raise ValueError(f"{name}: {find()} is already the {flag} kind")
    KINDS[name] = entry
    BLOCK_CONFIGS[name] = entry.config
    return entry


def kind(name: str) -> BlockKind:
    """The registered kind called ``name``; a KeyError lists the known ones."""
    try:
        return KINDS[name]
    except KeyError:
        raise KeyError(f"no block kind {name!r} is registered; known: {', '.join(kind_names())}") from None


def kind_names() -> tuple[str, ...]:
    """Every registered kind's name, sorted (so the order does not hang on import order)."""
    return tuple(sorted(KINDS))


def identity_kind() -> str:
    """The name of the identity kind (a search drops a layer by choosing it)."""
    for name, entry in KINDS.items():
        if entry.identity:
            return name
    raise KeyError("no identity block kind is registered")


def default_kind() -> str:
    """The name of the kind a space's layers take when the space names none."""
    for name, entry in KINDS.items():
        if entry.default:
            return name
    raise KeyError("no default block kind is registered")


def unregister_kind(name: str) -> BlockKind:
    """Remove kind ``name`` (a plugin's or a test's) from the registry and from ArchSpec parsing."""
    entry = kind(name)
    del KINDS[name]
    BLOCK_CONFIGS.pop(name, None)
    return entry
