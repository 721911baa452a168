"""Ids and hidden vectors of the synthetic data as pure functions of (seed, table, id).

Ids follow a bounded power law of popularity ranks, scattered over ``[0, rows)`` by a keyed
Feistel permutation, so no per-row table is ever built; a table's hidden vectors are read from
hashes of the id (:func:`id_uniforms`). Every random draw takes its own stream, named by a
purpose (``IDS``, ``LENGTHS``, ...), so no two draws share one.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from autorec.data.hashing import mix64
from autorec.data.synthetic.config import SyntheticConfig
from autorec.data.tabular import Jagged

_M64 = (1 << 64) - 1
_SQRT3 = math.sqrt(3.0)

# Purposes of the random streams and hash salts, so no two draws share one.
IDS, LENGTHS, DENSE, TEACHER, LABELS, SCRAMBLE, VECTORS, GROUPS = range(8)


# --- hashing: the id -> hidden vector map that needs no table ---------------------------------

def _mix_int(x: int) -> int:
    """splitmix64's finaliser on a Python int (a bijection of 64-bit words)."""
    x &= _M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


def salt(*parts: int) -> np.uint64:
    h = 0x9E3779B97F4A7C15
    for part in parts:
        h = _mix_int(h ^ (part & _M64))
    return np.uint64(h)


def permute(x: np.ndarray, rows: int, key: np.uint64) -> np.ndarray:
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


def id_uniforms(ids: torch.Tensor, seed: int, table: int, n: int) -> torch.Tensor:
    """[len(ids), n] float32, uniform on [-√3, √3]: a fixed function of (seed, table, id)."""
    words = ids.contiguous().numpy().view(np.uint64)
    lanes = [mix64(words ^ salt(seed, VECTORS, table, k)).astype("<u8", copy=False).view("<u2")
             .reshape(-1, 4) for k in range(-(-n // 4))]
    out = np.concatenate(lanes, axis=1)[:, :n].astype(np.float32)
    out *= 2 * _SQRT3 / 65536
    out += _SQRT3 / 65536 - _SQRT3
    return torch.from_numpy(out)


# --- sampling ------------------------------------------------------------------------------

def rng_for(seed: int, *purpose: int) -> np.random.Generator:
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


def sample_table(config: SyntheticConfig, seed: int, table: int) -> Jagged:
    n, rows, pooling = config.num_samples, config.table_rows[table], config.table_pooling[table]
    if pooling > 1.0:
        lengths = 1 + rng_for(seed, LENGTHS, table).poisson(pooling - 1.0, n)
    else:
        lengths = np.ones(n, dtype=np.int64)
    ranks = power_law_ranks(rng_for(seed, IDS, table).random(int(lengths.sum())), rows, config.zipf_alpha)
    ids = permute(ranks.view(np.uint64), rows, salt(seed, SCRAMBLE, table))
    return Jagged.from_lengths(torch.from_numpy(ids.view(np.int64)), torch.from_numpy(lengths))


# --- planted groups ------------------------------------------------------------------------

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
    rng = rng_for(seed, GROUPS)
    groups: list[int] = []
    for start in range(0, config.num_tables, g):
        groups.extend(int(k) for k in rng.permutation(g)[: config.num_tables - start])
    return tuple(groups)
