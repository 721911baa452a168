"""DLRM pairwise dot-product interaction, packed back into D-wide rows."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from autorec.arch import DotConfig, num_dots
from autorec.blocks.base import InteractionBlock, autocast_output
from autorec.blocks.gram import pair_dots, pair_dots_parts
from autorec.blocks.registry import BlockKind, ScalingRule, SearchRules, Values, register_kind


class PairwiseDots(nn.Module):
    """The upper triangle of X X^T, in torchrec's ``triu_indices`` order (by
    :func:`~autorec.blocks.gram.pair_dots`, whose backward is faster on the CPU).

    Shapes: [B, F, D] -> [B, F(F-1)/2] (or [B, F(F+1)/2] with ``self_interaction``).

    Args:
        num_in: F, the number of input vectors.
        self_interaction: also keep each vector's dot with itself (the diagonal).

    Example:
        >>> PairwiseDots(3)(torch.ones(2, 3, 4))
        tensor([[4., 4., 4.],
                [4., 4., 4.]])
    """

    def __init__(self, num_in: int, self_interaction: bool = False) -> None:
        super().__init__()
        offset = 0 if self_interaction else 1
        # Not persistent: derived from the config, so checkpoints stay free of it (as in torchrec).
        self.register_buffer("triu", torch.triu_indices(num_in, num_in, offset=offset), persistent=False)

    def forward(self, x: torch.Tensor | list[torch.Tensor], passthrough: int = 0, pad: int = 0,
                dtype: torch.dtype | None = None) -> torch.Tensor:
        """[B, F, D] (or its two parts [B, F0, D] and [B, F - F0, D], read where they lie:
        :func:`~autorec.blocks.gram.pair_dots_parts`) -> [B, passthrough * D + dots + pad]: the
        first ``passthrough`` vectors flattened, the dots, ``pad`` zeros, in ``dtype`` (default
        x's; see :func:`~autorec.blocks.gram.pair_dots`)."""
        if isinstance(x, torch.Tensor):
            return pair_dots(x, self.triu[0], self.triu[1], passthrough, pad, dtype)
        x0, x1 = x
        return pair_dots_parts(x0, x1, self.triu[0], self.triu[1], passthrough, pad, dtype)


class DotInteraction(InteractionBlock):
    """DLRM interaction: the first ``n_passthrough`` vectors, then all pairwise dots.

    Computes what ``torchrec.models.dlrm.InteractionArch`` computes, for any F: the flattened
    passthrough vectors followed by the strict upper triangle of X X^T (diagonal included with
    ``self_interaction``), zero-padded at the end to a multiple of D so it packs into rows.
    With the dense vector first and ``n_passthrough=1``, the first ``D + F(F-1)/2`` values of
    the flattened output equal torchrec's ``InteractionArch(dense=X[:, 0], sparse=X[:, 1:])``.
    No parameters.

    Shapes: [B, F, D] -> [B, ceil((n_passthrough * D + dots) / D), D].

    Args:
        config: ``DotConfig`` (``n_passthrough``, ``self_interaction``).
        num_in: F, the number of input vectors.
        dim: D, the width of every vector.

    Example:
        >>> block = DotInteraction(DotConfig(n_passthrough=1), num_in=4, dim=4)
        >>> block.num_out  # 4 passthrough values + 6 dots = 10 -> 3 rows of 4
        3
        >>> block(torch.ones(2, 4, 4)).flatten(1)[0]
        tensor([1., 1., 1., 1., 4., 4., 4., 4., 4., 4., 0., 0.])
    """

    config_type = DotConfig
    takes_parts = True  # DLRM's dense vector and pooled embeddings, read with no concatenation

    def __init__(self, config: DotConfig, num_in: int, dim: int) -> None:
        super().__init__(config, num_in, dim)
        self.n_passthrough = config.n_passthrough
        self.dots = PairwiseDots(num_in, config.self_interaction)
        values = config.n_passthrough * dim + num_dots(num_in, config.self_interaction)
        self.pad = self.num_out * dim - values

    def forward(self, x: torch.Tensor | list[torch.Tensor]) -> torch.Tensor:
        """[B, F, D], or its parts (``takes_parts``) -> [B, num_out, D]."""
        # Feeding the over-arch's plain linear under autocast, the output is given in autocast's
        # dtype, which that linear would cast it to: the kernel writes it so, a pass fewer each way.
        low = autocast_output(x if isinstance(x, torch.Tensor) else x[-1]) if self.feeds_linear else None
        return self.dots(x, self.n_passthrough, self.pad, low).view(-1, self.num_out, self.dim)


class DotRules(SearchRules):
    """Passthrough at most the input vectors, and something to output: dots need 2+ inputs,
    else a passthrough vector or the self-dot."""

    shape_fields = ("n_passthrough", "self_interaction")

    def valid(self, key: str, value: Any, chosen: Mapping[str, Any], fields: Mapping[str, Values],
              dim: int, f_in: int) -> bool:
        if key == "n_passthrough":
            return value <= f_in and (value > 0 or f_in >= 2 or True in fields["self_interaction"])
        if key == "self_interaction":
            return value or chosen["n_passthrough"] > 0 or f_in >= 2
        return True

    def depends(self, key: str, dim: int, f_in: int) -> dict[str, int]:
        return {"f_in": f_in}


# The dot interaction has no size of its own: a DLRM grows by its MLPs (a three-layer over-arch,
# widened 2.5x per rung so that five rungs span two decades of FLOPs as the other families do).
SCALING = ScalingRule(start=DotConfig(), over_arch=(64, 64, 32), factor=2.5)
register_kind(BlockKind(DotConfig, DotInteraction, rules=DotRules(), tower_module=DotConfig(n_passthrough=0),
                        default=True, scaling=SCALING))
