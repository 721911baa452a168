"""A single path's forward on its live vectors only: the supernet at the width the path gives.

The padded supernet (:class:`~autorec.supernet.supernet.Supernet`) carries zero vectors where
a path has none: the features its embedding widths drop (width 0), the outputs past each
layer's chosen widths (``n_fm``, ``n_lcb``, ``n_out``, DHEN's unchosen modules) and the padding
of every layer's output to the widest its kinds give. The next layer still runs at the padded
width: a full-rank cross layer on 32 padded vectors costs four times what it costs on the 16 its
input holds, and the over-arch reads every padded column.

:func:`compact_forward` carries only the live vectors ``x [B, L, D]`` with their positions
``live [L]`` among the padded ones, and each op computes on them with the matching rows and
columns of its weights. Zero vectors add nothing to a linear map, so this is the padded
forward's arithmetic without its zero terms: the logits and every gradient equal the padded
ones up to float rounding (tests/supernet/test_compact.py checks both on random paths). Two
places need care: Wukong's LayerNorm over its flattened FM output counts the zero entries in
its mean and variance, and their normalised value (``-mean / std``, times the LayerNorm weight,
plus its bias) enters the MLP: :func:`_wukong` adds that term from the weights' dead columns.
DLRM's dots of live vectors land at scattered places of its padded output, so a layer's live
part is kept as flat values with their positions (:class:`Live`), which the cross layers and the
over-arch read as they are and the vector ops regroup. DHEN's modules (attention's softmax counts
zero keys too) and the MLP op run on the padded input, their live outputs taken after.

It applies where a step needs no gradient for the architecture weights (uniform single-path
training, scoring candidates): every choice's weights one-hot and not requiring grad, no
towers. A layer in a precision other than fp32 runs padded (the quantisers block along the
padded axes).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from autorec.blocks.gram import pair_dots
from autorec.precision.layers import AtPrecision, as_precision
from autorec.supernet.hashing import pooled_by_hash
from autorec.supernet.mixed import (
    MaskedOverArch,
    MixedChoice,
    Weights,
    one_hot_index,
    projected_width,
    times_chosen,
)
from autorec.supernet.ops import SuperBlock, SuperCross, SuperDhen, SuperDot, SuperSkip, SuperWukong


@dataclass(frozen=True)
class Live:
    """A layer's live values: ``x`` [B, V] and their positions ``cols`` [V] (ascending) in the
    padded output flattened to [F * D]. Most layers give whole vectors; DLRM's dots do not."""

    x: torch.Tensor
    cols: torch.Tensor


def single_path(weights: Weights) -> bool:
    """Whether ``weights`` pick one value per choice and carry no gradient to the logits."""
    return all(not w.requires_grad and one_hot_index(w) is not None for w in weights.values())


def _chosen(op: SuperBlock, weights: Weights, key: str) -> object:
    """The value of ``op``'s field ``key`` on a single path."""
    j = one_hot_index(op.weights(weights, key))
    assert j is not None, f"{op.prefix}.{key}: not a single path"
    return op.fields[key][j]


def _columns(vectors: torch.Tensor, dim: int) -> torch.Tensor:
    """The flat positions ([L * dim]) of the values of ``vectors`` [L]."""
    return (vectors[:, None] * dim + torch.arange(dim, device=vectors.device)).flatten()


def of_vectors(x: torch.Tensor, vectors: torch.Tensor) -> Live:
    """Live vectors ``x`` [B, L, D] at positions ``vectors`` [L] (ascending)."""
    return Live(x.flatten(1), _columns(vectors, x.shape[2]))


def as_vectors(live: Live, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(x [B, L, D], positions [L]) of the vectors holding a live value, the others of their
    values zero."""
    vectors = torch.unique(live.cols // dim)  # sorted
    if live.cols.numel() == vectors.numel() * dim:  # whole vectors (cols ascending)
        return live.x.view(live.x.shape[0], -1, dim), vectors
    place = torch.searchsorted(vectors, live.cols // dim) * dim + live.cols % dim
    x = live.x.new_zeros(live.x.shape[0], vectors.numel() * dim).index_copy(1, place, live.x)
    return x.view(x.shape[0], -1, dim), vectors


def _padded(live: Live, width: int, dim: int) -> torch.Tensor:
    """The padded input [B, width, D]: the live values in place, zeros elsewhere."""
    x = live.x.new_zeros(live.x.shape[0], width * dim).index_copy(1, live.cols, live.x)
    return x.view(-1, width, dim)


def _feature_linear(weight: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """A FeatureLinear's map with ``weight`` [F_out, L] on ``x`` [B, L, D] -> [B, F_out, D]."""
    return F.linear(x.transpose(1, 2), weight).transpose(1, 2)


# ---- the ops ----------------------------------------------------------------------------------
def _cross(op: SuperCross, live: Live, weights: Weights) -> Live:
    """DCNv2 on the live columns: ``x_{l+1} = x_l + x_0 * (W_l[cols, cols] x_l + b_l[cols])``."""
    cols = live.cols
    depth, rank = int(_chosen(op, weights, "num_layers")), int(_chosen(op, weights, "rank"))
    x0 = xl = live.x
    for layer in range(depth):
        if rank == 0:
            kernel = op.kernels[layer].index_select(0, cols).index_select(1, cols)
            product = F.linear(xl, kernel, op.full_bias[layer].index_select(0, cols))
        else:
            v = F.linear(xl, op.V[layer][:rank].index_select(1, cols))
            product = F.linear(v, op.W[layer][:, :rank].index_select(0, cols),
                               op.low_bias[layer].index_select(0, cols))
        xl = xl + x0 * product
    return Live(xl, cols)


def _dot(op: SuperDot, live: Live, weights: Weights) -> Live:
    """DLRM's passthrough and dots of the live vectors only, at their places in the padded
    layout (passthrough vectors, then the upper triangle's dots)."""
    x, vectors = as_vectors(live, op.dim)
    n_pass = int(_chosen(op, weights, "n_passthrough")) if op.n_pass else 0
    with_self = bool(_chosen(op, weights, "self_interaction")) if op.with_self else False
    kept = int((vectors < n_pass).sum())  # the first live vectors, as positions ascend
    first, second, places = _pair_places(op.triu, op.num_in, vectors, offset=0 if with_self else 1)
    cols = torch.cat([_columns(vectors[:kept], op.dim), op.n_pass * op.dim + places])
    return Live(pair_dots(x, first, second, passthrough=kept), cols)


def _wukong(op: SuperWukong, live: Live, weights: Weights) -> Live:
    """Wukong on the live vectors: the FM rows and the LayerNorm's live entries, plus the dead
    entries' share of the MLP's first layer; only the chosen FMB and LCB outputs."""
    x, vectors = as_vectors(live, op.dim)
    b, dim, k_max = x.shape[0], op.dim, op.proj.shape[1]
    rank, n_fm = int(_chosen(op, weights, "rank")), int(_chosen(op, weights, "n_fm"))
    n_lcb = int(_chosen(op, weights, "n_lcb")) if op.lcb is not None else 0
    fm = torch.bmm(x, torch.einsum("bfd,fk->bdk", x, op.proj[vectors, :rank])).flatten(1)  # [B, L*r]
    entries = (vectors[:, None] * k_max + torch.arange(rank, device=x.device)).flatten()
    dead = torch.ones(op.num_in * k_max, dtype=torch.bool, device=x.device)
    dead[entries] = False
    dead = dead.nonzero().flatten()
    # LayerNorm over all num_in * k_max entries, the zero ones included (two-pass variance)
    n = op.num_in * k_max
    mean = fm.sum(1, keepdim=True) / n
    var = (((fm - mean) ** 2).sum(1, keepdim=True) + (n - fm.shape[1]) * mean**2) / n
    inv = torch.rsqrt(var + op.fm_norm.eps)
    gamma, beta = op.fm_norm.weight, op.fm_norm.bias
    z = (fm - mean) * inv * gamma[entries] + beta[entries]
    # the MLP (one-hot hidden sizes), its first layer fed the dead entries' normalised value
    mlp, w_mlp = op.mlp, op.weights(weights, "mlp")
    j = one_hot_index(w_mlp)
    assert j is not None
    sizes = mlp.options[j]
    chain = mlp.chains[str(len(sizes))]
    rows = [*sizes, n_fm * dim]  # each layer's output units on this path
    w0, b0 = chain[0].weight[: rows[0]], chain[0].bias[: rows[0]]
    w_dead = w0.index_select(1, dead)
    h = (F.linear(z, w0.index_select(1, entries), b0) + (-mean * inv) * (w_dead @ gamma[dead])
         + w_dead @ beta[dead])
    for k, layer in enumerate(chain[1:], start=1):
        h = F.linear(torch.relu(h), layer.weight[: rows[k], : h.shape[1]], layer.bias[: rows[k]])
    parts = [times_chosen(w_mlp, j, h).view(b, n_fm, dim)]
    out = torch.arange(n_fm, device=x.device)
    if n_lcb:
        assert op.lcb is not None
        parts.append(_feature_linear(op.lcb.linear.weight[:n_lcb].index_select(1, vectors), x))
        out = torch.cat([out, op.n_fm + torch.arange(n_lcb, device=x.device)])
    residual = op.residual.linear.weight.index_select(0, out).index_select(1, vectors)
    return of_vectors(op.norm(torch.cat(parts, dim=1) + _feature_linear(residual, x)), out)


def _pair_places(triu: torch.Tensor, num_in: int, vectors: torch.Tensor,
                 offset: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The pairs (a, b) of live vectors (upper triangle at ``offset``) and the place of each
    pair's dot in a padded layout that lists the pairs ``triu`` [2, P] of ``num_in`` vectors."""
    first, second = torch.triu_indices(len(vectors), len(vectors), offset=offset, device=vectors.device)
    place = torch.full((num_in, num_in), -1, dtype=torch.long, device=vectors.device)
    place[triu[0], triu[1]] = torch.arange(triu.shape[1], device=vectors.device)
    return first, second, place[vectors[first], vectors[second]]


def _dhen_module(module: nn.Module, name: str, x: torch.Tensor, vectors: torch.Tensor, num_in: int,
                 n_out: int) -> torch.Tensor:
    """One DHEN module's first ``n_out`` outputs [B, n_out, D] from the live vectors."""
    b, dim = x.shape[0], x.shape[2]
    if name == "linear":
        return _feature_linear(module.linear.weight[:n_out].index_select(1, vectors), x)
    if name == "conv":
        conv = module.conv
        return F.conv1d(x, conv.weight[:n_out].index_select(1, vectors), conv.bias[:n_out],
                        padding=conv.padding)
    rows = n_out * dim
    if name in ("dot", "dcn"):  # a flat input, then a linear to rows of D
        if name == "dot":
            first, second, cols = _pair_places(module.dots.triu, num_in, vectors, offset=1)
            flat = pair_dots(x, first, second)
        else:
            cols = _columns(vectors, dim)
            x0 = flat = x.flatten(1)
            cross = module.cross  # torchrec's CrossNet: kernels [N, N], biases [N, 1]
            for kernel, bias in zip(cross.kernels, cross.bias, strict=True):
                kernel = kernel.index_select(0, cols).index_select(1, cols)
                flat = x0 * F.linear(flat, kernel, bias.index_select(0, cols).squeeze(1)) + flat
        weight, bias = module.linear.weight[:rows].index_select(1, cols), module.linear.bias[:rows]
        return F.linear(flat, weight, bias).view(b, n_out, dim)
    assert name == "attention", name
    # The dropped (zero) vectors are alike: one stands for all, its key counted n_dead times by
    # adding log(n_dead) to its logit; its output enters the projection once per dead column.
    dead = num_in - len(vectors)
    project = module.project.linear.weight[:n_out]
    if not dead:
        attended, _ = module.attention(x, x, x, need_weights=False)
        return _feature_linear(project.index_select(1, vectors), attended)
    tokens = torch.cat([x, x.new_zeros(b, 1, dim)], dim=1)
    bias = x.new_zeros(len(vectors) + 1, len(vectors) + 1)
    bias[:, -1] = math.log(dead)
    attended, _ = module.attention(tokens, tokens, tokens, attn_mask=bias, need_weights=False)
    keep = torch.ones(num_in, dtype=torch.bool, device=x.device)
    keep[vectors] = False
    dead_sum = project[:, keep].sum(1)  # [n_out]
    return (_feature_linear(project.index_select(1, vectors), attended[:, :-1])
            + dead_sum[None, :, None] * attended[:, -1:])


def _dhen(op: SuperDhen, live: Live, weights: Weights) -> Live:
    """DHEN on the live vectors: each chosen module's first ``n_out`` outputs, the ensemble,
    the shortcut's live rows and columns, the LayerNorm."""
    x, vectors = as_vectors(live, op.dim)
    gates = op.weights(weights, "modules") @ op.member
    n_out = int(_chosen(op, weights, "n_out"))
    chosen = [i for i in range(len(op.names)) if gates[i].item() != 0.0]
    outs = {i: _dhen_module(op.interactions[op.names[i]], op.names[i], x, vectors, op.num_in,
                                       n_out) for i in chosen}
    ensemble = _chosen(op, weights, "ensemble")
    e = op.weights(weights, "ensemble")[op.fields["ensemble"].index(ensemble)]
    if ensemble == "concat":
        mixed = torch.cat([gates[i] * outs[i] for i in chosen], dim=1)
        out = torch.tensor([i * op.n_max + t for i in chosen for t in range(n_out)], device=x.device)
    else:
        scale = gates * (torch.softmax(op.ensemble_logits, 0) if ensemble == "weighted_sum" else 1.0)
        scale = scale / scale.sum()
        mixed = sum(scale[i] * outs[i] for i in chosen)
        out = torch.arange(n_out, device=x.device)
    shortcut = op.shortcut.linear.weight.index_select(0, out).index_select(1, vectors)
    return of_vectors(op.norm(e * mixed + _feature_linear(shortcut, x)), out)


def _op(op: nn.Module, live: Live, weights: Weights) -> Live:
    """A layer candidate on the live values."""
    if isinstance(op, SuperSkip):
        return live
    if isinstance(op, SuperCross) and getattr(op, "precision", "fp32") == "fp32":
        return _cross(op, live, weights)
    if isinstance(op, SuperWukong):
        return _wukong(op, live, weights)
    if isinstance(op, SuperDot):
        return _dot(op, live, weights)
    assert isinstance(op, SuperBlock)
    if isinstance(op, SuperDhen):
        return _dhen(op, live, weights)
    y = op(_padded(live, op.num_in, op.dim), weights)  # run padded (the MLP op)
    return Live(y.flatten(1), torch.arange(y[0].numel(), device=y.device))


def _padded_run(mix: MixedChoice, live: Live, width: int, dim: int, weights: Weights) -> Live:
    """The mix run as the padded supernet runs it; every output value counted live."""
    y = mix(_padded(live, width, dim), weights)
    return Live(y.flatten(1), torch.arange(y[0].numel(), device=y.device))


def _mixed(mix: MixedChoice, live: Live, width: int, dim: int, weights: Weights) -> Live:
    """A mixed op on one path: the chosen candidate (rescaled as the padded mix does)."""
    if mix.name not in weights and len(mix.candidates) > 1:
        return _padded_run(mix, live, width, dim, weights)  # raises the mix's own error
    w = weights[mix.name] if mix.name in weights else torch.ones(1, device=live.x.device)
    j = one_hot_index(w)
    assert j is not None
    key, candidate = list(mix.candidates.items())[j]
    if isinstance(candidate, AtPrecision):  # a layer's precision choice around its kind choice
        if candidate.precision != "fp32":
            return _padded_run(mix, live, width, dim, weights)
        with as_precision(candidate.module, candidate.precision):
            out = _mixed(candidate.module, live, width, dim, weights)
        return Live(times_chosen(w, j, out.x), out.cols)
    out = _op(candidate, live, weights)
    y = out.x
    if key in mix.rescale:  # the padded mix's RMS over the candidate's whole output
        y = y * torch.rsqrt((y * y).sum(dim=1, keepdim=True) / (candidate.num_out * dim) + 1e-6)
    return Live(times_chosen(w, j, y), out.cols)


# ---- the model --------------------------------------------------------------------------------
def _embed(net: Any, dense: torch.Tensor, sparse: KeyedJaggedTensor, weights: Weights,
           detach_embeddings: bool) -> Live:
    """X0's live vectors (the dense vector, then the features a non-zero width keeps)."""
    pooled = pooled_by_hash(net, sparse, weights)
    vectors = [net.dense_arch(dense)] if net.dense_arch is not None else []
    live = list(range(len(vectors)))
    position = len(vectors)
    for group, features in net.groups:
        w = net.weights_of(weights, f"emb.{group}", 1)
        j = one_hot_index(w)
        for name in features:
            if net.projections and net.emb_widths[j if j is not None else 0] != 0:
                e = pooled[name].detach() if detach_embeddings else pooled[name]
                vectors.append(projected_width(e, w, net.projections[name], net.emb_widths, net.dim,
                                               net.emb_offsets))
                live.append(position)
            elif not net.projections:
                vectors.append(pooled[name].detach() if detach_embeddings else pooled[name])
                live.append(position)
            position += 1
    return of_vectors(torch.stack(vectors, dim=1), torch.tensor(live, dtype=torch.long, device=dense.device))


def _over_arch(net: Any, live: Live, weights: Weights) -> torch.Tensor:
    """The over-arch on the live columns: its first layer's matching input columns."""
    flat, cols = live.x, live.cols
    head = net.over_arch
    if isinstance(head, MaskedOverArch):
        w = weights[head.name]
        j = one_hot_index(w)
        assert j is not None
        for k, (layer, size) in enumerate(zip(head.mlp._mlp, head.values[j], strict=True)):
            weight = layer._linear.weight[:size]
            weight = weight.index_select(1, cols) if k == 0 else weight[:, : flat.shape[1]]
            flat = times_chosen(w, j, layer._activation_fn(F.linear(flat, weight, layer._linear.bias[:size])))
        return F.linear(flat, head.out.weight[:, : flat.shape[1]], head.out.bias)
    mlp, out = head[0], head[1]
    first, *rest = mlp._mlp
    linear = first._linear
    flat = first._activation_fn(F.linear(flat, linear.weight.index_select(1, cols), linear.bias))
    for layer in rest:
        flat = layer(flat)
    return out(flat)


def compact_forward(net: Any, dense: torch.Tensor, sparse: KeyedJaggedTensor,
                    weights: Mapping[str, torch.Tensor], detach_embeddings: bool = False) -> torch.Tensor:
    """Logits [B] of the single path ``weights`` pick (see the module doc), as the padded
    :meth:`~autorec.supernet.supernet.Supernet.forward` of ``net`` computes them."""
    live = _embed(net, dense, sparse, weights, detach_embeddings)
    width = net.f0
    for layer, run in zip(net.layers, net._runs, strict=True):
        live = _mixed(run, live, width, net.dim, weights)
        width = layer.num_out
    return _over_arch(net, live, weights).squeeze(-1)
