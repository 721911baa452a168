"""The first block reading the dense vector and the pooled embeddings where they lie (DLRM's dots,
Wukong's first layer: ``takes_parts``), against the two concatenated first (what
``RecModel.forward`` did before ``takes_parts``).

Two Trainers of the preset, the default and one whose first block carries a no-op forward
pre-hook (a hooked block gets the concatenated tensor: ``RecModel.forward``), on the same batches
in alternating rounds (``benchmarks/step_ab.py``), on the scale workload.

    OMP_NUM_THREADS=2 .venv/bin/python -m benchmarks.dots_parts [--rounds 12] [--presets wukong]

Flat keys ``dots_parts_<preset>[_bf16]_{new,before}_step_ms`` and
``dots_parts_<preset>[_bf16]_speedup`` (before over new, paired by round; with ``_min``,
``_max``), merged into ``benchmarks/results/throughput.json``.
"""

from __future__ import annotations

from typing import Any

from autorec.train.trainer import Trainer
from benchmarks.step_ab import before_after_main


class Concatenated(Trainer):
    """A Trainer whose model concatenates its first block's input (a no-op hook on that block)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        net = getattr(self.model, "module", self.model)
        net.layers[0].register_forward_pre_hook(lambda module, args: None)


def main() -> None:
    before_after_main(__doc__, Concatenated, "dots_parts", presets="dlrm", autocast="bf16")


if __name__ == "__main__":
    main()
