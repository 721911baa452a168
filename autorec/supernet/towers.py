"""The supernet's DMT towers: tower count, tower module kind and size as mixed ops.

Three choices (the space's parameter names): ``towers.num`` (K, 0 for no towers),
``towers.kind`` (the tower module's block) and ``towers.n_out`` (vectors per tower). The groups
of each K are fixed for the run (the space's ``towers.partition``, e.g. from the partitioner).

``towers.num`` is a :class:`~autorec.supernet.mixed.MixedChoice` over K: K = 0 passes the pooled
embeddings through; each K > 0 is a MixedChoice over ``towers.kind`` of
:class:`~autorec.blocks.towers.Towers` built with the largest ``n_out``, whose outputs a
weight-shared prefix mask over each tower's vectors cuts to the chosen ``n_out`` (as
:func:`~autorec.supernet.mixed.width_mask` does for widths). Outputs are zero-padded to the
widest candidate, so the stack after it takes a fixed number of vectors.

Shapes: pooled embeddings [B, F, D] -> [B, max(F, K_max * n_out_max), D].

E[cost] (autorec.supernet.cost) takes the tower modules' cost exactly over the three choices.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from autorec.arch import TowerSpec
from autorec.blocks.towers import Towers
from autorec.data.schema import Schema
from autorec.space.towers import TowerChoices, tower_module
from autorec.supernet.mixed import Choice, MixedChoice, Weights, width_mask

Ranker = Callable[[str, tuple[Any, ...]], list[Any]]


class _Identity(nn.Module):
    def forward(self, x: torch.Tensor, weights: Weights) -> torch.Tensor:
        return x


class _SizedTowers(nn.Module):
    """K towers of one kind at the largest n_out, each tower's vectors masked to the chosen n_out."""

    def __init__(self, towers: Towers, k: int, sizes: tuple[int, ...]) -> None:
        super().__init__()
        self.towers, self.k, self.sizes = towers, k, sizes
        self.n_max = max(sizes)

    def forward(self, x: torch.Tensor, weights: Weights) -> torch.Tensor:
        out = self.towers(x)
        if len(self.sizes) == 1:
            return out
        mask = width_mask(weights["towers.n_out"], self.sizes, self.n_max)  # [n_max]
        return out * mask.repeat(self.k).view(1, -1, 1)


class _Kinds(nn.Module):
    """One K: a mix over the tower module kinds (or the single kind)."""

    def __init__(self, candidates: dict[str, _SizedTowers]) -> None:
        super().__init__()
        first = next(iter(candidates.values()))
        self.run = (MixedChoice("towers.kind", candidates, first.k * first.n_max) if len(candidates) > 1
                    else first)

    def forward(self, x: torch.Tensor, weights: Weights) -> torch.Tensor:
        return self.run(x, weights)


class SuperTowers(nn.Module):
    """Every tower choice of ``choices`` for ``schema`` at width ``dim``; call with the pooled
    sparse embeddings [B, F, D] and the sampled weights.

    Example:
        >>> from autorec.data import Schema, SparseFeature
        >>> schema = Schema((), tuple(SparseFeature(f"f{i}", 5) for i in range(4)))
        >>> net = SuperTowers(TowerChoices(num=(0, 2), kinds=("mlp", "dlrm"), n_out=(1, 2)), schema, dim=4)
        >>> [c.name for c in net.choices()], net.num_out
        (['towers.num', 'towers.kind', 'towers.n_out'], 4)
        >>> w = {"towers.num": torch.tensor([0.0, 1.0]), "towers.kind": torch.tensor([1.0, 0.0]),
        ...      "towers.n_out": torch.tensor([1.0, 0.0])}
        >>> net(torch.randn(3, 4, 4), w).shape
        torch.Size([3, 4, 4])
    """

    def __init__(self, choices: TowerChoices, schema: Schema, dim: int) -> None:
        super().__init__()
        self.choices_, self.features = choices, schema.sparse_names
        self.sizes = tuple(choices.n_out)
        candidates: dict[str, nn.Module] = {}
        widths = []
        index = {f: i for i, f in enumerate(self.features)}
        for k in choices.num:
            if k == 0:
                candidates["0"] = _Identity()
                widths.append(len(self.features))
                continue
            positions = [[index[f] for f in g] for g in choices.groups(k, self.features)]
            candidates[str(k)] = _Kinds({kind: _SizedTowers(Towers(tower_module(kind), positions, dim,
                                                                    max(self.sizes)), k, self.sizes)
                                         for kind in choices.kinds})
            widths.append(k * max(self.sizes))
        self.num_out = max(widths)
        self.run = (MixedChoice("towers.num", candidates, self.num_out) if len(candidates) > 1
                    else next(iter(candidates.values())))

    def choices(self) -> list[Choice]:
        """The architecture choices this module owns (those with more than one value)."""
        out = []
        if len(self.choices_.num) > 1:
            out.append(Choice("towers.num", tuple(self.choices_.num)))
        if any(k > 0 for k in self.choices_.num):
            if len(self.choices_.kinds) > 1:
                out.append(Choice("towers.kind", tuple(self.choices_.kinds)))
            if len(self.sizes) > 1:
                out.append(Choice("towers.n_out", self.sizes))
        return out

    def forward(self, x: torch.Tensor, weights: Weights) -> torch.Tensor:
        out = self.run(x, weights)
        return nn.functional.pad(out, (0, 0, 0, self.num_out - out.shape[1]))

    def derive(self, rank: Ranker) -> TowerSpec | None:
        """The most preferred towers (None for K = 0)."""
        k = rank("towers.num", tuple(self.choices_.num))[0]
        if k == 0:
            return None
        kind = rank("towers.kind", tuple(self.choices_.kinds))[0]
        n_out = rank("towers.n_out", self.sizes)[0]
        return self.choices_.spec(k, kind, n_out, self.features)
