"""The synthetic data's hidden teacher: its score terms z1..zk and their readout to logits.

:class:`Teacher` computes the terms of the package doc from a TabularData, in chunks;
:class:`Readout` standardises them, mixes them by variance shares and fits the bias that gives
the base click rate.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import torch

from autorec.data.synthetic.config import SyntheticConfig
from autorec.data.synthetic.sampling import TEACHER, id_uniforms, rng_for, table_groups
from autorec.data.tabular import Jagged, TabularData

# The teacher walks the samples in chunks of [F, chunk, D + 1] ~ 8 MB: big enough that Python
# overhead is small, small enough that the working set stays near cache.
_CHUNK_FLOATS = 1 << 21


def _chunk(column: Jagged, start: int, stop: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Values and lengths of samples ``start:stop``."""
    offsets = column.offsets[start:stop + 1]
    return column.values[int(offsets[0]):int(offsets[-1])], offsets[1:] - offsets[:-1]


def _f32(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32))


def _mean_pool(vectors: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    if vectors.shape[0] == lengths.numel():  # one lookup per sample
        return vectors
    segment = torch.repeat_interleave(torch.arange(lengths.numel()), lengths)
    pooled = torch.zeros(lengths.numel(), vectors.shape[1]).index_add_(0, segment, vectors)
    return pooled / lengths.clamp(min=1).unsqueeze(1)


@dataclass(frozen=True, eq=False)
class Teacher:
    """The hidden score terms ``z1..zk`` (module docstring) as a function of a TabularData.

    Args:
        config: the dataset's config (tables, D, order).
        seed: with ``config``, fixes every hidden vector and coefficient.
        dense_proj: P, [n_dense, D].
        dense_weight: u, [n_dense].
        pair_weight: c_ij, [F, F], zero on and below the diagonal.
        triples: [R, 3] field indices (fields: dense first when present, then tables).
        triple_weight: c_r, [R].
        triple_direction: a_r, [R, D]: the direction of the third field in the "modulated" form.
    """

    config: SyntheticConfig
    seed: int
    dense_proj: torch.Tensor
    dense_weight: torch.Tensor
    pair_weight: torch.Tensor
    triples: torch.Tensor
    triple_weight: torch.Tensor
    triple_direction: torch.Tensor

    @classmethod
    def draw(cls, config: SyntheticConfig, seed: int) -> Teacher:
        rng = rng_for(seed, TEACHER)
        f, d = config.num_fields, config.teacher_dim
        proj = rng.standard_normal((config.num_dense, d)) / math.sqrt(max(config.num_dense, 1))
        dense_weight = rng.standard_normal(config.num_dense) / math.sqrt(max(config.num_dense, 1))
        pairs = np.triu(rng.standard_normal((f, f)), k=1)
        num_triples = min(config.num_triples, math.comb(f, 3)) if f >= 3 else 0
        chosen: set[tuple[int, ...]] = set()
        if config.num_groups:  # interactions within planted groups only; dense: first order only
            group = np.array([-1] * (config.num_dense > 0) + list(table_groups(config, seed)))
            pairs *= (group[:, None] == group[None, :]) & (group[:, None] >= 0)
            within = [c for c in itertools.combinations(range(f), 3)
                      if group[c[0]] >= 0 and group[c[0]] == group[c[1]] == group[c[2]]]
            picked = rng.choice(len(within), min(num_triples, len(within)), replace=False) if within else []
            chosen = {within[i] for i in picked}
        while len(chosen) < num_triples and not config.num_groups:
            chosen.add(tuple(sorted(rng.choice(f, 3, replace=False).tolist())))
        triples = np.array(sorted(chosen), dtype=np.int64).reshape(-1, 3)
        triple_weight = rng.standard_normal(len(triples))
        direction = rng.standard_normal((len(triples), d)) / math.sqrt(d)
        return cls(config, seed, _f32(proj), _f32(dense_weight), _f32(pairs), torch.from_numpy(triples),
                   _f32(triple_weight), _f32(direction))

    def fields(self, data: TabularData) -> tuple[torch.Tensor, torch.Tensor]:
        """Pooled hidden vectors ``e`` [N, F, D] (the dense field first) and ``Σ_t w_t + u·x`` [N]."""
        e, first = self._fields(data, 0, len(data))
        return e.transpose(0, 1), first

    def terms(self, data: TabularData) -> torch.Tensor:
        """[N, order] raw terms ``z1..zk`` (each of about unit variance), computed in chunks."""
        chunk = max(64, _CHUNK_FLOATS // (self.config.num_fields * (self.config.teacher_dim + 1)))
        return torch.cat([self._terms(data, start, min(start + chunk, len(data)))
                          for start in range(0, len(data), chunk)])

    def _fields(self, data: TabularData, start: int, stop: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``e`` as [F, B, D], so that mixing fields is one matrix product, and the first-order sum."""
        dense_fields = int(self.config.num_dense > 0)
        e = torch.empty(self.config.num_fields, stop - start, self.config.teacher_dim)
        first = torch.zeros(stop - start)
        if dense_fields:
            dense = data.dense[start:stop]
            torch.matmul(dense, self.dense_proj, out=e[0])
            first += dense @ self.dense_weight
        weights, ranks, d = self.config.table_weights, self.config.table_ranks, self.config.teacher_dim
        for table, column in enumerate(data.sparse):
            ids, lengths = _chunk(column, start, stop)
            pooled = _mean_pool(id_uniforms(ids, self.seed, table, d + 1), lengths)
            r, w = ranks[table], weights[table]
            e[dense_fields + table, :, :r] = pooled[:, 1:r + 1] * (w * math.sqrt(d / r))
            e[dense_fields + table, :, r:] = 0.0
            first += pooled[:, 0] * w
        return e, first

    def _terms(self, data: TabularData, start: int, stop: int) -> torch.Tensor:
        e, first = self._fields(data, start, stop)
        f, b, d = e.shape
        terms = [first / math.sqrt(f)]
        if self.config.teacher_order >= 2:
            flat = e.view(f, b * d)
            pairs = (flat * (self.pair_weight @ flat)).view(f, b, d).sum((0, 2))
            terms.append(pairs / math.sqrt(f * (f - 1) / 2 * d))
        if self.config.teacher_order >= 3:
            i, j, k = self.triples.unbind(1)
            if self.config.order3_form == "modulated":
                trilinear = (e[i] * e[j]).sum(2) * (e[k] @ self.triple_direction.unsqueeze(2)).squeeze(2)
            else:
                trilinear = (e[i] * e[j] * e[k]).sum(2)  # [R, B]
            terms.append(self.triple_weight @ trilinear / math.sqrt(len(self.triples) * d))
        return torch.stack(terms, dim=1)


@dataclass(frozen=True, eq=False)
class Readout:
    """Maps teacher terms to logits: ``b + Σ_k weight_k (z_k - mean_k)``."""

    mean: torch.Tensor  # [order]
    weight: torch.Tensor  # [order]
    bias: float

    @classmethod
    def fit(cls, terms: torch.Tensor, config: SyntheticConfig) -> Readout:
        """Standardise each term, mix by variance shares, and bisect the bias to ``base_ctr``."""
        s, order = config.interaction_share, config.teacher_order
        shares = {1: [1.0], 2: [1 - s, s], 3: [(1 - s) / 2, (1 - s) / 2, s]}[order]
        terms = terms.double()
        mean, std = terms.mean(0), terms.std(0).clamp(min=1e-12)
        weight = torch.tensor(shares, dtype=torch.float64).sqrt() / std / config.temperature
        score = ((terms - mean) @ weight).float()
        lo, hi = -40.0, 40.0
        for _ in range(40):  # to ~1e-10 in the bias
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if torch.sigmoid(score + mid).mean() < config.base_ctr else (lo, mid)
        return cls(mean.float(), weight.float(), (lo + hi) / 2)

    def logits(self, terms: torch.Tensor) -> torch.Tensor:
        return self.bias + (terms - self.mean) @ self.weight
