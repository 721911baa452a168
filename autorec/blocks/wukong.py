"""One Wukong layer (Zhang et al. 2024, "Wukong: Towards a Scaling Law for Large-Scale
Recommendation"): a factorization machine block beside a linear compress block."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

import torch
from torch import nn

from autorec.arch import WukongConfig
from autorec.blocks.base import InteractionBlock, autocast_output, first_linear, global_forward_hooks
from autorec.blocks.layout import FloatLayerNorm, transposed
from autorec.blocks.mlp import FeatureLinear, mlp_to_rows
from autorec.blocks.registry import BlockKind, ScalingRule, SearchRules, register_kind
from autorec.native import wukong_layer as native_wukong


class FactorizationMachineBlock(nn.Module):
    """FMB(X) = reshape(MLP(LN(flatten(X (X^T Y)))), [n_fm, D]).

    The optimised FM: X X^T holds every pairwise dot, and projecting it by a learned
    Y [F, k] first (X^T Y is [B, D, k], X (X^T Y) is [B, F, k]) costs O(F D k) instead of
    O(F^2 D) while keeping every pair's interaction in reach.

    Shapes: [B, F, D] -> [B, n_fm, D].

    Args:
        num_in: F, the number of input vectors.
        dim: D, the width of every vector.
        n_fm: output vectors.
        rank: k, the width of the FM projection Y.
        hidden: the MLP's hidden sizes (ReLU); a final linear maps to n_fm * D.

    Example:
        >>> fmb = FactorizationMachineBlock(num_in=5, dim=8, n_fm=3, rank=2, hidden=(16,))
        >>> fmb(torch.randn(4, 5, 8)).shape
        torch.Size([4, 3, 8])
    """

    def __init__(self, num_in: int, dim: int, n_fm: int, rank: int, hidden: tuple[int, ...]) -> None:
        super().__init__()
        self.n_fm, self.dim = n_fm, dim
        self.proj = nn.Parameter(nn.init.xavier_normal_(torch.empty(num_in, rank)))
        self.norm = FloatLayerNorm(num_in * rank)
        self.mlp = mlp_to_rows(num_in * rank, hidden, n_fm, dim)

    def interactions(self, x: torch.Tensor) -> torch.Tensor:
        """X (X^T Y): [B, F, D] -> [B, F, k]."""
        return torch.bmm(x, torch.einsum("bfd,fk->bdk", x, self.proj))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.from_projection(x, torch.einsum("bfd,fk->bdk", x, self.proj))

    def from_projection(self, x: torch.Tensor, projected: torch.Tensor) -> torch.Tensor:
        """The block's output given ``projected`` = X^T Y [B, D, k] (which :class:`WukongLayer`
        computes in one product with its other maps over the feature axis)."""
        fm = self.norm(torch.bmm(x, projected).flatten(1))
        return self.mlp(fm).view(-1, self.n_fm, self.dim)


def plain_maps(*modules: nn.Module | None) -> list[nn.Linear]:
    """The linears of the :class:`FeatureLinear` among ``modules`` (others, and None, skipped)
    when there is one and every one is a plain ``nn.Linear`` without bias or hooks (the fp32 and
    autocast default) and no module-wide hook is registered, else ``[]``: then Wukong's maps over
    the feature axis can run as one product, or on the kernels of :mod:`autorec.native.wukong_layer`."""
    maps = [m.linear for m in modules if isinstance(m, FeatureLinear)]
    if not maps or global_forward_hooks():
        return []
    plain = all(type(m) is nn.Linear and m.bias is None and not (m._forward_hooks or m._forward_pre_hooks)
                for m in maps)
    return maps if plain else []


@dataclass(frozen=True)
class NativeArgs:
    """What the kernels of :mod:`autorec.native.wukong_layer` take for one layer: its maps
    ``wcat`` = [Y | W_L^T | W_R^T] [F, C], FM norm, FM MLP, norm over D, sizes (k, n_fm, n_lcb),
    the FM values' dtype (the MLP's input) and the output's."""

    wcat: torch.Tensor
    fm_norm: nn.LayerNorm
    mlp: Callable[[torch.Tensor], torch.Tensor]
    norm: nn.LayerNorm
    sizes: tuple[int, int, int]
    fm_dtype: torch.dtype
    out_dtype: torch.dtype


def native_args(proj: torch.Tensor, maps: list[nn.Linear], fm_norm: nn.LayerNorm,
                mlp: Callable[[torch.Tensor], torch.Tensor], norm: nn.LayerNorm, n_fm: int, n_lcb: int,
                fm_dtype: torch.dtype = torch.float32, out_dtype: torch.dtype = torch.float32) -> NativeArgs:
    """A layer's :class:`NativeArgs` from its FM projection Y ``proj`` [F, k] and the plain linears
    of its LCB and projecting residual (:func:`plain_maps`)."""
    return NativeArgs(wcat=torch.cat([proj, *(m.weight.t() for m in maps)], dim=1), fm_norm=fm_norm, mlp=mlp,
                      norm=norm, sizes=(proj.shape[1], n_fm, n_lcb), fm_dtype=fm_dtype, out_dtype=out_dtype)


def _norm(norm: nn.LayerNorm) -> tuple[torch.Tensor, torch.Tensor, float]:
    return norm.weight, norm.bias, norm.eps


def run_native(layers: Sequence[NativeArgs], x: torch.Tensor | list[torch.Tensor]) -> torch.Tensor:
    """Wukong layers one after another on the kernels (callers check
    :func:`~autorec.native.wukong_layer.eligible` and :func:`plain_maps`): the first's head (the
    maps, the FM and its norm in one pass), each layer's MLP, each layer's tail (the LCB rows, the
    residual, the norm over D) with the next layer's head in one pass
    (:func:`~autorec.native.wukong_layer.mid`: a layer's output between them is never written),
    the last layer's tail.

    Shapes: x [B, F, D] (or its two parts [B, F0, D] and [B, F - F0, D], read where they lie)
    -> [B, n_fm + n_lcb, D] of the last layer."""
    first, last = layers[0], layers[-1]
    k, n_fm, n_lcb = first.sizes
    fm, base = native_wukong.head(x, first.wcat, *_norm(first.fm_norm), k=k, n_fm=n_fm, n_lcb=n_lcb,
                                  fm_dtype=first.fm_dtype)
    m = first.mlp(fm)
    for before, layer in itertools.pairwise(layers):
        k, n_fm, n_lcb = layer.sizes
        fm, base = native_wukong.mid(base, m, _norm(before.norm), layer.wcat, _norm(layer.fm_norm), k=k,
                                     n_fm=n_fm, n_lcb=n_lcb, fm_dtype=layer.fm_dtype)
        m = layer.mlp(fm)
    return native_wukong.tail(base, m, *_norm(last.norm), last.out_dtype)


class WukongLayer(InteractionBlock):
    """X_{i+1} = LN(concat(FMB(X_i), LCB(X_i)) + residual(X_i)), as in the Wukong paper.

    FMB (:class:`FactorizationMachineBlock`) gives ``n_fm`` vectors of learned interactions;
    LCB(X) = W_L X (W_L [n_lcb, F_in], no bias) gives ``n_lcb`` linear mixes of the inputs, so
    the next layer can interact them again: stacking layers raises the interaction order.
    The residual is the identity when F_in == n_fm + n_lcb, else a linear map over the feature
    axis. LN is over D.

    Shapes: [B, F_in, D] -> [B, n_fm + n_lcb, D].

    Args:
        config: ``WukongConfig`` (``n_fm``, ``n_lcb``, ``rank``, ``mlp`` hidden sizes).
        num_in: F_in, the number of input vectors.
        dim: D, the width of every vector.

    Example:
        >>> block = WukongLayer(WukongConfig(n_fm=3, n_lcb=2, rank=2, mlp=(16,)), num_in=4, dim=8)
        >>> block(torch.randn(6, 4, 8)).shape
        torch.Size([6, 5, 8])
        >>> type(block.residual).__name__  # 4 inputs, 5 outputs: a projection
        'FeatureLinear'
    """

    config_type = WukongConfig
    takes_parts = True  # the dense vector and pooled embeddings, read by the kernels where they lie

    def __init__(self, config: WukongConfig, num_in: int, dim: int) -> None:
        super().__init__(config, num_in, dim)
        self.fmb = FactorizationMachineBlock(num_in, dim, config.n_fm, config.rank, config.mlp)
        self.lcb = FeatureLinear(num_in, config.n_lcb) if config.n_lcb else None
        self.residual = nn.Identity() if num_in == self.num_out else FeatureLinear(num_in, self.num_out)
        self.norm = FloatLayerNorm(dim)

    def forward(self, x: torch.Tensor | list[torch.Tensor]) -> torch.Tensor:
        """[B, F_in, D], or its parts (``takes_parts``: the dense vector [B, 1, D] and the pooled
        embeddings [B, F_in - 1, D]) -> [B, n_fm + n_lcb, D]."""
        if not isinstance(x, torch.Tensor):
            maps = self._plain_maps()
            if maps and native_wukong.parts_eligible(x[0], x[1], self.fmb.n_fm):
                return self._native(x, maps)
            x = torch.cat(x, dim=1)  # every other path takes X whole
        # The FM projection Y, the LCB and a projecting residual all map over the feature axis
        # of the same X: they share one contiguous X^T instead of transposing X each (two preset
        # layers' forward and backward on the CPU: 1.09x in fp32, 1.03x in bf16).
        maps = self._plain_maps()
        if maps:
            return self._fused(x, maps)
        # A quantised or hooked map runs through its own module, so precision and probes see it.
        xt = transposed(x)
        out = self.fmb.from_projection(x, torch.matmul(xt, self.fmb.proj))
        if self.lcb is not None:
            out = torch.cat((out, self.lcb.from_transposed(xt)), dim=1)
        residual = self.residual.from_transposed(xt) if isinstance(self.residual, FeatureLinear) else x
        return self.norm(out + residual)

    def _plain_maps(self) -> list[nn.Linear]:
        """:func:`plain_maps` of the LCB and the residual."""
        return plain_maps(self.lcb, self.residual)

    def _fused(self, x: torch.Tensor, maps: list[nn.Linear]) -> torch.Tensor:
        """The layer with Y, W_L and the residual's map in one product X^T [Y, W_L^T, W_R^T]:
        [B*D, F_in] x [F_in, k + n_lcb + F_out]. Skinny products (8 columns) run several times
        slower per FLOP than one of 32 on the CPU (BENCHMARKS.md, "Wukong's maps over the
        feature axis in one product"). Under autocast X is cast once, for both products that
        take it, where autocast would cast it for each (the same values)."""
        if native_wukong.eligible(x, self.fmb.n_fm):
            return self._native(x, maps)
        cast = x
        if torch.is_autocast_enabled(x.device.type):
            cast = x.to(torch.get_autocast_dtype(x.device.type))
        weights = [self.fmb.proj, *(m.weight.t() for m in maps)]
        product = torch.matmul(transposed(cast), torch.cat(weights, dim=1))
        parts = torch.split(product, [w.shape[1] for w in weights], dim=-1)
        out = self.fmb.from_projection(cast, parts[0])
        if self.lcb is not None:
            out = torch.cat((out, parts[1].transpose(1, 2)), dim=1)
        residual = parts[-1].transpose(1, 2) if isinstance(self.residual, FeatureLinear) else x
        return self.norm(out + residual)


    @staticmethod
    def stack_forward(layers: Sequence[nn.Module],
                      x: torch.Tensor | list[torch.Tensor]) -> torch.Tensor | None:
        """``layers`` (a model's interaction stack) run as one: each layer's tail with the next
        one's head (:func:`run_native`), where there are two or more, every one a Wukong layer
        that would run on the kernels and without a hook of its own (a hook sees a layer's
        output, which this run never writes), outside
        :func:`autorec.native.wukong_layer.stack_disabled`; else None (run them one by one). The
        same values and gradients."""
        if len(layers) < 2 or not native_wukong.STACK.on:
            return None
        if any(type(layer) is not WukongLayer for layer in layers):
            return None
        stack = cast(list[WukongLayer], list(layers))
        if any(_hooked(layer) or layer.fmb.n_fm < 1 for layer in stack) or not native_wukong.mid_available():
            return None
        maps = [layer._plain_maps() for layer in stack]
        n_fm = stack[0].fmb.n_fm
        fits = (native_wukong.eligible(x, n_fm) if isinstance(x, torch.Tensor)
                else native_wukong.parts_eligible(x[0], x[1], n_fm))
        if not (fits and all(maps)):
            return None
        last = x if isinstance(x, torch.Tensor) else x[-1]
        return run_native([layer._native_args(last, m) for layer, m in zip(stack, maps, strict=True)], x)

    def _native_args(self, x: torch.Tensor, maps: list[nn.Linear]) -> NativeArgs:
        """This layer's :class:`NativeArgs` on input like ``x``: all in fp32; under autocast the
        FM's values reach the MLP's plain linear in autocast's dtype, as that linear would cast
        them, and so does the last layer's output the over-arch's (``feeds_linear``)."""
        fmb = self.fmb
        low = torch.bfloat16 if autocast_output(x) == torch.bfloat16 else torch.float32
        return native_args(fmb.proj, maps, fmb.norm, fmb.mlp, self.norm, fmb.n_fm, self.config.n_lcb,
                           fm_dtype=low if type(first_linear(fmb.mlp)) is nn.Linear else torch.float32,
                           out_dtype=low if self.feeds_linear else torch.float32)

    def _native(self, x: torch.Tensor | list[torch.Tensor], maps: list[nn.Linear]) -> torch.Tensor:
        """The layer on the kernels of :mod:`autorec.native.wukong_layer`: one pass before the FM's
        MLP (the maps, the FM and its norm; the LCB rows and the residual summed) and one after it
        (the MLP's rows added, the norm over D), each sample in cache. All in fp32; under autocast
        the FM's values reach the MLP's plain linear in autocast's dtype, as that linear would
        cast them, and so does the last layer's output the over-arch's. Wukong's step on the CPU:
        BENCHMARKS.md, "Wukong's layer in two compiled passes"."""
        last = x if isinstance(x, torch.Tensor) else x[-1]  # (the pooled embeddings' part)
        return run_native([self._native_args(last, maps)], x)


def _hooked(module: nn.Module) -> bool:
    return bool(module._forward_hooks or module._forward_pre_hooks or module._backward_hooks
                or module._backward_pre_hooks)


class WukongRules(SearchRules):
    """FMB and LCB rows set the output width."""

    shape_fields = ("n_fm", "n_lcb")


# Wukong's own scaling (Zhang et al., 2024, sec. 6): more layers, more embeddings out of each
# layer's FMB and LCB (n_F = n_L) and a wider FMB MLP; the rank k stays.
SCALING = ScalingRule(start=WukongConfig(n_fm=4, n_lcb=4, rank=8, mlp=(64,)), widen=("n_fm", "n_lcb", "mlp"),
                      depth_every=2)
register_kind(BlockKind(WukongConfig, WukongLayer, rules=WukongRules(), scaling=SCALING,
                        tower_module=WukongConfig(n_fm=2, n_lcb=2, rank=4, mlp=(64,))))
