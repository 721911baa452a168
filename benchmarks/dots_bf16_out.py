"""DLRM's dots written in bf16 under autocast (``DotInteraction.feeds_linear``), against the
fp32 dots that the over-arch's first linear casts to bf16, and whose bf16 gradient autograd
casts back to fp32 for the kernel's backward: one pass over the [B, 368] output each way.

Two Trainers of a preset on the ``scale`` workload's schema (batch 4096) under bf16 autocast:
the default, and one whose last block does not feed its output in autocast's dtype. Both step
on the same batches in alternating rounds (``benchmarks/step_ab.py``); the figures are the
medians over rounds and the median of the rounds' ratios.

    OMP_NUM_THREADS=2 .venv/bin/python -m benchmarks.dots_bf16_out [--rounds 12] [--dim 64]

Flat keys ``dots_bf16_out_dlrm[_dim<D>]_bf16_{new,before}_step_ms`` and
``dots_bf16_out_dlrm[_dim<D>]_bf16_speedup`` (before over new, paired by round; with ``_min``,
``_max``), merged into ``benchmarks/results/throughput.json``.
"""

from __future__ import annotations

from typing import Any

from autorec.train.trainer import Trainer
from benchmarks.step_ab import before_after_main


class Before(Trainer):
    """A Trainer whose last interaction block gives its output in its own dtype (fp32)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.model.module.layers[-1].feeds_linear = False


def main() -> None:
    before_after_main(__doc__, Before, "dots_bf16_out", presets="dlrm", autocast="bf16")


if __name__ == "__main__":
    main()
