"""Which split each Criteo line belongs to: at random, in file order, or by the file it is in.

A line is known by its position (file index, byte offset), so its split does not depend on how
the files are read (blocks, workers, shuffling):

* :class:`RandomLines` (``split: random``): a seeded hash of the position against the shares.
* :class:`SequentialLines` (``split: sequential``): the first ``fractions[0]`` of the lines (of
  all files, in order) train, the next ``fractions[1]`` validate, the rest test, as the Criteo
  benchmarks hold out the last days. Opening counts the lines (one pass) and finds where the
  cuts fall (a second pass, up to them).
* :class:`FileSplits` (``train``/``valid``/``test`` files): each file's lines go to its split.

Example:
    >>> import numpy as np
    >>> SequentialLines(((0, 30), (1, 0))).of_lines(np.array([0, 10, 30, 40]), 0).tolist()
    [0, 0, 1, 1]
    >>> FileSplits((0, 1, 2)).of_lines(np.array([0, 10]), 2).tolist()
    [2, 2]
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from autorec.data.criteo.blocks import DataFile, line_count, offset_after_lines
from autorec.data.criteo.encode import split_of_lines


@dataclass(frozen=True)
class RandomLines:
    """Split by a seeded hash of each line's position, in the given shares."""

    seed: int
    fractions: tuple[float, float, float]

    def of_lines(self, offsets: np.ndarray, file_index: int) -> np.ndarray:
        return split_of_lines(offsets, file_index, self.seed, self.fractions)

    def may_hold(self, file_index: int, split: int) -> bool:
        return self.fractions[split] > 0

    def describe(self) -> str:
        return f"random {'/'.join(f'{100 * f:g}' for f in self.fractions)}, seed {self.seed}"


@dataclass(frozen=True)
class SequentialLines:
    """Split in file order: ``cuts`` are the positions (file index, byte offset) of the first line
    of validation and of test (file index ``len(files)``: no such line)."""

    cuts: tuple[tuple[int, int], tuple[int, int]]
    rows: tuple[int, int, int] = (0, 0, 0)

    def of_lines(self, offsets: np.ndarray, file_index: int) -> np.ndarray:
        split = np.zeros(len(offsets), dtype=np.int8)
        for s, (cut_file, cut_offset) in enumerate(self.cuts, start=1):
            if file_index > cut_file:
                split[:] = s
            elif file_index == cut_file:
                split[offsets >= cut_offset] = s
        return split

    def may_hold(self, file_index: int, split: int) -> bool:
        first = (0, 0) if split == 0 else self.cuts[split - 1]
        last = self.cuts[split] if split < 2 else (1 << 62, 0)
        return first[0] <= file_index <= last[0] and self.rows[split] > 0

    @classmethod
    def of_files(cls, files: tuple[DataFile, ...], fractions: tuple[float, float, float]) -> SequentialLines:
        """Count the lines of ``files`` and find where the shares ``fractions`` cut them."""
        counts = [line_count(f) for f in files]
        total = sum(counts)
        first_val = round(fractions[0] * total)
        first_test = first_val + round(fractions[1] * total)
        before = [0, *itertools.accumulate(counts)]

        def position(line: int) -> tuple[int, int]:
            for i, file in enumerate(files):
                if line < before[i + 1]:
                    offset, _ = offset_after_lines(file, line - before[i]) if line > before[i] else (0, 0)
                    return i, int(offset or 0)
            return len(files), 0

        rows = (first_val, first_test - first_val, total - first_test)
        return cls((position(first_val), position(first_test)), rows)

    def describe(self) -> str:
        total = sum(self.rows)
        return "sequential " + "/".join(f"{100 * r / max(total, 1):.4g}" for r in self.rows)


@dataclass(frozen=True)
class FileSplits:
    """Each file's lines go to one split: ``split_of_file[i]`` for file ``i``."""

    split_of_file: tuple[int, ...]

    def of_lines(self, offsets: np.ndarray, file_index: int) -> np.ndarray:
        return np.full(len(offsets), self.split_of_file[file_index], dtype=np.int8)

    def may_hold(self, file_index: int, split: int) -> bool:
        return self.split_of_file[file_index] == split

    def describe(self) -> str:
        return "files"


LineSplit = RandomLines | SequentialLines | FileSplits
