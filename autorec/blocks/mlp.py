"""MLP on the flattened input, and the linear map over the feature axis other blocks share."""

from __future__ import annotations

import torch
from torch import nn
from torchrec.modules.mlp import MLP

from autorec.arch import MLPConfig
from autorec.blocks.base import InteractionBlock
from autorec.blocks.registry import BlockKind, ScalingRule, SearchRules, register_kind


class FeatureLinear(nn.Module):
    """A linear map over the feature axis: ``Y = W X`` with W of shape [F_out, F_in].

    Each output vector is a learned mix of the input vectors, the same mix for every one of
    the D positions (Wukong's linear compress block, DHEN's linear module and shortcut).

    Shapes: [B, F_in, D] -> [B, F_out, D].

    Args:
        num_in: F_in.
        num_out: F_out.
        bias: add a learned [F_out, 1] bias, broadcast over D.

    Example:
        >>> layer = FeatureLinear(3, 2)
        >>> layer(torch.randn(4, 3, 8)).shape
        torch.Size([4, 2, 8])
    """

    def __init__(self, num_in: int, num_out: int, bias: bool = False) -> None:
        super().__init__()
        self.linear = nn.Linear(num_in, num_out, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x.transpose(1, 2)).transpose(1, 2)

    def from_transposed(self, xt: torch.Tensor) -> torch.Tensor:
        """The same map given X^T [B, D, F_in] (shared by several maps of one X): [B, F_out, D]."""
        return self.linear(xt).transpose(1, 2)


def mlp_to_rows(in_size: int, hidden: tuple[int, ...], num_out: int, dim: int) -> nn.Sequential:
    """torchrec ``MLP(hidden)`` (ReLU after every layer), then a plain linear to ``num_out * dim``.

    Shapes: [B, in_size] -> [B, num_out * dim]. With no hidden sizes it is just the linear.
    """
    layers: list[nn.Module] = []
    if hidden:
        layers.append(MLP(in_size, list(hidden)))
        in_size = hidden[-1]
    layers.append(nn.Linear(in_size, num_out * dim))
    return nn.Sequential(*layers)


class MLPBlock(InteractionBlock):
    """An MLP over all F*D input values, its output cut into ``n_out`` D-wide vectors.

    Shapes: [B, F, D] -> [B, n_out, D].

    Args:
        config: ``MLPConfig`` (``hidden`` sizes with ReLU, ``n_out`` output vectors).
        num_in: F, the number of input vectors.
        dim: D, the width of every vector.

    Example:
        >>> block = MLPBlock(MLPConfig(hidden=(32,), n_out=2), num_in=3, dim=8)
        >>> block(torch.randn(5, 3, 8)).shape
        torch.Size([5, 2, 8])
    """

    config_type = MLPConfig

    def __init__(self, config: MLPConfig, num_in: int, dim: int) -> None:
        super().__init__(config, num_in, dim)
        self.mlp = mlp_to_rows(num_in * dim, config.hidden, config.n_out, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mlp(x.flatten(1)).view(-1, self.num_out, self.dim)


class MLPRules(SearchRules):
    """``n_out`` sets the output width."""

    shape_fields = ("n_out",)


SCALING = ScalingRule(start=MLPConfig(hidden=(64,), n_out=4), widen=("hidden", "n_out"), depth_every=2)
register_kind(BlockKind(MLPConfig, MLPBlock, rules=MLPRules(), scaling=SCALING,
                        tower_module=MLPConfig(hidden=(64,), n_out=2)))
