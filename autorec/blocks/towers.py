"""DMT tower module: one tower's interaction, compressed to a few vectors.

A tower holds a group of strongly interacting features (autorec.towers.partition finds them).
Its module runs any interaction block on the group's pooled embeddings and compresses the
block's output, beside the embeddings themselves, to ``n_out`` vectors, so that only those
cross to the global interaction stack (and, sharded, across hosts)::

    x [B, F_t, D] --block--> y [B, F_b, D];  [x, y] [B, F_t + F_b, D] --compress--> [B, n_out, D]

The compression is a learned linear map along the vector axis (as Wukong's linear compress
block): ``out[b, c, :] = Σ_i W[c, i] · [x, y][b, i, :] + bias[c, :]``, initialised so that the
first outputs are the block's outputs.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from autorec.arch import BlockConfig
from autorec.blocks import build_block


class TowerModule(nn.Module):
    """One tower: ``[B, num_in, D] -> [B, n_out, D]``.

    Args:
        config: the interaction block run inside the tower (any registered kind).
        num_in: F_t, the tower's features.
        dim: D.
        n_out: vectors the tower emits.

    Example:
        >>> from autorec.arch import DotConfig
        >>> tower = TowerModule(DotConfig(n_passthrough=0), num_in=4, dim=8, n_out=2)
        >>> tower(torch.randn(3, 4, 8)).shape
        torch.Size([3, 2, 8])
    """

    def __init__(self, config: BlockConfig, num_in: int, dim: int, n_out: int) -> None:
        super().__init__()
        if n_out < 1:
            raise ValueError(f"tower: n_out must be >= 1, got {n_out}")
        self.config, self.num_in, self.dim, self.num_out = config, num_in, dim, n_out
        self.block = build_block(config, num_in, dim)
        width = num_in + self.block.num_out
        # The first outputs start as the block's outputs (plus small noise), so the interactions
        # the tower computed cross as they are, not blurred into the raw embeddings; the others
        # start as random mixtures of all the tower's vectors. With random mixtures only, seed 1
        # of benchmarks/towers_quality.py ended 0.019 test AUC below the flat model; with this
        # start, 0.0004 above (BENCHMARKS.md, "DMT towers").
        weight = torch.randn(n_out, width) / math.sqrt(width)
        kept = min(n_out, self.block.num_out)
        weight[:kept] *= 0.1
        weight[torch.arange(kept), num_in + torch.arange(kept)] += 1.0
        self.weight = nn.Parameter(weight)
        self.bias = nn.Parameter(torch.zeros(n_out, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        both = torch.cat([x, self.block(x)], dim=1)
        return torch.einsum("ci,bid->bcd", self.weight, both) + self.bias


class Towers(nn.Module):
    """All towers of a model: pooled embeddings ``[B, F, D]`` -> ``[B, K * n_out, D]``.

    ``positions[k]`` lists tower k's feature positions on the F axis; the towers' outputs are
    concatenated in tower order.

    Args:
        config: the tower module's block.
        positions: per tower, indices into the F axis.
        dim: D.
        n_out: vectors per tower.

    Example:
        >>> from autorec.arch import MLPConfig
        >>> towers = Towers(MLPConfig(hidden=(8,), n_out=1), [[0, 2], [1]], dim=4, n_out=2)
        >>> towers(torch.randn(5, 3, 4)).shape
        torch.Size([5, 4, 4])
    """

    def __init__(self, config: BlockConfig, positions: list[list[int]], dim: int, n_out: int) -> None:
        super().__init__()
        self.positions = [list(p) for p in positions]
        for k, p in enumerate(self.positions):
            self.register_buffer(f"index{k}", torch.tensor(p, dtype=torch.long), persistent=False)
        self.towers = nn.ModuleList(TowerModule(config, len(p), dim, n_out) for p in self.positions)
        self.num_out = len(self.positions) * n_out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([tower(x.index_select(1, getattr(self, f"index{k}")))
                          for k, tower in enumerate(self.towers)], dim=1)
