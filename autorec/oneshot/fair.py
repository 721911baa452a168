"""Strictly fair single-path sampling (FairNAS): every value of every choice trains equally often.

Uniform single-path sampling trains each value equally often only in expectation: over ``n``
steps a value's count is binomial, so by chance some values of a choice train less than others.
FairNAS (Chu et al., 2021) removes that variance: each step draws, for every choice, a random
permutation of its values, and runs ``m`` paths (``m``: the most values any choice has), path
``p`` taking value ``perm[p]`` of every choice; the gradients of the ``m`` paths are summed
before one update. A choice with fewer values than ``m`` walks its values in fresh random
permutations, so within a step its values are as even as ``m`` allows.

Example:
    >>> from autorec.supernet.mixed import Choice
    >>> choices = [Choice("a", ("x", "y", "z")), Choice("b", (1, 2))]
    >>> paths = fair_paths(choices, torch.Generator().manual_seed(0))
    >>> len(paths), sorted(p["a"] for p in paths)
    (3, [0, 1, 2])
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from autorec.supernet.mixed import Choice


def fair_paths(choices: Sequence[Choice], generator: torch.Generator) -> list[dict[str, int]]:
    """``m`` paths (choice name -> value index) in which every choice's values each appear
    ``m // len(values)`` or one more times, in random order."""
    m = max((len(c.values) for c in choices), default=1)
    columns: dict[str, list[int]] = {}
    for choice in choices:
        order: list[int] = []
        while len(order) < m:
            order.extend(torch.randperm(len(choice.values), generator=generator).tolist())
        columns[choice.name] = order[:m]
    return [{name: column[p] for name, column in columns.items()} for p in range(m)]
