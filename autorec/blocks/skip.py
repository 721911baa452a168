"""Skip: the identity layer a search uses to drop a layer."""

from __future__ import annotations

import torch

from autorec.arch import SkipConfig
from autorec.blocks.base import InteractionBlock
from autorec.blocks.registry import BlockKind, SearchRules, register_kind


class SkipBlock(InteractionBlock):
    """Identity. Shapes: [B, F, D] -> [B, F, D].

    Example:
        >>> SkipBlock(SkipConfig(), num_in=3, dim=4)(torch.ones(2, 3, 4)).shape
        torch.Size([2, 3, 4])
    """

    config_type = SkipConfig

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


class _Nothing(SearchRules):
    """Skip has no fields to choose: it counts once in a space."""

    searched = False


register_kind(BlockKind(SkipConfig, SkipBlock, rules=_Nothing(), pass_through=True, identity=True,
                        tower_module=SkipConfig()))
