"""Max-size, weight-shared versions of the interaction blocks, for the supernet.

Each op is built once at the largest value of every width choice of its kind (n_fm, n_lcb,
rank, MLP widths, n_out, cross depth, ...) and a smaller choice keeps a prefix of its units
(:func:`~autorec.supernet.mixed.width_mask`), so every width shares one set of weights. An op
reads the weights of its own choices, named ``layer<i>.<kind>.<field>`` as in the search space,
and zeroes the output vectors its current widths do not produce, so the next layer sees them as
absent. Input vectors past the previous layer's chosen width arrive as zeros. Every op maps
``[B, F_in, D] -> [B, num_out, D]`` with ``num_out`` the largest width any of its choices gives.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from functools import partial
from typing import Any, ClassVar

import torch
from torch import nn

from autorec.arch import DHEN_MODULES, BlockConfig, DhenConfig
from autorec.blocks import kind, out_features
from autorec.blocks.dhen import _interaction_module
from autorec.blocks.gram import pair_dots
from autorec.blocks.layout import FloatLayerNorm
from autorec.blocks.mlp import FeatureLinear
from autorec.blocks.wukong import native_args, plain_maps, run_native
from autorec.native import wukong_layer as native_wukong
from autorec.precision.layers import PrecisionAware, quant_linear
from autorec.supernet.masked_mlp import MaskedMLP
from autorec.supernet.mixed import (
    Choice,
    SupernetError,
    Weights,
    one_hot_index,
    pad_features,
    width_mask,
)

Fields = Mapping[str, tuple[Any, ...]]  # config field -> the values the supernet searches


class SuperBlock(nn.Module):
    """Base of the max-size ops: holds the field choices and reads their weights.

    Args:
        prefix: choice-name prefix, ``layer<i>.<kind>``.
        fields: every config field of the kind -> its values (one value: fixed, not a choice).
        num_in: F_in, the (padded) number of input vectors.
        dim: D.
    """

    kind: ClassVar[str]
    # Output scale a power of the input's, with no norm after it: the supernet's mix rescales it
    # (see MixedChoice).
    polynomial: ClassVar[bool] = False

    def __init__(self, prefix: str, fields: Fields, num_in: int, dim: int) -> None:
        super().__init__()
        self.prefix, self.fields, self.num_in, self.dim = prefix, dict(fields), num_in, dim
        self.num_out = num_in

    def choices(self) -> list[Choice]:
        """The fields with more than one value, as supernet choices. ``precision`` is left out:
        it is the layer's choice (``layer<i>.precision``), mixed around the whole layer."""
        return [
            Choice(f"{self.prefix}.{key}", values)
            for key, values in self.fields.items()
            if len(values) > 1 and key != "precision"
        ]

    def weights(self, weights: Weights, key: str) -> torch.Tensor:
        """The weights over ``fields[key]`` (a fixed field is the constant [1])."""
        if len(self.fields[key]) == 1:
            return torch.ones(1)
        return weights[f"{self.prefix}.{key}"]

    def mask(self, weights: Weights, key: str, size: int) -> torch.Tensor:
        return width_mask(self.weights(weights, key), self.fields[key], size)

    @classmethod
    def narrow(cls, fields: dict[str, tuple[Any, ...]], dim: int) -> dict[str, tuple[Any, ...]]:
        """The space's ``fields`` values this op searches at width ``dim`` (default: all)."""
        return fields

    def config(self, values: Mapping[str, Any]) -> BlockConfig:
        """The block config for chosen field values (fields not given take their one value)."""
        chosen = {k: values.get(k, v[0]) for k, v in self.fields.items()}
        return kind(self.kind).config(**chosen)

    def out_features(self, values: Mapping[str, Any], num_in: int) -> int | None:
        """F_out of the derived block for input [B, num_in, D], or None if it is invalid there."""
        try:
            return out_features(self.config(values), num_in, self.dim)
        except ValueError:
            return None


class SuperWukong(SuperBlock):
    """Wukong layer at max n_fm, n_lcb, rank and MLP widths (see :class:`autorec.blocks.wukong.WukongLayer`).

    Output: [FMB vectors (n_fm max) | LCB vectors (n_lcb max)], the ones past the chosen n_fm,
    n_lcb zeroed. The residual is always a feature-axis linear (the input width varies).

    Example:
        >>> op = SuperWukong("l0.wukong", {"n_fm": (2, 4), "n_lcb": (0, 2), "rank": (2,), "mlp": ((8,),)},
        ...                  num_in=3, dim=4)
        >>> w = {"l0.wukong.n_fm": torch.tensor([1.0, 0.0]), "l0.wukong.n_lcb": torch.tensor([0.0, 1.0])}
        >>> y = op(torch.randn(5, 3, 4), w)
        >>> y.shape, bool(y[:, 2:4].abs().sum() == 0)  # n_fm = 2 of 4: vectors 2, 3 are empty
        (torch.Size([5, 6, 4]), True)
    """

    kind = "wukong"

    def __init__(self, prefix: str, fields: Fields, num_in: int, dim: int) -> None:
        super().__init__(prefix, fields, num_in, dim)
        self.n_fm, self.n_lcb, rank = max(fields["n_fm"]), max(fields["n_lcb"]), max(fields["rank"])
        self.num_out = self.n_fm + self.n_lcb
        self.proj = nn.Parameter(nn.init.xavier_normal_(torch.empty(num_in, rank)))
        self.fm_norm = FloatLayerNorm(num_in * rank)
        self.mlp = MaskedMLP(f"{prefix}.mlp", fields["mlp"], num_in * rank, self.n_fm * dim)
        self.lcb = FeatureLinear(num_in, self.n_lcb) if self.n_lcb else None
        self.residual = FeatureLinear(num_in, self.num_out)
        self.norm = FloatLayerNorm(dim)

    def forward(self, x: torch.Tensor, weights: Weights) -> torch.Tensor:
        proj = self.proj * self.mask(weights, "rank", self.proj.shape[1])
        masks = [self.mask(weights, "n_fm", self.n_fm)]
        if self.lcb is not None:
            masks.append(self.mask(weights, "n_lcb", self.n_lcb))
        mlp = partial(self.mlp, weights=self.weights(weights, "mlp"))
        maps = plain_maps(self.lcb, self.residual)
        if maps and native_wukong.eligible(x, self.n_fm):  # the layer's kernels, as WukongLayer's
            args = native_args(proj, maps, self.fm_norm, mlp, self.norm, self.n_fm, self.n_lcb)
            out = run_native([args], x)
        else:
            fm = mlp(self.fm_norm(torch.bmm(x, torch.einsum("bfd,fk->bdk", x, proj)).flatten(1)))
            parts = [fm.view(-1, self.n_fm, self.dim)] + ([] if self.lcb is None else [self.lcb(x)])
            out = self.norm(torch.cat(parts, dim=1) + self.residual(x))
        return out * torch.cat(masks)[None, :, None]


class SuperDhen(SuperBlock):
    """DHEN layer holding every module any subset uses, at max n_out, with every ensemble.

    A module's gate is the total weight of the subsets holding it; the ensembles (concat, sum,
    weighted_sum) are mixed by their weights. ``num_heads`` and ``dcn_layers`` take one value
    (the supernet does not search them). See :class:`autorec.blocks.dhen.DhenLayer`.

    Example:
        >>> fields = {"modules": (("dot",), ("dot", "linear")), "ensemble": ("concat",), "n_out": (2, 3),
        ...           "num_heads": (2,), "dcn_layers": (1,)}
        >>> op = SuperDhen("l0.dhen", fields, num_in=4, dim=4)
        >>> w = {"l0.dhen.modules": torch.tensor([0.0, 1.0]), "l0.dhen.n_out": torch.tensor([0.0, 1.0])}
        >>> op(torch.randn(2, 4, 4), w).shape  # concat of 2 modules x 3 vectors
        torch.Size([2, 6, 4])
    """

    kind = "dhen"

    @classmethod
    def narrow(cls, fields: dict[str, tuple[Any, ...]], dim: int) -> dict[str, tuple[Any, ...]]:
        """One num_heads (the first dividing D) and one dcn_layers: they do not share weights;
        without a head count dividing D, the module subsets needing attention go."""
        heads = [h for h in fields["num_heads"] if dim % h == 0]
        fields["num_heads"] = tuple(heads[:1]) or fields["num_heads"][:1]
        fields["dcn_layers"] = fields["dcn_layers"][:1]
        if not heads:
            fields["modules"] = tuple(m for m in fields["modules"] if "attention" not in m)
        return fields

    def config(self, values: Mapping[str, Any]) -> BlockConfig:
        """As the space makes it: ``num_heads`` / ``dcn_layers`` keep their defaults unless the
        modules hold attention / dcn."""
        chosen = {k: values.get(k, v[0]) for k, v in self.fields.items()}
        if "attention" not in chosen["modules"]:
            chosen.pop("num_heads")
        if "dcn" not in chosen["modules"]:
            chosen.pop("dcn_layers")
        return DhenConfig(**chosen)

    def __init__(self, prefix: str, fields: Fields, num_in: int, dim: int) -> None:
        super().__init__(prefix, fields, num_in, dim)
        used = {m for subset in fields["modules"] for m in subset}
        self.names = [m for m in DHEN_MODULES if m in used]
        self.n_max = max(fields["n_out"])
        config = DhenConfig(
            modules=tuple(self.names),
            n_out=self.n_max,
            num_heads=fields["num_heads"][0],
            dcn_layers=fields["dcn_layers"][0],
        )
        self.interactions = nn.ModuleDict(
            {m: _interaction_module(m, config, num_in, dim) for m in self.names}
        )
        self.ensemble_logits = nn.Parameter(torch.zeros(len(self.names)))
        self.num_out = self.n_max * (len(self.names) if "concat" in fields["ensemble"] else 1)
        self.shortcut = FeatureLinear(num_in, self.num_out)
        self.norm = FloatLayerNorm(dim)
        member = [[m in subset for m in self.names] for subset in fields["modules"]]
        self.register_buffer("member", torch.tensor(member, dtype=torch.float32), persistent=False)

    def forward(self, x: torch.Tensor, weights: Weights) -> torch.Tensor:
        gates = self.weights(weights, "modules") @ self.member  # [modules]
        n_mask = self.mask(weights, "n_out", self.n_max)[None, :, None]
        outs = [
            self.interactions[m](x) * n_mask if gates[i].item() != 0.0 else None
            for i, m in enumerate(self.names)
        ]
        zero = x.new_zeros(x.shape[0], self.n_max, self.dim)
        mixed, mask = zero.new_zeros(x.shape[0], self.num_out, self.dim), zero.new_zeros(self.num_out)
        for e, name in zip(self.weights(weights, "ensemble"), self.fields["ensemble"], strict=True):
            if e.item() == 0.0:
                continue
            if name == "concat":
                value = torch.cat(
                    [gates[i] * (o if o is not None else zero) for i, o in enumerate(outs)], dim=1
                )
                vmask = torch.cat([gates[i] * n_mask.flatten() for i in range(len(outs))])
            else:
                scale = gates * (torch.softmax(self.ensemble_logits, 0) if name == "weighted_sum" else 1.0)
                scale = scale / scale.sum()
                value = sum((scale[i] * o for i, o in enumerate(outs) if o is not None), zero)
                vmask = n_mask.flatten()
            mixed = mixed + e * pad_features(value, self.num_out)
            mask = mask + e * torch.nn.functional.pad(vmask, (0, self.num_out - vmask.numel()))
        return self.norm(mixed + self.shortcut(x)) * mask[None, :, None]


class SuperDot(SuperBlock):
    """DLRM dot interaction with ``n_passthrough`` and ``self_interaction`` as masks.

    Layout: the passthrough vectors (max of the choices), then every dot of the upper triangle
    (diagonal included when self-interaction is a choice; it is masked by that choice's weight),
    zero-padded to rows of D. See :class:`autorec.blocks.dlrm.DotInteraction`.

    Example:
        >>> op = SuperDot("l0.dlrm", {"n_passthrough": (0, 1), "self_interaction": (False,)}, num_in=4, dim=4)
        >>> op(torch.ones(2, 4, 4), {"l0.dlrm.n_passthrough": torch.tensor([1.0, 0.0])}).flatten(1)[0, :6]
        tensor([0., 0., 0., 0., 4., 4.])
    """

    kind = "dlrm"
    polynomial = True

    def __init__(self, prefix: str, fields: Fields, num_in: int, dim: int) -> None:
        super().__init__(prefix, fields, num_in, dim)
        self.n_pass = min(max(fields["n_passthrough"]), num_in)
        self.with_self = True in fields["self_interaction"]
        triu = torch.triu_indices(num_in, num_in, offset=0 if self.with_self else 1)
        self.register_buffer("triu", triu, persistent=False)
        self.register_buffer("diagonal", (triu[0] == triu[1]).float(), persistent=False)
        values = self.n_pass * dim + triu.shape[1]
        self.num_out = max(1, math.ceil(values / dim))
        self.pad = self.num_out * dim - values

    def forward(self, x: torch.Tensor, weights: Weights) -> torch.Tensor:
        passthrough = x[:, : self.n_pass] * self.mask(weights, "n_passthrough", self.n_pass)[None, :, None]
        dots = pair_dots(x, self.triu[0], self.triu[1])
        if self.with_self:
            keep = self.weights(weights, "self_interaction")[self.fields["self_interaction"].index(True)]
            dots = dots * (1 - self.diagonal + keep * self.diagonal)
        flat = torch.nn.functional.pad(torch.cat((passthrough.flatten(1), dots), dim=1), (0, self.pad))
        return flat.view(-1, self.num_out, self.dim)


class SuperCross(SuperBlock, PrecisionAware):
    """DCNv2 cross network with its depth and rank as choices (see :class:`autorec.blocks.dcn.CrossBlock`).

    Layer l runs with weight P(num_layers > l): ``x_{l+1} = x_l + g_l * x_0 * (W_l x_l + b_l)``.
    Rank 0 (full rank) has its own [N, N] kernels; the low ranks share one rank-max U V^T
    factorisation whose rank is masked. Both mirror torchrec's CrossNet / LowRankCrossNet, and
    run their products in ``precision`` as the quantised versions of those do.

    Example:
        >>> op = SuperCross("l0.dcnv2", {"num_layers": (1, 2), "rank": (0, 2)}, num_in=2, dim=4)
        >>> op(torch.randn(3, 2, 4), {"l0.dcnv2.num_layers": torch.tensor([0.5, 0.5]),
        ...                           "l0.dcnv2.rank": torch.tensor([0.5, 0.5])}).shape
        torch.Size([3, 2, 4])
    """

    kind = "dcnv2"
    polynomial = True

    def __init__(self, prefix: str, fields: Fields, num_in: int, dim: int) -> None:
        super().__init__(prefix, fields, num_in, dim)
        n, depth = num_in * dim, max(fields["num_layers"])
        ranks = [r for r in fields["rank"] if r > 0]
        self.full = 0 in fields["rank"]
        self.r_max = max(ranks, default=0)
        if self.full:
            self.kernels = nn.Parameter(
                torch.stack([nn.init.xavier_normal_(torch.empty(n, n)) for _ in range(depth)])
            )
            self.full_bias = nn.Parameter(torch.zeros(depth, n))
        if self.r_max:
            self.V = nn.Parameter(
                torch.stack([nn.init.xavier_normal_(torch.empty(self.r_max, n)) for _ in range(depth)])
            )
            self.W = nn.Parameter(
                torch.stack([nn.init.xavier_normal_(torch.empty(n, self.r_max)) for _ in range(depth)])
            )
            self.low_bias = nn.Parameter(torch.zeros(depth, n))

    def forward(self, x: torch.Tensor, weights: Weights) -> torch.Tensor:
        x0 = x.flatten(1)
        w_depth = self.weights(weights, "num_layers")
        depths = torch.tensor(self.fields["num_layers"])
        layers = len(self.kernels if self.full else self.V)
        gate = [w_depth[depths > layer].sum() for layer in range(layers)]
        w_rank = self.weights(weights, "rank")
        ranks = self.fields["rank"]
        w_full = w_rank[ranks.index(0)] if self.full else x0.new_zeros(())
        out = x0.new_zeros(x0.shape)
        # Layers past every depth with weight (gate 0) leave x_l as it is: they are not run.
        layers = sum(1 for g in gate if g.item() != 0.0)
        if self.full and w_full.item() != 0.0:
            xl = x0
            for layer in range(layers):
                product = quant_linear(xl, self.kernels[layer], self.full_bias[layer], self.precision)
                xl = xl + gate[layer] * x0 * product
            out = out + w_full * xl
        low = [(w, r) for w, r in zip(w_rank, ranks, strict=True) if r > 0]
        w_low = sum((w for w, _ in low), x0.new_zeros(()))
        if self.r_max and w_low.item() != 0.0:
            share = torch.stack([w for w, _ in low]) / w_low
            one = one_hot_index(share)  # a single rank: the first r rows of V, columns of W
            r = low[one][1] if one is not None else self.r_max
            mask = width_mask(share, [r for _, r in low], self.r_max) if one is None else None
            xl = x0
            for layer in range(layers):
                v = quant_linear(xl, self.V[layer][:r], None, self.precision)
                v = v * mask if mask is not None else v
                product = quant_linear(v, self.W[layer][:, :r], self.low_bias[layer], self.precision)
                xl = xl + gate[layer] * x0 * product
            out = out + w_low * xl
        return out.view_as(x)


class SuperMLP(SuperBlock):
    """The MLP block at max hidden widths and n_out (see :class:`autorec.blocks.mlp.MLPBlock`).

    Example:
        >>> op = SuperMLP("l0.mlp", {"hidden": ((8,), (16,)), "n_out": (2, 4)}, num_in=3, dim=4)
        >>> op(torch.randn(2, 3, 4), {"l0.mlp.hidden": torch.tensor([1.0, 0.0]),
        ...                           "l0.mlp.n_out": torch.tensor([1.0, 0.0])}).shape
        torch.Size([2, 4, 4])
    """

    kind = "mlp"

    def __init__(self, prefix: str, fields: Fields, num_in: int, dim: int) -> None:
        super().__init__(prefix, fields, num_in, dim)
        self.num_out = max(fields["n_out"])
        self.mlp = MaskedMLP(f"{prefix}.hidden", fields["hidden"], num_in * dim, self.num_out * dim)

    def forward(self, x: torch.Tensor, weights: Weights) -> torch.Tensor:
        y = self.mlp(x.flatten(1), self.weights(weights, "hidden")).view(-1, self.num_out, self.dim)
        return y * self.mask(weights, "n_out", self.num_out)[None, :, None]


class SuperSkip(SuperBlock):
    """Identity (the derived model drops the layer).

    Example:
        >>> SuperSkip("l0.skip", {}, num_in=3, dim=4)(torch.ones(1, 3, 4), {}).shape
        torch.Size([1, 3, 4])
    """

    kind = "skip"

    def forward(self, x: torch.Tensor, weights: Weights) -> torch.Tensor:
        return x


SUPER_BLOCKS: dict[str, type[SuperBlock]] = {
    cls.kind: cls for cls in (SuperWukong, SuperDhen, SuperDot, SuperCross, SuperMLP, SuperSkip)
}


def rescaled_kinds(kinds: Sequence[str], rescale: bool | Collection[str],
                   source: str = "<space>") -> frozenset[str]:
    """The layer kinds among ``kinds`` whose outputs a supernet's mix RMS-rescales: every one
    without a norm (true), none (false) or those listed, each such a kind (else a SupernetError
    naming ``source``, the list and the kinds it may hold).

    Example:
        >>> sorted(rescaled_kinds(["dlrm", "dcnv2", "wukong"], True)), rescaled_kinds(["dlrm"], ["dlrm"])
        (['dcnv2', 'dlrm'], frozenset({'dlrm'}))
    """
    polynomial = [k for k in kinds if getattr(SUPER_BLOCKS.get(k), "polynomial", False)]
    if isinstance(rescale, bool):
        return frozenset(polynomial if rescale else ())
    listed = (rescale,) if isinstance(rescale, str) else tuple(rescale)
    unknown = [k for k in listed if k not in polynomial]
    if unknown:
        raise SupernetError(f"{source}: rescale: {unknown} are not layer kinds of this space without a "
                            f"norm; expected true, false or some of {polynomial}")
    return frozenset(listed)
