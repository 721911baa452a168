"""LayerNorm in fp32 and X^T with a contiguous gradient (``autorec/blocks/layout.py``), against
the layers' form before them, under bf16 autocast.

Two Trainers of a preset on the ``scale`` workload's schema (batch 4096): the default, and the
form before the change: every :class:`~autorec.blocks.layout.FloatLayerNorm` turned back into a
plain ``nn.LayerNorm`` (which CPU autocast runs in bf16), and Wukong's X^T taken as
``x.transpose(1, 2).contiguous()`` (its gradient a transposed view) while that Trainer steps.
Both step on the same batches in alternating rounds (``benchmarks/step_ab.py``); the figures
are the medians over rounds and the median of the rounds' ratios.

    OMP_NUM_THREADS=2 .venv/bin/python -m benchmarks.float_norms [--presets wukong,dhen] [--rounds 12] \
        [--autocast bf16]

Flat keys ``float_norms_<preset>[_bf16]_{new,before}_step_ms`` and
``float_norms_<preset>[_bf16]_speedup`` (before over new, paired by round), merged into
``benchmarks/results/throughput.json``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from torch import nn

import autorec.blocks.wukong as wukong_module
from autorec.blocks.layout import FloatLayerNorm
from autorec.train.trainer import Trainer
from benchmarks.step_ab import before_after_main


@contextmanager
def plain_transpose() -> Iterator[None]:
    """Wukong's X^T as it was taken before ``transposed``: a copy whose gradient is a view."""
    kept = wukong_module.transposed
    wukong_module.transposed = lambda x: x.transpose(1, 2).contiguous()
    try:
        yield
    finally:
        wukong_module.transposed = kept


class Before(Trainer):
    """A Trainer whose norms are plain ``nn.LayerNorm`` and whose steps take the plain X^T."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        norms = [m for m in self.model.modules() if isinstance(m, FloatLayerNorm)]
        assert norms, "the preset has no FloatLayerNorm"
        for norm in norms:
            norm.__class__ = nn.LayerNorm

    def train_step(self, batch: Any) -> Any:
        with plain_transpose():
            return super().train_step(batch)


def main() -> None:
    before_after_main(__doc__, Before, "float_norms", presets="wukong,dhen", autocast="bf16")


if __name__ == "__main__":
    main()
