"""Wukong's stacked layers run as one (each layer's tail with the next one's head in one pass:
``autorec.native.wukong_layer.mid``) against the layers one by one on the same kernels.

Between two layers the one-by-one run writes a layer's output [B, F, D] in fp32 and reads it
back, and its backward writes and reads the output's gradient and reads the output again: here
those stay in L1, sample by sample. Two Trainers of the wukong preset on the ``scale``
workload (batch 4096; two layers, F = 27 then 16, D = 16): the default, and one whose steps run
inside :func:`autorec.native.wukong_layer.stack_disabled`, on the same batches in alternating
rounds (``benchmarks/step_ab.py``).

    OMP_NUM_THREADS=2 .venv/bin/python -m benchmarks.wukong_stack [--rounds 12] [--autocast off]

Flat keys ``wukong_stack_wukong[_bf16]_{new,before}_step_ms`` and ``wukong_stack_wukong[_bf16]_speedup``
(before over new, paired by round; with ``_min``, ``_max``), merged into
``benchmarks/results/throughput.json``.
"""

from __future__ import annotations

from typing import Any

from autorec.native import wukong_layer as native_wukong
from autorec.train.trainer import Trainer
from benchmarks.step_ab import before_after_main


class OneByOne(Trainer):
    """A Trainer whose steps run Wukong's layers one by one (no tail-and-head pass)."""

    def train_step(self, batch: Any) -> Any:
        with native_wukong.stack_disabled():
            return super().train_step(batch)


def main() -> None:
    before_after_main(__doc__, OneByOne, "wukong_stack", presets="wukong", autocast="bf16")


if __name__ == "__main__":
    main()
