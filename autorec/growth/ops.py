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
    >>> from torchrec.sparse.jagged_tensor import KeyedJaggedTensor
    >>> kjt = KeyedJaggedTensor.from_lengths_sync(["f"], torch.tensor([1, 2, 3]), torch.tensor([1, 2]))
    >>> dense = torch.randn(2, 2)
    >>> torch.allclose(big(dense, kjt), small(dense, kjt), atol=1e-6)
    True
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from autorec.arch import (
    ArchSpec,
    DhenConfig,
)
from autorec.growth.align import align
from autorec.growth.checks import check_model, check_pair, state_dict_of
from autorec.growth.layout import Space, remap, unit_norms
from autorec.growth.modules import DHEN_FINAL
from autorec.growth.plan import GrowthError, Plan, build_plan
from autorec.growth.shrink import shrink  # noqa: F401  (the module's example uses it)

StateDict = dict[str, torch.Tensor]
WIDEN_MODES = ("auto", "copy", "fresh")
PRUNE_METHODS = ("magnitude", "gates")


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
                for key in DHEN_FINAL[module]:
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
                for key in DHEN_FINAL[module]:
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
        state = gated_state(model)[0] if gates_of(model) else state_dict_of(model)
    sd = state
    check_model(spec, sd)
    device = next(iter(sd.values())).device
    sd = {k: v.detach().cpu() for k, v in sd.items()}
    aligned = align(spec, target, sd, generator)
    plan = build_plan(aligned, target)
    if growing:
        for space in plan.spaces.values():
            _grow_index(space, widen, exact, generator)
        if exact:
            _check_identities(plan)
    else:
        _prune_indices(plan, _importance(plan, sd, scores))
    new_model = _new_model(target, generator, None)
    new = state_dict_of(new_model)
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

