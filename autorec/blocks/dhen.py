"""One DHEN layer (Zhang et al. 2022, "DHEN: A Deep and Hierarchical Ensemble Network for
Large-Scale Click-Through Rate Prediction"): an ensemble of heterogeneous interaction modules."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

from autorec.arch import DhenConfig
from autorec.blocks.attention import by_hand, self_attention
from autorec.blocks.base import InteractionBlock
from autorec.blocks.dcn import cross_net
from autorec.blocks.dlrm import PairwiseDots, num_dots
from autorec.blocks.layout import FloatLayerNorm
from autorec.blocks.mlp import FeatureLinear
from autorec.blocks.registry import BlockKind, ScalingRule, SearchRules, Values, register_kind


class DotModule(nn.Module):
    """AdvancedDLRM: the F(F-1)/2 pairwise dots, then a linear to ``num_out`` vectors.

    Shapes: [B, F, D] -> [B, num_out, D].

    Example:
        >>> DotModule(num_in=4, num_out=2, dim=8)(torch.randn(3, 4, 8)).shape
        torch.Size([3, 2, 8])
    """

    def __init__(self, num_in: int, num_out: int, dim: int) -> None:
        super().__init__()
        self.num_out, self.dim = num_out, dim
        self.dots = PairwiseDots(num_in)
        self.linear = nn.Linear(num_dots(num_in), num_out * dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(self.dots(x)).view(-1, self.num_out, self.dim)


class AttentionModule(nn.Module):
    """Multi-head self-attention among the F vectors, then a linear over the feature axis.

    Shapes: [B, F, D] -> [B, num_out, D]. D must be divisible by ``num_heads``.

    Example:
        >>> AttentionModule(num_in=4, num_out=2, dim=8, num_heads=2)(torch.randn(3, 4, 8)).shape
        torch.Size([3, 2, 8])
    """

    def __init__(self, num_in: int, num_out: int, dim: int, num_heads: int) -> None:
        super().__init__()
        self.attention = nn.MultiheadAttention(dim, num_heads, batch_first=True)
        self.project = FeatureLinear(num_in, num_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.device.type == "cpu" and torch.is_autocast_enabled("cpu"):
            # The attention stays in fp32 under bf16 autocast: by hand in bf16 it runs 1.04-1.18x
            # slower than in fp32 on the CPU (its per-head products are D/heads wide), and the
            # module's own kernel slower still (benchmarks.dhen_attention --autocast bf16 --no-steps).
            with torch.autocast("cpu", enabled=False):
                attended = self._attend(x.float())
        else:
            attended = self._attend(x)
        return self.project(attended)

    def _attend(self, x: torch.Tensor) -> torch.Tensor:
        """Self-attention over the F vectors: on the CPU written out (:mod:`autorec.blocks.attention`),
        else, or where a quantised module or a hook must see the call, the module's own."""
        if by_hand(self.attention, x):
            return self_attention(self.attention, x)
        return self.attention(x, x, x, need_weights=False)[0]


class CrossModule(nn.Module):
    """A full-rank DCN cross network on flatten(X), then a linear to ``num_out`` vectors.

    Shapes: [B, F, D] -> [B, num_out, D].

    Example:
        >>> CrossModule(num_in=4, num_out=2, dim=8, num_layers=1)(torch.randn(3, 4, 8)).shape
        torch.Size([3, 2, 8])
    """

    def __init__(self, num_in: int, num_out: int, dim: int, num_layers: int) -> None:
        super().__init__()
        self.num_out, self.dim = num_out, dim
        self.cross = cross_net(num_in * dim, num_layers)
        self.linear = nn.Linear(num_in * dim, num_out * dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(self.cross(x.flatten(1))).view(-1, self.num_out, self.dim)


class ConvModule(nn.Module):
    """A convolution over the [F, D] grid whose kernel spans all F rows and 3 columns of D.

    Output vector j at position d is ``sum_f sum_{t=-1..1} W[j, f, t] * X[f, d + t] + b_j``
    (zero-padded at the edges of D, so the width stays D): a Conv1d with the F vectors as
    input channels and ``num_out`` output channels, sliding along D. It generalises the
    linear module (t = 0 only) by letting neighbouring embedding positions mix, at
    3 * F * num_out weights, and needs no assumption about the order of the F features.

    Shapes: [B, F, D] -> [B, num_out, D].

    Example:
        >>> ConvModule(num_in=4, num_out=2)(torch.randn(3, 4, 8)).shape
        torch.Size([3, 2, 8])
    """

    kernel_size = 3

    def __init__(self, num_in: int, num_out: int) -> None:
        super().__init__()
        self.conv = nn.Conv1d(num_in, num_out, self.kernel_size, padding=self.kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def _interaction_module(name: str, config: DhenConfig, num_in: int, dim: int) -> nn.Module:
    n_out = config.n_out
    builders: dict[str, Callable[[], nn.Module]] = {
        "dot": lambda: DotModule(num_in, n_out, dim),
        "attention": lambda: AttentionModule(num_in, n_out, dim, config.num_heads),
        "dcn": lambda: CrossModule(num_in, n_out, dim, config.dcn_layers),
        "linear": lambda: FeatureLinear(num_in, n_out),
        "conv": lambda: ConvModule(num_in, n_out),
    }
    return builders[name]()


class DhenLayer(InteractionBlock):
    """X_{n+1} = LN(Ensemble_i Interaction_i(X_n) + ShortCut(X_n)), as in the DHEN paper.

    Each module in ``config.modules`` maps [B, F_in, D] -> [B, n_out, D]:

    - ``dot``: AdvancedDLRM, pairwise dots then a linear (:class:`DotModule`);
    - ``attention``: self-attention over the F axis, then a feature-axis linear
      (:class:`AttentionModule`);
    - ``dcn``: a cross network with ``dcn_layers`` layers, then a linear (:class:`CrossModule`);
    - ``linear``: a feature-axis linear (:class:`~autorec.blocks.mlp.FeatureLinear`);
    - ``conv``: a convolution over the [F, D] grid (:class:`ConvModule`).

    The ensemble concatenates the module outputs (F_out = n_out * len(modules)), sums them
    (``sum``) or sums them under learned softmax weights (``weighted_sum``; F_out = n_out).
    ShortCut is the identity when F_in == F_out, else a feature-axis linear; LN is over D.
    Stacking layers gives the hierarchy: layer n+1 interacts the ensemble of layer n.

    Shapes: [B, F_in, D] -> [B, F_out, D].

    Args:
        config: ``DhenConfig`` (``modules``, ``ensemble``, ``n_out``, ``num_heads`` for
            attention, ``dcn_layers`` for dcn).
        num_in: F_in, the number of input vectors (at least 2 with ``dot``).
        dim: D, the width of every vector (divisible by ``num_heads`` with ``attention``).

    Example:
        >>> config = DhenConfig(modules=("dot", "attention"), ensemble="concat", n_out=3, num_heads=2)
        >>> block = DhenLayer(config, num_in=4, dim=8)
        >>> block(torch.randn(5, 4, 8)).shape
        torch.Size([5, 6, 8])
    """

    config_type = DhenConfig

    def __init__(self, config: DhenConfig, num_in: int, dim: int) -> None:
        super().__init__(config, num_in, dim)
        self.ensemble = config.ensemble
        self.interactions = nn.ModuleDict(
            {name: _interaction_module(name, config, num_in, dim) for name in config.modules})
        if config.ensemble == "weighted_sum":
            # Zero logits: the ensemble starts as the plain mean of its modules.
            self.ensemble_logits = nn.Parameter(torch.zeros(len(config.modules)))
        self.shortcut = nn.Identity() if num_in == self.num_out else FeatureLinear(num_in, self.num_out)
        self.norm = FloatLayerNorm(dim)

    def ensemble_weights(self) -> torch.Tensor:
        """The weighted_sum ensemble's weights, one per module, summing to 1."""
        return torch.softmax(self.ensemble_logits, dim=0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        outs = [module(x) for module in self.interactions.values()]
        if self.ensemble == "concat":
            mixed = torch.cat(outs, dim=1)
        elif self.ensemble == "sum":
            mixed = torch.stack(outs).sum(dim=0)
        else:
            mixed = torch.einsum("m,mbfd->bfd", self.ensemble_weights(), torch.stack(outs))
        return self.norm(mixed + self.shortcut(x))


class DhenRules(SearchRules):
    """``num_heads`` must divide D and matters only with attention; ``dcn_layers`` only with
    dcn; the dot module needs 2+ input vectors."""

    shape_fields = ("modules", "ensemble", "n_out")

    def active(self, key: str, chosen: Mapping[str, Any]) -> bool:
        if key == "num_heads":
            return "attention" in chosen["modules"]
        if key == "dcn_layers":
            return "dcn" in chosen["modules"]
        return True

    def valid(self, key: str, value: Any, chosen: Mapping[str, Any], fields: Mapping[str, Values],
              dim: int, f_in: int) -> bool:
        if key == "modules":
            if "dot" in value and f_in < 2:
                return False
            return "attention" not in value or any(dim % h == 0 for h in fields["num_heads"])
        if key == "num_heads":
            return dim % value == 0
        return True

    def depends(self, key: str, dim: int, f_in: int) -> dict[str, int]:
        return {"dim": dim} if key == "num_heads" else {"dim": dim, "f_in": f_in}


def _modules(config: DhenConfig) -> tuple[str, ...]:
    return tuple(sorted(config.modules))


# DHEN (Zhang et al., 2022) scales by stacking layers and widening each module's output.
SCALING = ScalingRule(start=DhenConfig(modules=("dot", "attention", "dcn"), ensemble="concat", n_out=2),
                      widen=("n_out",), depth_every=2, factor=2.2)
register_kind(BlockKind(DhenConfig, DhenLayer, rules=DhenRules(), latency_modules=_modules,  # type: ignore[arg-type]
                        tower_module=DhenConfig(modules=("dot", "linear"), ensemble="concat", n_out=2),
                        scaling=SCALING))
