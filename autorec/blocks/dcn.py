"""DCNv2 cross network over the flattened input vectors."""

from __future__ import annotations

import torch
from torch import nn
from torchrec.modules.crossnet import CrossNet, LowRankCrossNet

from autorec.arch import CrossConfig
from autorec.blocks.base import InteractionBlock
from autorec.blocks.registry import BlockKind, ScalingRule, register_kind


def cross_net(in_features: int, num_layers: int, rank: int = 0) -> nn.Module:
    """torchrec's full-rank ``CrossNet`` when ``rank`` is 0, else its ``LowRankCrossNet``."""
    if rank == 0:
        return CrossNet(in_features=in_features, num_layers=num_layers)
    return LowRankCrossNet(in_features=in_features, num_layers=num_layers, low_rank=rank)


class CrossBlock(InteractionBlock):
    """DCNv2 cross layers ``x_{l+1} = x_0 * (W_l x_l + b_l) + x_l`` on flatten(X).

    Every vector crosses with every other (and with itself) bit-wise, since the cross network
    sees all F*D values at once; the result is reshaped back, so F_out = F_in.

    Shapes: [B, F, D] -> [B, F, D].

    Args:
        config: ``CrossConfig`` (``num_layers``; ``rank`` 0 for full-rank W_l, k for W_l = U V^T
            of rank k).
        num_in: F, the number of input vectors.
        dim: D, the width of every vector.

    Example:
        >>> block = CrossBlock(CrossConfig(num_layers=2, rank=4), num_in=3, dim=8)
        >>> block(torch.randn(5, 3, 8)).shape
        torch.Size([5, 3, 8])
    """

    config_type = CrossConfig

    def __init__(self, config: CrossConfig, num_in: int, dim: int) -> None:
        super().__init__(config, num_in, dim)
        self.cross = cross_net(num_in * dim, config.num_layers, config.rank)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.cross(x.flatten(1)).view_as(x)


def _cross_inputs(config: CrossConfig, f_in: int, dim: int) -> int:
    return f_in * dim * config.num_layers  # each cross layer reads the whole flattened input


# A cross network grows deeper (one cross layer per rung) and its low-rank factors wider (a
# full-rank network, rank 0, stays full rank and grows only deeper).
SCALING = ScalingRule(start=CrossConfig(num_layers=1, rank=4), widen=("rank",), deepen={"num_layers": 1},
                      factor=2.5)
register_kind(BlockKind(CrossConfig, CrossBlock, pass_through=True, latency_inputs=_cross_inputs,  # type: ignore[arg-type]
                        tower_module=CrossConfig(num_layers=1, rank=0), scaling=SCALING))
