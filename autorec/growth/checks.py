"""What a prune or a growth step may do, checked before any weight moves.

:func:`check_pair` compares a spec with its target part by part (widths only grow when growing,
only shrink when pruning; depth, kinds and the interface stay) and :func:`check_model` checks
that a model's weights are those of its spec. Each refusal is a :class:`GrowthError` naming the
part (``layers.1.rank``) and both sizes.
"""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import nn

from autorec.arch import (
    ArchSpec,
    CrossConfig,
    DhenConfig,
    MLPConfig,
    WukongConfig,
)
from autorec.growth.plan import GrowthError, merged_modules

StateDict = dict[str, torch.Tensor]


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


def state_dict_of(model: nn.Module) -> StateDict:
    """Detached tensors; the dense ones cloned (they are edited), the embedding tables not
    (they are only read, and may be large)."""
    return {k: v.detach() if k.startswith("sparse_arch.") else v.detach().clone()
            for k, v in model.state_dict().items()}



def check_model(spec: ArchSpec, sd: StateDict) -> None:
    from autorec.models import build_model

    with torch.device("meta"):
        expected = build_model(spec).state_dict()
    for key, value in expected.items():
        if key not in sd:
            raise GrowthError(f"model: it is not a model of spec (no {key!r} in its state_dict)")
        if sd[key].shape != value.shape:
            raise GrowthError(f"model: it is not a model of spec ({key!r} is {tuple(sd[key].shape)}, "
                              f"spec gives {tuple(value.shape)})")

