"""Stateless integer hashing shared by the datasets (id hashing, split assignment, teachers)."""

from __future__ import annotations

import numpy as np


def mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: a bijection of uint64 (wrapping modulo 2^64) that spreads every
    input bit over the output. Returns a new array.

    Example:
        >>> int(mix64(np.array([0, 1], dtype=np.uint64))[1]) != 1
        True
    """
    x = x.astype(np.uint64, copy=True)
    with np.errstate(over="ignore"):
        x ^= x >> np.uint64(30)
        x *= np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(27)
        x *= np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(31)
    return x
