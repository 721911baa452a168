"""The CPU tables' pooled lookup on the compiled kernel (``autorec.train.native_lookup``) against
fbgemm's CPU forward (``split_embedding_codegen_forward_cpu``).

First the lookup alone: the lookups that DLRM training steps really made on the ``scale``
workload (26 features at Criteo Kaggle's cardinalities capped at 10^6, one row of 16 floats a
bag, batch 4096), captured from a Trainer and run on its own tables, each way in alternating
repeats; then two Trainers of each preset, the default (the kernel) and one whose steps take
fbgemm's forward (:class:`FbgemmLookup`), on the same batches in alternating rounds
(``benchmarks/step_ab.py``). Both ways give the same values bit for bit
(``tests/train/test_native_lookup.py``).

    OMP_NUM_THREADS=2 .venv/bin/python -m benchmarks.native_lookup [--presets dlrm,wukong] [--rounds 12]

Flat keys ``native_lookup_alone_{native,fbgemm}_ms`` (median of the lookups over the repeats,
their rows warm in the cache), ``native_lookup_alone_cold_{native,fbgemm,update}_ms`` (64 MB
written before each call: the rows cold, as in a step; ``update`` is the compiled row-wise
Adagrad on the same lookups), ``native_lookup_alone[_cold]_speedup`` (fbgemm's over the
kernel's), ``native_lookup_<preset>_{new,before}_step_ms`` and ``native_lookup_<preset>_speedup``
(before over new, paired by round; with ``_min``, ``_max``), merged into
``benchmarks/results/throughput.json``.
"""

from __future__ import annotations

import contextlib
import itertools
import statistics
import time
from typing import Any

import torch

from autorec.data import load_dataset
from autorec.presets import preset
from autorec.train import cpu_lookup, native_lookup, native_update
from autorec.train.trainer import TrainConfig, Trainer
from benchmarks.embedding_update import captured_lookups
from benchmarks.step_ab import before_after_main

BATCH = 4096
FLUSH_MB = 64  # written before each cold call: past the L2 and most of a last-level cache


class FbgemmLookup(Trainer):
    """A Trainer whose steps take fbgemm's CPU forward (the compiled lookup off)."""

    def train_step(self, batch: Any) -> Any:
        with native_lookup.disabled():
            return super().train_step(batch)


def alone(repeats: int, autocast: str, batch: int = BATCH, samples: int = 6 * BATCH,
          flush_mb: int = FLUSH_MB) -> dict[str, float]:
    """The lookup alone each way, in alternating repeats after 2 of warm-up (medians, ms): warm
    (three captured lookups again and again: their rows stay in the last-level cache) and cold
    (``flush_mb`` MB written before each call, as a step's activations evict the rows between
    one step's lookups and the next's); cold, the update (``native_update.rowwise_adagrad``) too."""
    del autocast  # the tables are fp32 either way
    data = load_dataset("synthetic", preset="scale", num_samples=samples)
    run = Trainer(preset("dlrm", data.schema), data, TrainConfig(batch_size=batch, progress=False))
    lookups = captured_lookups(run, list(itertools.islice(run._batches("train", batch, True, 0), 3)))
    tbe = cpu_lookup.fused_tables(run.model)[0]
    flush = torch.empty(flush_mb * 2**18)
    upstream = torch.randn(batch, tbe.total_D, generator=torch.Generator().manual_seed(0)) * 1e-4
    ways = {"native": contextlib.nullcontext, "fbgemm": native_lookup.disabled}
    times: dict[str, list[float]] = {key: [] for key in (*ways, "cold_native", "cold_fbgemm", "cold_update")}
    with torch.no_grad():
        for repeat in range(repeats + 2):
            for way, context in ways.items():
                with context():
                    for key, cold in ((way, False), (f"cold_{way}", True)):  # the warm pass first
                        for indices, offsets in lookups:
                            if cold:
                                flush.fill_(repeat)
                            start = time.perf_counter()
                            cpu_lookup.lookup(tbe, indices, offsets)
                            if repeat >= 2:
                                times[key].append(time.perf_counter() - start)
            for indices, offsets in lookups:
                flush.fill_(repeat)
                start = time.perf_counter()
                native_update.rowwise_adagrad(tbe, indices, offsets, upstream[: (offsets.numel() - 1)
                                              // (tbe.D_offsets.numel() - 1)], mean=False)
                if repeat >= 2:
                    times["cold_update"].append(time.perf_counter() - start)
    figures = {f"native_lookup_alone_{key}_ms": 1e3 * statistics.median(t) for key, t in times.items()}
    for prefix in ("native_lookup_alone", "native_lookup_alone_cold"):
        figures[f"{prefix}_speedup"] = figures[f"{prefix}_fbgemm_ms"] / figures[f"{prefix}_native_ms"]
    return figures


def main() -> None:
    if native_lookup.library() is None:
        raise SystemExit("native_lookup: the kernel could not be built here (see the warning above)")
    before_after_main(__doc__, FbgemmLookup, "native_lookup", presets="dlrm,wukong", autocast="off",
                      alone=alone)


if __name__ == "__main__":
    main()
