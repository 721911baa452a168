"""Training in a one-process group without DDP (:class:`~autorec.train.distributed.OneProcess`),
against the dense parts wrapped in DDP as before: over one process DDP copies every gradient
into its buckets, all-reduces them with itself and copies them back.

Per preset, two Trainers on the ``scale`` workload's schema (batch 4096): the default, and one
whose dense parts ``shard`` wraps in torchrec's ``DefaultDataParallelWrapper`` (DDP). Both step
on the same batches in alternating rounds (``benchmarks/step_ab.py``); the figures are the
medians over rounds and the median of the rounds' ratios.

    OMP_NUM_THREADS=2 .venv/bin/python -m benchmarks.one_process [--presets dlrm,wukong] [--rounds 12] \\
        [--autocast bf16]

Flat keys ``one_process_<preset>[_dim<D>][_bf16]_{new,before}_step_ms`` and
``one_process_<preset>[_dim<D>][_bf16]_speedup`` (before over new, paired by round; with ``_min``,
``_max``), merged into ``benchmarks/results/throughput.json``.
"""

from __future__ import annotations

import functools
from typing import Any

from torchrec.distributed.model_parallel import DefaultDataParallelWrapper

import autorec.train.trainer as trainer_module
from autorec.train.trainer import Trainer
from benchmarks.step_ab import before_after_main


class Before(Trainer):
    """A Trainer whose dense parts are wrapped in DDP, as every Trainer's were before."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kept = trainer_module.shard
        trainer_module.shard = functools.partial(kept, wrapper=DefaultDataParallelWrapper())
        try:
            super().__init__(*args, **kwargs)
        finally:
            trainer_module.shard = kept


def main() -> None:
    before_after_main(__doc__, Before, "one_process", presets="dlrm,wukong", autocast="off")


if __name__ == "__main__":
    main()
