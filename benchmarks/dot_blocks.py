"""DLRM's dots built and folded in blocks of the batch (``autorec.blocks.gram.BLOCK`` samples at
a time, so each block's [m, F * F] products stay in cache), against the whole batch at once.

Two Trainers of each preset on the ``scale`` workload's schema (batch 4096; F = 27, D = 16), both
on torch's path (the compiled kernel of ``autorec.native.pair_dots`` off; it is measured against
this path by ``benchmarks/native_dots.py``): one with the default blocks, and one whose steps run
``pair_dots`` with one block as large as the batch (the form
before). Both step on the same batches in alternating rounds (``benchmarks/step_ab.py``); the
figures are the medians over rounds and the median of the rounds' ratios. The two forms give the
same values bit for bit (``tests/blocks/test_gram.py``).

    OMP_NUM_THREADS=2 .venv/bin/python -m benchmarks.dot_blocks [--presets dlrm,dhen] [--rounds 12]

Flat keys ``dot_blocks_<preset>[_dim<D>][_bf16]_{new,before}_step_ms`` and
``dot_blocks_<preset>[_dim<D>][_bf16]_speedup`` (before over new, paired by round; with ``_min``,
``_max``), merged into ``benchmarks/results/throughput.json``.
"""

from __future__ import annotations

from typing import Any

from autorec.blocks import gram
from autorec.native import pair_dots as native_dots
from autorec.train.trainer import Trainer
from benchmarks.step_ab import before_after_main

WHOLE = 1 << 30  # a block larger than any batch: the whole batch at once


class TorchDots(Trainer):
    """A Trainer whose steps build the dots on torch's path (the compiled kernel off)."""

    def train_step(self, batch: Any) -> Any:
        with native_dots.disabled():
            return super().train_step(batch)


class Before(TorchDots):
    """A :class:`TorchDots` whose steps build and fold the dots over the whole batch at once."""

    def train_step(self, batch: Any) -> Any:
        kept, gram.BLOCK = gram.BLOCK, WHOLE
        try:
            return super().train_step(batch)
        finally:
            gram.BLOCK = kept


def main() -> None:
    before_after_main(__doc__, Before, "dot_blocks", presets="dlrm,dhen", autocast="off", new=TorchDots)


if __name__ == "__main__":
    main()
