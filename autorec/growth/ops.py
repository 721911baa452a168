"""Structured pruning and function-preserving growth of a model, at the ArchSpec level.

A phase of a growth-and-pruning schedule is an ArchSpec; these operations move a trained model
from one phase's spec to the next's:

- :func:`shrink` gives the narrower spec (widths scaled by a ratio, per part or everywhere);
- :func:`prune` builds the model of a narrower spec from the kept slices of a trained model's
  weights: whole neurons, rank components, Wukong FMB/LCB rows, DHEN module rows and whole
  DHEN modules, chosen by magnitude (``||incoming|| * ||outgoing||``) or by learned gates
  (:mod:`autorec.growth.gates`), so the matrices really shrink;
- :func:`grow` builds the model of a wider or deeper spec computing exactly the same function:
  Net2Net widening (new units either copy old ones, their outgoing weights split among the
  copies in random fractions, or start fresh with zero outgoing weights) and deepening by identity-initialised
  layers (an MLP layer ``ReLU(I h) = h`` after a ReLU, a cross layer with ``W = 0, b = 0``).

The embedding tables are carried over exactly.

Where a consumer normalises over the units (Wukong's FM LayerNorm spans all F x rank
interactions; DHEN's attention takes a softmax over the rows), growth is exact only if every
old unit is copied equally often, i.e. the new size is a multiple of the old one; ``shrink``
picks such sizes, and ``grow`` refuses others unless ``exact=False``.

Example:
    >>> from autorec.arch import ArchSpec, TableSpec, DotConfig
    >>> from autorec.models import build_model
    >>> spec = ArchSpec(dim=4, n_dense=2, dense_arch=(8,), over_arch=(16, 8), layers=(DotConfig(),),
    ...                 tables=(TableSpec(name="t", features=("f",), num_embeddings=10, dim=4),))
    >>> half = shrink(spec, 0.5)
    >>> half.dense_arch, half.over_arch
    ((4,), (8, 4))
    >>> model = build_model(spec)
    >>> small = prune(model, spec, half)
    >>> small.over_arch[0]._mlp[0]._linear.weight.shape
    torch.Size([8, 8])
    >>> big = grow(small, half, spec)
    >>> kjt = KeyedJaggedTensor.from_lengths_sync(["f"], torch.tensor([1, 2, 3]), torch.tensor([1, 2]))
    >>> dense = torch.randn(2, 2)
    >>> torch.allclose(big(dense, kjt), small(dense, kjt), atol=1e-6)
    True
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

import torch
from torch import nn
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor  # noqa: F401  (doctest)

from autorec.arch import (
    ArchSpec,
    BlockConfig,
    CrossConfig,
    DhenConfig,
    MLPConfig,
    WukongConfig,
)
from autorec.blocks import kind, out_features
from autorec.growth.layout import Space, remap, unit_norms
from autorec.growth.plan import GrowthError, Plan, build_plan, merged_modules

StateDict = dict[str, torch.Tensor]
WIDEN_MODES = ("auto", "copy", "fresh")
PRUNE_METHODS = ("magnitude", "gates")
# Modules of a DHEN layer whose last linear map decides their output (scaled or zeroed as a whole).
_DHEN_FINAL = {"dot": ("linear.weight", "linear.bias"), "attention": ("project.linear.weight",),
               "dcn": ("linear.weight", "linear.bias"), "linear": ("linear.weight",),
               "conv": ("conv.weight", "conv.bias")}


# ---- shrink -----------------------------------------------------------------------------------
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


def module_scores(model: nn.Module, spec: ArchSpec) -> dict[str, dict[str, float]]:
    """Per DHEN layer (``layers.<i>``), the magnitude of each module's contribution.

    Concat: sqrt(sum of squares of the weights producing its rows) x sqrt(sum of squares of
    the weights reading them); a sum: the norm of its last linear map (times its softmax weight
    for ``weighted_sum``)."""
    sd = _state_dict(model)
    _check_model(spec, sd)
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
                           for k in _DHEN_FINAL[module])
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


# ---- checks -----------------------------------------------------------------------------------
def _width(path: str, old: int, new: int, growing: bool) -> None:
    if growing and new < old:
        raise GrowthError(f"{path}: growth cannot narrow {old} -> {new}")
    if not growing and new > old:
        raise GrowthError(f"{path}: pruning cannot widen {old} -> {new}")


def _depth(path: str, old: tuple[int, ...], new: tuple[int, ...], growing: bool,
           final_relu: bool) -> None:
    if growing:
        if len(new) < len(old):
            raise GrowthError(f"{path}: growth cannot remove layers: {list(old)} -> {list(new)}")
        if len(new) > len(old) and not old:
            raise GrowthError(
                f"{path}: cannot deepen {list(old)} -> {list(new)} exactly: an identity layer "
                "keeps the function only after a ReLU, and this MLP has no hidden layer to put "
                "it after" + ("" if final_relu else "; give the spec one hidden layer first"))
        for i in range(len(old), len(new)):
            if old and new[i] < old[-1]:
                raise GrowthError(
                    f"{path}[{i}]: an added layer starts as the identity on the {old[-1]} units "
                    f"before it, so it needs at least {old[-1]} units, got {new[i]}")
    elif len(new) != len(old):
        raise GrowthError(f"{path}: pruning keeps the depth: {list(old)} -> {list(new)}")
    for i, (a, b) in enumerate(zip(old, new, strict=False)):
        _width(f"{path}[{i}]", a, b, growing)


def check_pair(spec: ArchSpec, target: ArchSpec, growing: bool) -> None:
    """Raise :class:`GrowthError` unless ``target`` is a growth (or a pruning) of ``spec``."""
    verb = "growth" if growing else "pruning"
    for name in ("dim", "n_dense"):
        if getattr(spec, name) != getattr(target, name):
            raise GrowthError(f"{name}: {verb} keeps it: {getattr(spec, name)} -> {getattr(target, name)}")
    if spec.tables != target.tables:
        raise GrowthError(f"tables: {verb} carries the embedding tables as they are, but they differ "
                          f"({[t.name for t in spec.tables]} -> {[t.name for t in target.tables]})")
    towers = getattr(spec, "towers", None), getattr(target, "towers", None)
    if towers[0] != towers[1]:
        raise GrowthError(f"towers: {verb} keeps the DMT towers as they are (they are carried "
                          f"over, not pruned), but they differ: {towers[0]} -> {towers[1]}")
    if len(spec.layers) != len(target.layers):
        raise GrowthError(f"layers: {verb} keeps the number of interaction layers: "
                          f"{len(spec.layers)} -> {len(target.layers)}")
    _depth("dense_arch", spec.dense_arch, target.dense_arch, growing, True)
    _depth("over_arch", spec.over_arch, target.over_arch, growing, True)
    widths = spec.layer_widths()
    for i, (a, b) in enumerate(zip(spec.layers, target.layers, strict=True)):
        path = f"layers.{i}"
        if a.kind != b.kind:
            raise GrowthError(f"{path}: block kinds differ: {a.kind} -> {b.kind}")
        if isinstance(a, MLPConfig):
            assert isinstance(b, MLPConfig)
            _depth(f"{path}.mlp", a.hidden, b.hidden, growing, False)
            if a.n_out != b.n_out:
                raise GrowthError(f"{path}.n_out: the rows an mlp layer hands on stay: "
                                  f"{a.n_out} -> {b.n_out}")
        elif isinstance(a, CrossConfig):
            assert isinstance(b, CrossConfig)
            _check_cross(path, a, b, widths[i] * spec.dim, growing)
        elif isinstance(a, WukongConfig):
            assert isinstance(b, WukongConfig)
            for name in ("n_fm", "n_lcb", "rank"):
                _width(f"{path}.{name}", getattr(a, name), getattr(b, name), growing)
            _depth(f"{path}.mlp", a.mlp, b.mlp, growing, False)
        elif isinstance(a, DhenConfig):
            assert isinstance(b, DhenConfig)
            _check_dhen(path, a, b, growing)
        elif replace(a, precision=b.precision) != b:  # skip, dlrm, and kinds growth carries as they are
            raise GrowthError(f"{path}: a {a.kind} layer has nothing to prune or grow; {a} -> {b}")


def _check_cross(path: str, a: CrossConfig, b: CrossConfig, full: int, growing: bool) -> None:
    verb = "growth" if growing else "pruning"
    if (b.num_layers < a.num_layers) if growing else (b.num_layers > a.num_layers):
        raise GrowthError(f"{path}.num_layers: {verb} cannot go {a.num_layers} -> {b.num_layers}")
    if growing:
        if a.rank == 0 and b.rank != 0:
            raise GrowthError(f"{path}.rank: growth cannot make a full-rank layer low-rank (0 -> {b.rank})")
        if a.rank and b.rank and b.rank < a.rank:
            raise GrowthError(f"{path}.rank: growth cannot narrow {a.rank} -> {b.rank}")
    else:
        if a.rank and (b.rank == 0 or b.rank > a.rank):
            raise GrowthError(f"{path}.rank: pruning cannot go from rank {a.rank} to "
                              f"{b.rank or 'full (0)'}")
        if b.rank >= full:
            raise GrowthError(f"{path}.rank: a low rank of {b.rank} is no pruning of the "
                              f"{full} x {full} cross matrices")


def _check_dhen(path: str, a: DhenConfig, b: DhenConfig, growing: bool) -> None:
    for name in ("ensemble", "num_heads"):
        if getattr(a, name) != getattr(b, name):
            raise GrowthError(f"{path}.{name}: {getattr(a, name)!r} -> {getattr(b, name)!r} is no "
                              "pruning or growth")
    merged_modules(a.modules, b.modules, path)
    if growing and set(a.modules) - set(b.modules):
        raise GrowthError(f"{path}.modules: growth cannot remove modules: {list(a.modules)} -> "
                          f"{list(b.modules)}")
    if not growing and set(b.modules) - set(a.modules):
        raise GrowthError(f"{path}.modules: pruning cannot add modules: {list(a.modules)} -> "
                          f"{list(b.modules)}")
    _width(f"{path}.n_out", a.n_out, b.n_out, growing)
    if "dcn" in a.modules and "dcn" in b.modules:
        _width(f"{path}.dcn_layers", a.dcn_layers, b.dcn_layers, growing)


# ---- aligning depth and structure before the plan ---------------------------------------------
def _mlp_prefixes(spec: ArchSpec) -> list[tuple[str, str, tuple[int, ...]]]:
    """(part path, torchrec MLP prefix, hidden widths) of every MLP whose depth may change."""
    out = [("dense_arch", "dense_arch", spec.dense_arch)] if spec.n_dense else []
    out.append(("over_arch", "over_arch.0", spec.over_arch))
    for i, config in enumerate(spec.layers):
        if isinstance(config, MLPConfig):
            out.append((f"layers.{i}.mlp", f"layers.{i}.mlp.0", config.hidden))
        elif isinstance(config, WukongConfig):
            out.append((f"layers.{i}.mlp", f"layers.{i}.fmb.mlp.0", config.mlp))
    return out


def _with_hidden(spec: ArchSpec, part: str, hidden: tuple[int, ...]) -> ArchSpec:
    if part in ("dense_arch", "over_arch"):
        return spec.replace(**{part: hidden})
    i = int(part.split(".")[1])
    config = spec.layers[i]
    layers = list(spec.layers)
    if isinstance(config, MLPConfig):
        layers[i] = replace(config, hidden=hidden)
    else:
        layers[i] = replace(config, mlp=hidden)
    return spec.replace(layers=tuple(layers))


def _deepen_mlps(spec: ArchSpec, target: ArchSpec, sd: StateDict) -> ArchSpec:
    """Identity layers appended after each MLP's last hidden layer, up to the target's depth."""
    deep = spec
    for (part, prefix, old), (_, _, new) in zip(_mlp_prefixes(spec), _mlp_prefixes(target), strict=True):
        if len(new) <= len(old):
            continue
        width = old[-1]
        if part == "dense_arch":  # its final layer (to D) is the MLP's last: move it to the end
            for key in ("weight", "bias"):
                sd[f"dense_arch._mlp.{len(new)}._linear.{key}"] = sd.pop(
                    f"dense_arch._mlp.{len(old)}._linear.{key}")
        for i in range(len(old), len(new)):
            sd[f"{prefix}._mlp.{i}._linear.weight"] = torch.eye(width)
            sd[f"{prefix}._mlp.{i}._linear.bias"] = torch.zeros(width)
        deep = _with_hidden(deep, part, old + (width,) * (len(new) - len(old)))
    return deep


def _cross_layers(sd: StateDict, prefix: str, old: CrossConfig, new: CrossConfig, full: int,
                  generator: torch.Generator | None) -> CrossConfig:
    """Align a cross network's layers and rank form with ``new``'s: zero (identity) layers
    added, low-rank turned full (W V), full turned low-rank (truncated SVD), layers dropped
    (the smallest by ||W|| + ||b||). Returns the aligned config; ``sd`` is edited in place."""
    def take(name: str) -> torch.Tensor:
        return sd.pop(f"{prefix}.{name}")

    layers: list[dict[str, torch.Tensor]] = []
    for layer in range(old.num_layers):
        if old.rank:
            layers.append({"W": take(f"W_kernels.{layer}"), "V": take(f"V_kernels.{layer}"),
                           "b": take(f"bias.{layer}")})
        else:
            layers.append({"K": take(f"kernels.{layer}"), "b": take(f"bias.{layer}").squeeze(-1)})
    rank = old.rank
    if new.num_layers < len(layers):
        def size(p: dict[str, torch.Tensor]) -> float:
            kernel = p["K"] if "K" in p else p["W"] @ p["V"]
            return float(kernel.norm() + p["b"].norm())
        keep = sorted(sorted(range(len(layers)), key=lambda i: -size(layers[i]))[:new.num_layers])
        layers = [layers[i] for i in keep]
    if rank and new.rank == 0:
        layers = [{"K": p["W"] @ p["V"], "b": p["b"]} for p in layers]
        rank = 0
    elif rank == 0 and new.rank:
        converted = []
        for p in layers:
            u, s, vh = torch.linalg.svd(p["K"])
            root = s[:new.rank].sqrt()
            converted.append({"W": u[:, :new.rank] * root, "V": root[:, None] * vh[:new.rank], "b": p["b"]})
        layers, rank = converted, new.rank
    while len(layers) < new.num_layers:  # x0 * (0 x + 0) + x = x
        if rank:
            v = torch.empty(rank, full)
            nn.init.xavier_normal_(v, generator=generator)
            layers.append({"W": torch.zeros(full, rank), "V": v, "b": torch.zeros(full)})
        else:
            layers.append({"K": torch.zeros(full, full), "b": torch.zeros(full)})
    for layer, p in enumerate(layers):
        if rank:
            sd[f"{prefix}.W_kernels.{layer}"], sd[f"{prefix}.V_kernels.{layer}"] = p["W"], p["V"]
            sd[f"{prefix}.bias.{layer}"] = p["b"]
        else:
            sd[f"{prefix}.kernels.{layer}"], sd[f"{prefix}.bias.{layer}"] = p["K"], p["b"][:, None]
    return replace(old, num_layers=len(layers), rank=rank)


def _align(spec: ArchSpec, target: ArchSpec, sd: StateDict, generator: torch.Generator | None
           ) -> ArchSpec:
    """Make ``spec`` (and ``sd``) the same depth and structure as ``target``, widths as they are."""
    aligned = _deepen_mlps(spec, target, sd)
    widths = spec.layer_widths()
    layers = list(aligned.layers)
    for i, (a, b) in enumerate(zip(spec.layers, target.layers, strict=True)):
        path = f"layers.{i}"
        if isinstance(a, CrossConfig):
            assert isinstance(b, CrossConfig)
            layers[i] = _cross_layers(sd, f"{path}.cross", a, b, widths[i] * spec.dim, generator)
        elif isinstance(a, DhenConfig):
            assert isinstance(b, DhenConfig)
            if "dcn" in a.modules and "dcn" in b.modules and a.dcn_layers != b.dcn_layers:
                full = widths[i] * spec.dim
                prefix = f"{path}.interactions.dcn.cross"
                _cross_layers(sd, prefix, CrossConfig(num_layers=a.dcn_layers),
                              CrossConfig(num_layers=b.dcn_layers), full, generator)
                layers[i] = replace(layers[i], dcn_layers=b.dcn_layers)
    aligned = aligned.replace(layers=tuple(layers))
    _identity_shortcuts(spec, target, sd)
    return aligned


def _identity_shortcuts(spec: ArchSpec, target: ArchSpec, sd: StateDict) -> None:
    """An identity residual/shortcut that the target turns into a FeatureLinear enters as I."""
    old_w, new_w = spec.layer_widths(), target.layer_widths()
    for i, (a, b) in enumerate(zip(spec.layers, target.layers, strict=True)):
        if not isinstance(a, (WukongConfig, DhenConfig)):
            continue
        name = "residual" if isinstance(a, WukongConfig) else "shortcut"
        if old_w[i] == old_w[i + 1] and new_w[i] != new_w[i + 1]:
            sd[f"layers.{i}.{name}.linear.weight"] = torch.eye(old_w[i])
        if isinstance(a, WukongConfig) and not a.n_lcb and isinstance(b, WukongConfig) and b.n_lcb:
            sd[f"layers.{i}.lcb.linear.weight"] = torch.zeros(0, old_w[i])


# ---- indices --------------------------------------------------------------------------------
def _importance(plan: Plan, sd: StateDict, scores: Mapping[str, torch.Tensor] | None
                ) -> dict[str, torch.Tensor]:
    """Per space, one score per old unit: the given scores (gates), else
    sqrt(sum of squares produced) * sqrt(sum of squares consumed) (either alone if the other
    side has no weights)."""
    result: dict[str, torch.Tensor] = {}
    for name, space in plan.spaces.items():
        if space.new >= space.old:
            continue
        if scores is not None and name in scores:
            result[name] = scores[name].detach().abs().float()
            continue
        produced, consumed = torch.zeros(space.old), torch.zeros(space.old)
        for key, axes in plan.rules.items():
            if key in sd:
                p, c = unit_norms(sd[key], axes, name, plan.spaces)
                produced += p
                consumed += c
        if produced.any() and consumed.any():
            result[name] = produced.sqrt() * consumed.sqrt()
        else:
            result[name] = (produced + consumed).sqrt()
    return result


def _prune_indices(plan: Plan, importance: Mapping[str, torch.Tensor]) -> None:
    for name, space in plan.spaces.items():
        if space.new >= space.old:
            space.index = torch.arange(space.old)
        else:
            top = torch.topk(importance[name], space.new, sorted=False).indices
            space.index = torch.sort(top).values


def _grow_index(space: Space, widen: str, exact: bool, generator: torch.Generator | None) -> None:
    """Set ``space.index`` (old units, then copies or fresh units) and, with copies, unequal
    ``space.share``s: each old unit's outgoing weights split among it and its copies in random
    fractions (uniform in [0.5, 1.5], normalised), so the function is kept and the copies,
    getting unequal gradients, part ways in training."""
    extra = space.new - space.old
    space.index = torch.arange(space.old)
    if extra <= 0:
        return
    copy = widen == "copy" or (widen == "auto" and space.stat)
    if space.stat and exact:
        if space.old == 0 or space.new % space.old:
            raise GrowthError(
                f"{space.name}: growing {space.old} -> {space.new} cannot keep the function "
                "exactly: a consumer normalises over these units (a LayerNorm across them or a "
                "softmax over them), so every old unit must be copied equally often; grow to a "
                f"multiple of {space.old}, or pass exact=False")
        if widen == "fresh":
            raise GrowthError(f"{space.name}: fresh units change what a LayerNorm or softmax over "
                              "these units computes; use widen='copy' or 'auto', or exact=False")
    if copy and space.old:
        added = torch.arange(extra) % space.old
        space.index = torch.cat([space.index, added])
        weights = 0.5 + torch.rand(space.new, generator=generator)
        totals = torch.zeros(space.old).index_add_(0, space.index, weights)
        space.share = weights / totals[space.index]
    else:
        space.index = torch.cat([space.index, torch.full((extra,), -1, dtype=torch.long)])


def _check_identities(plan: Plan) -> None:
    for path in plan.lost:
        raise GrowthError(f"{path}: the target has as many rows out of this layer as into it, so "
                          "its shortcut is an identity, but the model's is a learned "
                          "FeatureLinear; growth cannot keep the function (pass exact=False to "
                          "drop it, or keep rows in != rows out)")
    for path, rows, out in plan.identities:
        r, o = rows.index(plan.spaces), out.index(plan.spaces)
        if not bool(((o == r) | (o < 0)).all()):
            raise GrowthError(f"{path}: the new model's identity shortcut would add input rows "
                              f"{r.tolist()} (old numbering) to output rows {o.tolist()}; growth "
                              "keeps the function only when each row meets its old partner; grow "
                              "the rows before and after this layer by the same factor")


# ---- applying the plan ----------------------------------------------------------------------
def _new_model(target: ArchSpec, generator: torch.Generator | None, device: torch.device | None
               ) -> nn.Module:
    from autorec.models import build_model

    if generator is None:
        return build_model(target, device=device)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(torch.randint(0, 2**62, (1,), generator=generator)))
        return build_model(target, device=device)


def _state_dict(model: nn.Module) -> StateDict:
    """Detached tensors; the dense ones cloned (they are edited), the embedding tables not
    (they are only read, and may be large)."""
    return {k: v.detach() if k.startswith("sparse_arch.") else v.detach().clone()
            for k, v in model.state_dict().items()}


def _dhen_ensembles(spec: ArchSpec, target: ArchSpec, sd: StateDict, new: StateDict) -> None:
    """Added modules start silent; a weighted sum's other modules are rescaled so the softmax
    over one more logit leaves their weighted sum as it was. Dropped modules' logits go."""
    for i, (a, b) in enumerate(zip(spec.layers, target.layers, strict=True)):
        if not isinstance(a, DhenConfig):
            continue
        assert isinstance(b, DhenConfig)
        prefix = f"layers.{i}"
        added = [m for m in b.modules if m not in a.modules]
        if a.ensemble != "concat":
            for module in added:
                for key in _DHEN_FINAL[module]:
                    new[f"{prefix}.interactions.{module}.{key}"].zero_()
        if a.ensemble != "weighted_sum":
            continue
        old_logits = sd[f"{prefix}.ensemble_logits"]
        by_name = dict(zip(a.modules, old_logits, strict=True))
        kept = [m for m in b.modules if m in a.modules]
        fill = torch.stack([by_name[m] for m in kept]).mean() if kept else torch.zeros(())
        logits = torch.stack([by_name.get(m, fill) for m in b.modules])
        new[f"{prefix}.ensemble_logits"] = logits
        if added:
            factor = torch.logsumexp(logits, 0).exp() / torch.logsumexp(
                torch.stack([by_name[m] for m in kept]), 0).exp()
            for module in kept:
                for key in _DHEN_FINAL[module]:
                    new[f"{prefix}.interactions.{module}.{key}"] *= factor


def transfer(model: nn.Module, spec: ArchSpec, target: ArchSpec, *, growing: bool,
             generator: torch.Generator | None = None, widen: str = "auto", exact: bool = True,
             scores: Mapping[str, torch.Tensor] | None = None, state: StateDict | None = None
             ) -> nn.Module:
    """The model of ``target`` from ``model`` (of ``spec``): :func:`prune` and :func:`grow`."""
    if widen not in WIDEN_MODES:
        raise GrowthError(f"widen: expected one of {', '.join(WIDEN_MODES)}, got {widen!r}")
    for name, value in (("spec", spec), ("target", target)):
        if not isinstance(value, ArchSpec):
            raise GrowthError(f"{name}: expected an ArchSpec, got {type(value).__name__}")
    check_pair(spec, target, growing)
    if state is None:
        from autorec.growth.gates import gated_state, gates_of

        # A gated model enters with its gates folded into the weights (the new model has none).
        state = gated_state(model)[0] if gates_of(model) else _state_dict(model)
    sd = state
    _check_model(spec, sd)
    device = next(iter(sd.values())).device
    sd = {k: v.detach().cpu() for k, v in sd.items()}
    aligned = _align(spec, target, sd, generator)
    plan = build_plan(aligned, target)
    if growing:
        for space in plan.spaces.values():
            _grow_index(space, widen, exact, generator)
        if exact:
            _check_identities(plan)
    else:
        _prune_indices(plan, _importance(plan, sd, scores))
    new_model = _new_model(target, generator, None)
    new = _state_dict(new_model)
    for key, init in new.items():
        if key in plan.rules and key in sd:
            new[key] = remap(sd[key], init, plan.rules[key], plan.spaces)
        elif key in sd and not key.endswith(".ensemble_logits"):  # those: _dhen_ensembles
            if sd[key].shape != init.shape:
                raise RuntimeError(f"{key}: {tuple(sd[key].shape)} -> {tuple(init.shape)} with no rule")
            new[key] = sd[key]
    _dhen_ensembles(spec, target, sd, new)
    new_model.load_state_dict(new)
    return new_model.to(device)


def _check_model(spec: ArchSpec, sd: StateDict) -> None:
    from autorec.models import build_model

    with torch.device("meta"):
        expected = build_model(spec).state_dict()
    for key, value in expected.items():
        if key not in sd:
            raise GrowthError(f"model: it is not a model of spec (no {key!r} in its state_dict)")
        if sd[key].shape != value.shape:
            raise GrowthError(f"model: it is not a model of spec ({key!r} is {tuple(sd[key].shape)}, "
                              f"spec gives {tuple(value.shape)})")


def prune(model: nn.Module, spec: ArchSpec, target: ArchSpec, *, method: str = "magnitude"
          ) -> nn.Module:
    """A model of ``target`` (a pruning of ``spec``: narrower, fewer cross layers, a lower
    rank, fewer DHEN modules) whose weights are the kept slices of ``model``'s.

    Structured: whole hidden neurons, rank components, Wukong FMB/LCB rows, DHEN module rows,
    whole DHEN modules and cross layers go, so the matrices (and the FLOPs) really shrink. The
    units kept are those of largest ``||incoming|| * ||outgoing||`` (``method="magnitude"``), or
    of largest learned gate (``method="gates"``: ``model`` carries gates from
    :func:`autorec.growth.gates.add_gates`; the gate values are folded into the weights kept).
    A full-rank cross layer pruned to rank r keeps its truncated SVD. Embedding tables are
    carried over as they are. A learned residual/shortcut that the target's sizes turn into an
    identity (rows in == rows out) is dropped; keep rows in != rows out to avoid that.

    Example:
        >>> from autorec.arch import ArchSpec, TableSpec
        >>> from autorec.models import build_model
        >>> spec = ArchSpec(dim=4, tables=(TableSpec(name="t", features=("f",), num_embeddings=10, dim=4),),
        ...                 over_arch=(16,))
        >>> small = prune(build_model(spec), spec, shrink(spec, 0.25))
        >>> small.over_arch[0]._mlp[0]._linear.weight.shape
        torch.Size([4, 4])
    """
    if method not in PRUNE_METHODS:
        raise GrowthError(f"method: expected one of {', '.join(PRUNE_METHODS)}, got {method!r}")
    if method == "gates":
        from autorec.growth.gates import gated_state

        state, scores = gated_state(model)
        return transfer(model, spec, target, growing=False, scores=scores, state=state)
    return transfer(model, spec, target, growing=False)


def grow(model: nn.Module, spec: ArchSpec, target: ArchSpec, *,
         generator: torch.Generator | None = None, widen: str = "auto", exact: bool = True
         ) -> nn.Module:
    """A model of ``target`` (wider and/or deeper than ``spec``) computing what ``model`` does.

    Widening: each space of units (hidden neurons, rank components, rows) keeps its old units
    and adds new ones: with ``widen="fresh"`` new units take fresh incoming weights and zero
    outgoing ones; with ``"copy"`` (Net2Net) they copy old units round-robin and the outgoing
    weights are split among the copies in random fractions summing to 1 (the function is kept;
    the copies get unequal gradients, so they part ways in training); ``"auto"`` copies only
    where a consumer normalises over the units (there every unit must be copied equally often:
    new size a multiple of the old, else a :class:`GrowthError`, unless ``exact=False``).
    Deepening: MLP layers initialised to
    the identity after the last hidden layer, cross layers with zero weights, a low-rank cross
    layer made full-rank as ``W V``; DHEN modules added silent (zero last layer). Fresh weights
    are drawn from ``generator`` when given. A model carrying gates
    (:func:`autorec.growth.gates.add_gates`) enters with its gates folded into its weights;
    the grown model has none (as a pruned one).

    Example:
        >>> from autorec.arch import ArchSpec, TableSpec
        >>> from autorec.models import build_model
        >>> spec = ArchSpec(dim=4, tables=(TableSpec(name="t", features=("f",), num_embeddings=10, dim=4),),
        ...                 over_arch=(4,))
        >>> bigger = grow(build_model(spec), spec, spec.replace(over_arch=(8, 6)))
        >>> bigger.over_arch[0]._mlp[1]._linear.weight.shape
        torch.Size([6, 8])
    """
    return transfer(model, spec, target, growing=True, generator=generator, widen=widen, exact=exact)

