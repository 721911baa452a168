"""A Criteo-like generator whose labels come from a hidden teacher of chosen interaction order.

Because the true click probability ``p`` of every sample is known, a model's AUC can be compared
with the Bayes-optimal AUC (that of ``p`` itself) on the same split.

Sparse features. Table ``t`` has ``rows[t]`` ids. A lookup draws a popularity rank ``r`` from a
bounded power law ``P(r) ∝ (r + 1)^-alpha`` on ``[0, rows)`` by inverse CDF, and the id is
``perm_t(r)``, a keyed Feistel permutation of ``[0, rows)`` (by cycle-walking) computed on the fly:
hot ids exist but are spread over the whole range, no two ranks share an id, and no per-row table
is ever built (10^8 rows cost nothing). A sample holds ``1 + Poisson(pooling[t] - 1)``
lookups of table ``t`` (multi-hot and jagged when ``pooling[t] > 1``). Dense features are N(0, 1).

Teacher. Every id owns a hidden vector ``v_t(id) ∈ R^D`` and a scalar ``w_t(id)``, read from
16-bit lanes of ``mix64(id ^ salt(seed, t, k))``, uniform on ``[-√3, √3]`` (unit variance): a pure
function of ``(seed, table, id)``. A multi-hot feature pools them by mean, giving ``e_t`` and
``w_t``. Dense features ``x`` join as one more field ``e_0 = x P`` (``P`` [n_dense, D], N(0, 1/n_dense)
entries); so there are ``F = num_tables + (num_dense > 0)`` fields. The terms are

    z1 = (Σ_t w_t + u·x) / √F                                            first order
    z2 = Σ_{i<j} c_ij <e_i, e_j> / √(n_pairs · D)                        pairwise (FM / DLRM)
    z3 = Σ_r c_r <e_{i_r}, e_{j_r}> <a_r, e_{k_r}> / √(R · D)             "modulated" (default)
    z3 = Σ_r c_r Σ_d e_{i_r}[d] e_{j_r}[d] e_{k_r}[d] / √(R · D)          "diagonal"

over R random field triples, with ``c ~ N(0, 1)``, ``u ~ N(0, 1/n_dense)`` and ``a_r ~ N(0, 1/D)``.
Both order-3 forms are trilinear in three distinct fields. "modulated" is an affinity of two
fields scaled by a direction of a third (say user x item, modulated by context): the shape of
interaction that stacked factorization machines and cross networks build from pairwise dot
products. "diagonal" is the ANOVA kernel of higher-order factorization machines; it needs
per-coordinate products, which cross networks form but dot-product stacks (Wukong) can only
approximate. The teacher of order ``k`` uses ``z1..zk``;
each term is standardised on the generated samples and mixed with variance shares (order 2:
``1 - s, s``; order 3: ``(1 - s)/2, (1 - s)/2, s`` with ``s = interaction_share``), so

    logit = b + Σ_k √share_k · (z_k - mean_k) / std_k / temperature,    p = sigmoid(logit),

where the bias ``b`` is found by bisection so that ``mean(p) = base_ctr``, and ``y ~ Bernoulli(p)``.
Order-3 terms are products of three distinct fields, which no sum of pairwise dot products
represents; stacked interaction layers (Wukong, DHEN, DCNv2) can.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields, replace
from itertools import pairwise
from typing import Any

import numpy as np
import torch

from autorec.data.base import SPLITS, InMemoryDataset
from autorec.data.hashing import mix64
from autorec.data.schema import DataError, Schema, SparseFeature
from autorec.data.tabular import Jagged, TabularData

# Quality presets: 6 single-hot tables of 20 to 1000 rows and 500k samples, so that every id is
# seen often enough for its vector to be learned and what separates models is the interaction
# order they can represent, not the estimation of rare ids. With tables up to 10^4 rows and
# 200k samples, every model overfit the tail in 1-2 epochs and the order-3 structure was
# drowned out (BENCHMARKS.md).
_QUALITY: dict[str, Any] = {
    "num_samples": 500_000, "num_dense": 4, "num_tables": 6, "rows": (20, 50, 100, 200, 500, 1000),
    "pooling": 1.0, "zipf_alpha": 1.1, "teacher_dim": 4, "temperature": 0.33,
}

PRESETS: dict[str, dict[str, Any]] = {
    # The benchmark shape: Criteo's 13 dense + 26 single-hot features, 1M rows per table.
    "criteo_like": {"num_samples": 1_000_000, "num_dense": 13, "num_tables": 26, "rows": 1_000_000,
                    "pooling": 1.0, "teacher_order": 2, "teacher_dim": 8},
    # Quality tests: the order-3 teacher leaves a 2nd-order model visibly short of a 3rd-order one.
    "order2": {**_QUALITY, "teacher_order": 2},
    "order3": {**_QUALITY, "teacher_order": 3, "interaction_share": 0.8},
    # DMT towers: 16 tables in 4 planted groups; features interact (pairwise) only within their
    # group, the dense field only at first order. Tables are dealt to groups in blocks of 4 of
    # equal rows (50, 100, 200, 500), so every group holds one table of each size and a
    # partition that recovers the groups is also balanced in bytes and lookups.
    "groups4": {**_QUALITY, "num_tables": 16, "num_groups": 4,
                "rows": (50,) * 4 + (100,) * 4 + (200,) * 4 + (500,) * 4, "teacher_order": 2,
                "interaction_share": 0.8},
    # Smoke tests and quickstarts.
    "tiny": {"num_samples": 5000, "num_dense": 3, "num_tables": 4, "rows": (50, 100, 200, 1000),
             "pooling": (1.0, 1.0, 2.0, 3.0), "teacher_order": 2, "teacher_dim": 4},
}

ORDER3_FORMS = ("modulated", "diagonal")

_M64 = (1 << 64) - 1
_SQRT3 = math.sqrt(3.0)
# The teacher walks the samples in chunks of [F, chunk, D + 1] ~ 8 MB: big enough that Python
# overhead is small, small enough that the working set stays near cache.
_CHUNK_FLOATS = 1 << 21

# Purposes of the random streams and hash salts, so no two draws share one.
_IDS, _LENGTHS, _DENSE, _TEACHER, _LABELS, _SCRAMBLE, _VECTORS, _GROUPS = range(8)


@dataclass(frozen=True)
class SyntheticConfig:
    """Everything that shapes a synthetic dataset; ``load_synthetic`` options map onto these fields.

    Args:
        num_samples: samples before the 80/10/10 split.
        num_dense: dense columns ``int_0..``.
        num_tables: sparse features ``cat_0..``, one table each.
        rows: ids per table, one int for all or one per table (up to 10^8 and more: nothing of
            size ``rows`` is allocated).
        pooling: mean lookups per sample, per table or one for all; ``> 1`` makes the feature
            multi-hot with ``1 + Poisson(pooling - 1)`` lookups.
        zipf_alpha: power-law exponent of id popularity (0 is uniform; ~1 is Criteo-like).
        teacher_order: 1, 2 or 3: the highest interaction order planted in the labels.
        teacher_dim: D, the size of the teacher's hidden vectors.
        num_triples: R, the random field triples of the order-3 term.
        order3_form: "modulated" or "diagonal", the shape of the order-3 term (module docstring).
        interaction_share: share of logit variance in the highest-order term (order >= 2).
        temperature: divides the unit-variance teacher score; lower is less label noise.
        base_ctr: mean click probability, reached through the bias.
        num_groups: 0 (off) or G planted feature groups: the tables are dealt to G groups in
            blocks of G consecutive tables, each block shuffled by the seed (every group gets
            one table of each block); pairs and triples of the teacher are drawn within groups
            only and the dense field keeps its first-order term only (``feature_groups``).
    """

    num_samples: int = 100_000
    num_dense: int = 13
    num_tables: int = 26
    rows: int | tuple[int, ...] = 100_000
    pooling: float | tuple[float, ...] = 1.0
    zipf_alpha: float = 1.05
    teacher_order: int = 2
    teacher_dim: int = 8
    num_triples: int = 16
    order3_form: str = "modulated"
    interaction_share: float = 0.7
    temperature: float = 0.5
    base_ctr: float = 0.25
    num_groups: int = 0

    def __post_init__(self) -> None:
        for name in ("rows", "pooling"):
            value = getattr(self, name)
            if isinstance(value, Sequence) and not isinstance(value, str):
                object.__setattr__(self, name, tuple(value))
        checks = [
            (self.num_samples >= 10, "num_samples must be >= 10"),
            (self.num_dense >= 0, "num_dense must be >= 0"),
            (self.num_tables >= 1, "num_tables must be >= 1"),
            (all(r >= 1 for r in self.table_rows), "rows must be >= 1"),
            (all(m >= 1.0 for m in self.table_pooling), "pooling must be >= 1"),
            (self.zipf_alpha >= 0, "zipf_alpha must be >= 0"),
            (self.teacher_order in (1, 2, 3), "teacher_order must be 1, 2 or 3"),
            (self.teacher_dim >= 1, "teacher_dim must be >= 1"),
            (self.num_triples >= 1, "num_triples must be >= 1"),
            (self.order3_form in ORDER3_FORMS,
             f"order3_form must be one of {', '.join(ORDER3_FORMS)}, got {self.order3_form!r}"),
            (0.0 <= self.interaction_share <= 1.0, "interaction_share must lie in [0, 1]"),
            (self.temperature > 0, "temperature must be > 0"),
            (0.0 < self.base_ctr < 1.0, "base_ctr must lie in (0, 1)"),
            (0 <= self.num_groups <= self.num_tables,
             f"num_groups must lie in [0, num_tables={self.num_tables}], got {self.num_groups}"),
            (self.num_fields >= self.teacher_order,
             f"teacher_order {self.teacher_order} needs as many fields (tables + dense)"),
        ]
        for ok, message in checks:
            if not ok:
                raise DataError(f"synthetic: {message}")

    @classmethod
    def from_options(cls, preset: str | None = None, **options: Any) -> SyntheticConfig:
        """A preset (see ``PRESETS``) overridden by ``options``; unknown names are errors."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise DataError(f"synthetic: unknown option(s) {', '.join(unknown)}; "
                            f"expected preset or one of {', '.join(sorted(known))}")
        if preset is not None and preset not in PRESETS:
            raise DataError(f"synthetic: unknown preset {preset!r}; expected one of {', '.join(PRESETS)}")
        return cls(**{**PRESETS.get(preset or "", {}), **options})

    @property
    def table_rows(self) -> tuple[int, ...]:
        return self._per_table("rows", int)

    @property
    def table_pooling(self) -> tuple[float, ...]:
        return self._per_table("pooling", float)

    @property
    def num_fields(self) -> int:
        """F: one field per table, plus one for the projected dense features."""
        return self.num_tables + (self.num_dense > 0)

    def _per_table(self, name: str, kind: type) -> tuple:
        value = getattr(self, name)
        if not isinstance(value, tuple):
            return (kind(value),) * self.num_tables
        if len(value) != self.num_tables:
            raise DataError(f"synthetic: {name} has {len(value)} entries for {self.num_tables} tables")
        return tuple(kind(v) for v in value)

    def schema(self) -> Schema:
        return Schema(
            dense=tuple(f"int_{i}" for i in range(self.num_dense)),
            sparse=tuple(SparseFeature(f"cat_{t}", rows, multi_hot=pooling > 1.0)
                         for t, (rows, pooling) in enumerate(zip(self.table_rows, self.table_pooling,
                                                                 strict=True))),
        )


# --- hashing: the id -> hidden vector map that needs no table ---------------------------------

def _mix_int(x: int) -> int:
    """splitmix64's finaliser on a Python int (a bijection of 64-bit words)."""
    x &= _M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


def _salt(*parts: int) -> np.uint64:
    h = 0x9E3779B97F4A7C15
    for part in parts:
        h = _mix_int(h ^ (part & _M64))
    return np.uint64(h)


def _permute(x: np.ndarray, rows: int, key: np.uint64) -> np.ndarray:
    """A keyed bijection of ``[0, rows)``: a 4-round Feistel network on the smallest even-bit power
    of two >= rows, re-applied to values that land outside (cycle-walking; < 4 rounds on average)."""
    half = max(1, -(-max(rows - 1, 1).bit_length() // 2))
    mask = np.uint64((1 << half) - 1)

    def feistel(v: np.ndarray) -> np.ndarray:
        left, right = v >> np.uint64(half), v & mask
        for r in range(4):
            left, right = right, left ^ (mix64(right ^ (key + np.uint64(r))) & mask)
        return (left << np.uint64(half)) | right

    out = feistel(x)
    outside = np.flatnonzero(out >= rows)
    while outside.size:
        out[outside] = feistel(out[outside])
        outside = outside[out[outside] >= rows]
    return out


def _id_uniforms(ids: torch.Tensor, seed: int, table: int, n: int) -> torch.Tensor:
    """[len(ids), n] float32, uniform on [-√3, √3]: a fixed function of (seed, table, id)."""
    words = ids.contiguous().numpy().view(np.uint64)
    lanes = [mix64(words ^ _salt(seed, _VECTORS, table, k)).astype("<u8", copy=False).view("<u2")
             .reshape(-1, 4) for k in range(-(-n // 4))]
    out = np.concatenate(lanes, axis=1)[:, :n].astype(np.float32)
    out *= 2 * _SQRT3 / 65536
    out += _SQRT3 / 65536 - _SQRT3
    return torch.from_numpy(out)


# --- sampling ------------------------------------------------------------------------------

def _rng(seed: int, *purpose: int) -> np.random.Generator:
    return np.random.default_rng([seed & _M64, *purpose])


def power_law_ranks(u: np.ndarray, rows: int, alpha: float) -> np.ndarray:
    """Inverse CDF of ``P(r) ∝ (r + 1)^-alpha`` on ``[0, rows)`` (continuous approximation).

    Example:
        >>> power_law_ranks(np.array([0.0, 0.5, 0.999]), 1000, 1.0).tolist()
        [0, 30, 993]
    """
    top = float(rows) + 1.0
    if abs(alpha - 1.0) < 1e-9:
        x = np.power(top, u)
    else:
        a = 1.0 - alpha
        x = np.power((top**a - 1.0) * u + 1.0, 1.0 / a)
    return np.clip(np.floor(x).astype(np.int64) - 1, 0, rows - 1)


def _sample_table(config: SyntheticConfig, seed: int, table: int) -> Jagged:
    n, rows, pooling = config.num_samples, config.table_rows[table], config.table_pooling[table]
    if pooling > 1.0:
        lengths = 1 + _rng(seed, _LENGTHS, table).poisson(pooling - 1.0, n)
    else:
        lengths = np.ones(n, dtype=np.int64)
    ranks = power_law_ranks(_rng(seed, _IDS, table).random(int(lengths.sum())), rows, config.zipf_alpha)
    ids = _permute(ranks.view(np.uint64), rows, _salt(seed, _SCRAMBLE, table))
    return Jagged.from_lengths(torch.from_numpy(ids.view(np.int64)), torch.from_numpy(lengths))


# --- the teacher ---------------------------------------------------------------------------

def table_groups(config: SyntheticConfig, seed: int) -> tuple[int, ...]:
    """The planted group of each table (all 0 when ``num_groups`` is 0): blocks of G consecutive
    tables, each dealt to the G groups in a seeded random order.

    Example:
        >>> table_groups(SyntheticConfig(num_tables=6, num_groups=3, num_dense=0), seed=0)
        (2, 0, 1, 0, 1, 2)
    """
    g = config.num_groups
    if g == 0:
        return (0,) * config.num_tables
    rng = _rng(seed, _GROUPS)
    groups: list[int] = []
    for start in range(0, config.num_tables, g):
        groups.extend(int(k) for k in rng.permutation(g)[: config.num_tables - start])
    return tuple(groups)


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
        rng = _rng(seed, _TEACHER)
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
        for table, column in enumerate(data.sparse):
            ids, lengths = _chunk(column, start, stop)
            pooled = _mean_pool(_id_uniforms(ids, self.seed, table, self.config.teacher_dim + 1), lengths)
            e[dense_fields + table] = pooled[:, 1:]
            first += pooled[:, 0]
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


# --- the dataset ---------------------------------------------------------------------------

def _split_indices(n: int, seed: int, fractions: tuple[float, ...] = (0.8, 0.1, 0.1)) -> list[torch.Tensor]:
    """The sample indices of each part, exactly as ``TabularData.split`` draws them."""
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    bounds = [0]
    for f in fractions[:-1]:
        bounds.append(bounds[-1] + round(f * n))
    bounds.append(n)
    return [perm[a:b].sort().values for a, b in pairwise(bounds)]


def _subset(data: TabularData, idx: torch.Tensor) -> TabularData:
    """``data.subset(idx)``, with a fast path for single-hot columns (a plain gather).

    Generated samples hold >= 1 id per feature, so ``nnz == N`` means one id each.
    """
    columns = tuple(Jagged.single(column.values[idx]) if column.values.numel() == len(data)
                    else Jagged.from_lengths(*column.take(idx)) for column in data.sparse)
    return TabularData(data.schema, data.dense[idx], columns, data.labels[idx])


class SyntheticDataset(InMemoryDataset):
    """Generated data with its true click probabilities.

    Args:
        config: how it was generated.
        seed: its seed.
        splits: train/val/test TabularData.
        probs: the true ``p`` of every sample, per split.
        teacher, readout: ``p = sigmoid(readout.logits(teacher.terms(data)))``.
    """

    def __init__(self, config: SyntheticConfig, seed: int, splits: dict[str, TabularData],
                 probs: dict[str, torch.Tensor], teacher: Teacher, readout: Readout) -> None:
        super().__init__("synthetic", splits)
        self.config, self.seed, self.probs = config, seed, probs
        self.teacher, self.readout = teacher, readout
        self._bayes_auc: dict[str, float] = {}

    def feature_groups(self) -> tuple[tuple[str, ...], ...]:
        """The planted groups of sparse feature names (``num_groups`` > 0), in group order.

        Example:
            >>> ds = load_synthetic(seed=0, preset="groups4", num_samples=1000)
            >>> [len(g) for g in ds.feature_groups()]
            [4, 4, 4, 4]
        """
        if not self.config.num_groups:
            raise DataError("synthetic: this dataset has no planted groups (num_groups is 0)")
        of = table_groups(self.config, self.seed)
        return tuple(tuple(f"cat_{t}" for t in range(self.config.num_tables) if of[t] == g)
                     for g in range(self.config.num_groups))

    def probability(self, data: TabularData) -> torch.Tensor:
        """The teacher's ``p`` [N] for any samples of this schema."""
        return torch.sigmoid(self.readout.logits(self.teacher.terms(data)))

    def bayes_auc(self, split: str) -> float:
        """AUC of the true ``p`` against the drawn labels of ``split``: what no model beats on average."""
        if split not in self._bayes_auc:
            from sklearn.metrics import roc_auc_score

            labels = self.splits[split].labels
            self._bayes_auc[split] = (float(roc_auc_score(labels.numpy(), self.probs[split].numpy()))
                                      if 0 < labels.sum() < labels.numel() else float("nan"))
        return self._bayes_auc[split]

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "config": asdict(self.config),
            "seed": self.seed,
            "ctr": {s: float(self.splits[s].labels.mean()) for s in SPLITS},
            "bayes_auc": {s: self.bayes_auc(s) for s in SPLITS},
        }


@contextmanager
def _one_torch_thread() -> Iterator[None]:
    """Run torch single-threaded: generation is many small ops, and on a 2-core machine whose other
    core is busy, OpenMP's second thread made it 5x slower (23 s against 4.7 s for criteo_like)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def generate(config: SyntheticConfig, seed: int = 0) -> SyntheticDataset:
    """Sample ``config.num_samples`` samples, label them by the teacher, split 80/10/10 by ``seed``."""
    with _one_torch_thread():
        return _generate(config, seed)


def _generate(config: SyntheticConfig, seed: int) -> SyntheticDataset:
    n = config.num_samples
    schema = config.schema()
    dense = torch.from_numpy(_rng(seed, _DENSE).standard_normal((n, config.num_dense), dtype=np.float32))
    columns = tuple(_sample_table(config, seed, t) for t in range(config.num_tables))
    unlabelled = TabularData(schema, dense, columns, torch.zeros(n))
    teacher = Teacher.draw(config, seed)
    terms = teacher.terms(unlabelled)
    readout = Readout.fit(terms, config)
    probs = torch.sigmoid(readout.logits(terms))
    labels = (torch.from_numpy(_rng(seed, _LABELS).random(n, dtype=np.float32)) < probs).float()
    data = replace(unlabelled, labels=labels)
    parts = dict(zip(SPLITS, _split_indices(n, seed), strict=True))
    return SyntheticDataset(config, seed, {s: _subset(data, idx) for s, idx in parts.items()},
                            {s: probs[idx] for s, idx in parts.items()}, teacher, readout)


def load_synthetic(path: str | None = None, seed: int = 0, **options: Any) -> SyntheticDataset:
    """The ``synthetic`` dataset: ``preset`` (see ``PRESETS``) and/or SyntheticConfig fields.

    Example:
        >>> ds = load_synthetic(seed=0, preset="tiny", num_samples=1000)
        >>> ds.num_rows("train"), ds.bayes_auc("test") > 0.5
        (800, True)
    """
    if path is not None:
        raise DataError(f"synthetic data is generated, not read: got path {path!r}")
    return generate(SyntheticConfig.from_options(**options), seed)
