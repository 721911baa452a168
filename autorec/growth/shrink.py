"""The narrower spec of a phase: widths scaled by a ratio, per part or everywhere.

:func:`shrink` works on the ArchSpec alone (no weights): what it keeps, and how it rounds sizes
that a consumer normalises over, is what lets :func:`autorec.growth.ops.grow` restore any shrink
of a spec exactly. Which rows a layer may give up is decided by the layer that reads them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

import torch

from autorec.arch import (
    ArchSpec,
    BlockConfig,
    CrossConfig,
    DhenConfig,
    MLPConfig,
    WukongConfig,
)
from autorec.blocks import kind, out_features
from autorec.growth.plan import GrowthError

StateDict = dict[str, torch.Tensor]


def part_names(spec: ArchSpec) -> tuple[str, ...]:
    """The parts a ratio mapping may name: dense_arch (with a dense input), layers.<i>, over_arch."""
    return ((("dense_arch",) if spec.n_dense and spec.dense_arch else ())
            + tuple(f"layers.{i}" for i in range(len(spec.layers))) + ("over_arch",))


def _ratios(spec: ArchSpec, ratio: float | Mapping[str, float]) -> dict[str, float]:
    names = part_names(spec)
    if isinstance(ratio, Mapping):
        unknown = sorted(set(ratio) - set(names))
        if unknown:
            raise GrowthError(f"ratio[{unknown[0]!r}]: unknown part; expected one of {', '.join(names)}")
        given = dict(ratio)
    else:
        given = dict.fromkeys(names, ratio)
    for name, value in given.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
            raise GrowthError(f"ratio[{name!r}]: expected a number in (0, 1], got {value!r}")
    return {name: float(given.get(name, 1.0)) for name in names}


def _scale(size: int, ratio: float, minimum: int = 1) -> int:
    return max(minimum, math.floor(size * ratio + 0.5))


def _scale_all(sizes: tuple[int, ...], ratio: float) -> tuple[int, ...]:
    return tuple(_scale(s, ratio) for s in sizes)


def _divided(sizes: tuple[int, ...], ratio: float, minimum: int = 1) -> tuple[int, ...]:
    """``sizes`` divided by the power of two c (a common divisor) whose 1/c is nearest
    ``ratio`` (ties: the smaller result; their sum kept >= ``minimum``). Growing back then
    multiplies every size by one whole number, and of any two shrinks of one spec the smaller
    size divides the larger, so every phase of a schedule grows exactly into every later one."""
    if ratio >= 1:
        return sizes
    g = 0
    for s in sizes:
        g = math.gcd(g, s)
    fits = [c for c in (2**k for k in range(g.bit_length()))
            if g % c == 0 and sum(sizes) // c >= minimum]
    best = min(fits, key=lambda c: (abs(1 / c - ratio), -c))
    return tuple(s // best for s in sizes)


def _consumer(layers: tuple[BlockConfig, ...], i: int) -> BlockConfig | None:
    """The first layer after ``i`` that does not hand its input rows on unchanged."""
    for config in layers[i + 1:]:
        if not kind(config.kind).pass_through:
            return config
    return None


def _row_rules(layers: tuple[BlockConfig, ...], i: int) -> tuple[bool, bool, int]:
    """For the rows leaving layer ``i``: (keep them: the consumer is carried as it is, as a dlrm
    layer or a kind with no growth rules; a consumer normalises over them; the fewest rows the
    consumer takes)."""
    consumer = _consumer(layers, i)
    if consumer is None or isinstance(consumer, MLPConfig):
        return False, False, 1
    if isinstance(consumer, WukongConfig):
        return False, True, 1
    if isinstance(consumer, DhenConfig):
        return False, "attention" in consumer.modules, 2 if "dot" in consumer.modules else 1
    return True, False, 1


def _keep_identity(config: BlockConfig, identity: bool, num_in: int) -> BlockConfig:
    """Rows out set back to rows in where the spec's layer had an identity shortcut (so growing
    back does not meet a learned shortcut that has to become an identity), when they fit."""
    if not identity:
        return config
    if isinstance(config, WukongConfig) and (num_in * config.n_fm) % (config.n_fm + config.n_lcb) == 0:
        n_fm = num_in * config.n_fm // (config.n_fm + config.n_lcb)
        if n_fm >= 1:
            return replace(config, n_fm=n_fm, n_lcb=num_in - n_fm)
    if isinstance(config, DhenConfig):
        per = 1 if config.ensemble != "concat" else len(config.modules)
        if num_in % per == 0:
            return replace(config, n_out=num_in // per)
    return config


def shrink(spec: ArchSpec, ratio: float | Mapping[str, float]) -> ArchSpec:
    """The same architecture with its widths scaled by ``ratio`` (never below 1).

    Per part (``"dense_arch"``, ``"layers.<i>"``, ``"over_arch"``; a float scales every part):
    MLP hidden widths; a DCNv2 layer's rank (a full-rank layer becomes low-rank at the rank
    whose FLOPs are ``ratio`` of the full ones, ``N * ratio / 2`` for N = F*D); a Wukong
    layer's FM rank, MLP widths and FMB/LCB rows; a DHEN layer's rows per module. Sizes whose
    consumers normalise over them (the FM rank; rows feeding a Wukong or attention layer) are
    divided by a power of two, the one nearest ``1/ratio``, so :func:`grow` restores them
    exactly, from any shrink of the same spec to any wider one. The embedding tables, the
    depth, the block kinds and the interface D stay.

    Example:
        >>> from autorec.arch import ArchSpec, TableSpec, WukongConfig
        >>> table = TableSpec(name="t", features=("a", "b"), num_embeddings=5, dim=8)
        >>> spec = ArchSpec(dim=8, tables=(table,),
        ...                 layers=(WukongConfig(n_fm=8, n_lcb=4, rank=8, mlp=(64,)),) * 2, over_arch=(32,))
        >>> [(c.n_fm, c.n_lcb, c.rank, c.mlp) for c in shrink(spec, 0.5).layers]
        [(4, 2, 4, (32,)), (4, 2, 4, (32,))]
        >>> shrink(spec, {"over_arch": 0.25}).over_arch
        (8,)
    """
    ratios = _ratios(spec, ratio)
    changes: dict[str, object] = {}
    if "dense_arch" in ratios:
        changes["dense_arch"] = _scale_all(spec.dense_arch, ratios["dense_arch"])
    changes["over_arch"] = _scale_all(spec.over_arch, ratios["over_arch"])
    widths = spec.layer_widths()
    new_widths = [widths[0]]
    layers: list[BlockConfig] = []
    for i, config in enumerate(spec.layers):
        r = ratios[f"layers.{i}"]
        keep, stat, least = _row_rules(spec.layers, i)
        row_ratio = 1.0 if keep else r
        if isinstance(config, MLPConfig):
            config = replace(config, hidden=_scale_all(config.hidden, r))
        elif isinstance(config, CrossConfig) and r < 1:
            full = widths[i] * spec.dim
            rank = _scale(full, r / 2) if config.rank == 0 else _scale(config.rank, r)
            config = replace(config, rank=rank if rank < full else 0)
        elif isinstance(config, WukongConfig):
            rows = (config.n_fm, config.n_lcb)
            if stat:
                n_fm, n_lcb = _divided(rows, row_ratio, least)
            else:
                n_fm = _scale(config.n_fm, row_ratio, least)
                n_lcb = _scale(config.n_lcb, row_ratio, minimum=0) if config.n_lcb else 0
            (rank,) = _divided((config.rank,), r)
            config = replace(config, n_fm=n_fm, n_lcb=n_lcb, rank=rank, mlp=_scale_all(config.mlp, r))
        elif isinstance(config, DhenConfig):
            per = 1 if config.ensemble != "concat" else len(config.modules)
            least = -(-least // per)
            (n_out,) = (_divided((config.n_out,), row_ratio, least) if stat
                        else (_scale(config.n_out, row_ratio, least),))
            config = replace(config, n_out=n_out)
        config = _keep_identity(config, widths[i] == widths[i + 1], new_widths[-1])
        new_widths.append(out_features(config, new_widths[-1], spec.dim))
        layers.append(config)
    return spec.replace(layers=tuple(layers), **changes)
