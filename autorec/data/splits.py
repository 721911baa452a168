"""How a dataset's rows become its train, valid and test splits: a rule, or one file per split.

Every file-based loader takes the same options:

* ``split: random`` (the default): a seeded permutation of the rows cut by ``fractions``
  (default 0.8/0.1/0.1); the same seed gives the same split.
* ``split: sequential``: the rows in file order, the first ``fractions[0]`` for training, then
  validation, then test, as Criteo benchmarks hold out the last days (no seed involved).
* ``train``, ``valid`` and ``test``: one file each (a published split); then ``path`` and
  ``split``/``fractions`` are not given. Ids and vocabularies are built as the loader builds them
  from one file (a vocabulary from the train file only).

Example:
    >>> rule = SplitRule.of("sequential", (0.5, 0.25, 0.25))
    >>> [r.tolist() for r in rule.rows(8, seed=0)]
    [[0, 1, 2, 3], [4, 5], [6, 7]]
    >>> [r.tolist() for r in file_rows([2, 1, 1])]
    [[0, 1], [2], [3]]
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from autorec.data.schema import DataError

SPLIT_KINDS = ("random", "sequential")
SPLIT_NAMES = ("train", "valid", "test")  # the option names of split files (the splits: train/val/test)
DEFAULT_FRACTIONS = (0.8, 0.1, 0.1)


@dataclass(frozen=True)
class SplitRule:
    """One table cut into train/val/test by ``kind`` (random or sequential) and ``fractions``."""

    kind: str = "random"
    fractions: tuple[float, float, float] = DEFAULT_FRACTIONS

    @classmethod
    def of(cls, kind: str | None = None, fractions: Sequence[float] | None = None) -> SplitRule:
        """The rule of the loader options ``split`` and ``fractions``; a DataError names the bad one."""
        kind = "random" if kind is None else kind
        if kind not in SPLIT_KINDS:
            raise DataError(f"split: expected one of {', '.join(SPLIT_KINDS)}, got {kind!r}")
        shares = DEFAULT_FRACTIONS if fractions is None else fractions
        try:
            values = tuple(float(f) for f in shares)
        except (TypeError, ValueError):
            raise DataError(f"fractions: expected 3 numbers (train, val, test shares), "
                            f"got {shares!r}") from None
        if len(values) != 3 or any(not f > 0 for f in values) \
                or not math.isclose(sum(values), 1.0, abs_tol=1e-6):
            raise DataError(f"fractions: expected 3 positive shares (train, val, test) summing to 1, "
                            f"got {list(shares)}")
        return cls(kind, values)  # type: ignore[arg-type]

    def rows(self, n: int, seed: int) -> list[torch.Tensor]:
        """Sorted row indices of train, val and test among ``n`` rows."""
        a = round(self.fractions[0] * n)
        bounds = [0, a, a + round(self.fractions[1] * n), n]
        if self.kind == "sequential":
            order = torch.arange(n)
        else:
            order = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
        return [order[lo:hi].sort().values for lo, hi in itertools.pairwise(bounds)]



def file_rows(counts: Sequence[int]) -> list[torch.Tensor]:
    """Row indices of each file's rows when the files' rows are concatenated in order."""
    bounds = [0, *itertools.accumulate(counts)]
    return [torch.arange(lo, hi) for lo, hi in itertools.pairwise(bounds)]


@dataclass(frozen=True)
class SplitFiles:
    """One file per split (a published split)."""

    train: Path
    valid: Path
    test: Path

    @property
    def files(self) -> tuple[Path, Path, Path]:
        return self.train, self.valid, self.test



def named_split_files(kind: str, path: str | None, split: str | None, fractions: Sequence[float] | None,
                      train: str | None, valid: str | None, test: str | None) -> dict[str, str] | None:
    """The split files a ``kind`` loader's options name (split name -> path), or None when they
    name none; a DataError when some are missing or they come with ``path``/``split``/``fractions``."""
    named = {n: f for n, f in zip(SPLIT_NAMES, (train, valid, test), strict=True) if f is not None}
    if not named:
        return None
    missing = [n for n in SPLIT_NAMES if n not in named]
    if missing:
        raise DataError(f"{kind}: split files {', '.join(f'{n}=' for n in named)} given without "
                        f"{', '.join(f'{n}=' for n in missing)}: name all three (or path= and a split rule)")
    for option, value in (("path", path), ("split", split), ("fractions", fractions)):
        if value is not None:
            raise DataError(f"{kind}: {option}= cannot go with train=, valid= and test= (the files are "
                            "the split)")
    return named


def split_source(kind: str, path: str | None, split: str | None, fractions: Sequence[float] | None,
                 train: str | None, valid: str | None,
                 test: str | None) -> tuple[Path | SplitFiles, SplitRule]:
    """The file (or split files) and the rule a ``kind`` loader's options name, checked: either
    ``path`` (with ``split``/``fractions``) or all of ``train``, ``valid`` and ``test``."""
    named = named_split_files(kind, path, split, fractions, train, valid, test)
    if named is None:
        if path is None:
            raise DataError(f"{kind} needs path= (one file, split by `split`) or train=, valid= and test= "
                            "(one file per split)")
        return _existing(path), SplitRule.of(split, fractions)
    return SplitFiles(*(_existing(named[n]) for n in SPLIT_NAMES)), SplitRule()


def _existing(path: str | Path) -> Path:
    file = Path(path)
    if not file.is_file():
        raise DataError(f"{file}: no such file")
    return file
