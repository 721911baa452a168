"""The CPU embedding tables on 2 MiB transparent huge pages (``TrainConfig.huge_pages``,
``autorec.train.huge_pages``) against the same tables on 4 KiB pages.

First the embedding kernels alone: the lookups that DLRM training steps made on the ``scale``
workload (26 features at Criteo Kaggle's cardinalities capped at 10^6, 16 floats a row, 356 MB
of tables, batch 4096), captured from a Trainer, then the compiled pooled lookup and row-wise
Adagrad update run on two Trainers' tables, one on huge pages, one not, in alternating repeats,
with 64 MB written before each call (the rows cold, as in a step). Then two Trainers of each
preset, the default (huge pages) and one with ``huge_pages=False``, on the same batches in
alternating rounds (``benchmarks/step_ab.py``). Both train the same, bit for bit
(``tests/train/test_huge_pages.py``).

    OMP_NUM_THREADS=2 .venv/bin/python -m benchmarks.huge_pages [--presets dlrm,wukong] [--rounds 12] \\
        [--autocast bf16]

Flat keys ``huge_pages_alone_{lookup,update}_{huge,small}_ms`` (medians),
``huge_pages_alone_{lookup,update}_speedup`` (small pages' time over huge pages'),
``huge_pages_alone_collapse_s`` (the seconds ``back_tables`` took on the first Trainer's tables)
and ``huge_pages_alone_collapse_again_s`` (on the second's, once the first's are freed),
``huge_pages_<preset>[_bf16]_{new,before}_step_ms`` and ``huge_pages_<preset>[_bf16]_speedup``
(before over new, paired by round; with ``_min``, ``_max``), merged into
``benchmarks/results/throughput.json``.
"""

from __future__ import annotations

import dataclasses
import gc
import itertools
import statistics
import time
from typing import Any

import torch

from autorec.data import load_dataset
from autorec.presets import preset
from autorec.train import cpu_lookup, huge_pages, native_update
from autorec.train.trainer import TrainConfig, Trainer
from benchmarks.embedding_update import captured_lookups
from benchmarks.native_lookup import BATCH, FLUSH_MB
from benchmarks.step_ab import before_after_main


class SmallPages(Trainer):
    """A Trainer whose tables stay on 4 KiB pages (``huge_pages=False``)."""

    def __init__(self, spec: Any, data: Any, config: TrainConfig, *args: Any, **kwargs: Any) -> None:
        super().__init__(spec, data, dataclasses.replace(config, huge_pages=False), *args, **kwargs)


def alone(repeats: int, autocast: str) -> dict[str, float]:
    """The pooled lookup and the row-wise Adagrad update on huge-page tables and on small-page
    ones, cold, in alternating repeats after 2 of warm-up (medians, ms); see the module."""
    del autocast  # the tables are fp32 either way
    reason = huge_pages.unsupported()
    if reason is not None:
        raise SystemExit(f"huge_pages: {reason}")
    data = load_dataset("synthetic", preset="scale", num_samples=6 * BATCH)
    config = TrainConfig(batch_size=BATCH, progress=False, huge_pages=False)
    runs = {way: Trainer(preset("dlrm", data.schema), data, config) for way in ("huge", "small")}
    start = time.perf_counter()
    collapsed = huge_pages.back_tables(runs["huge"].model)
    collapse_s = time.perf_counter() - start
    assert collapsed > 0, "no table was put on huge pages"
    batches = list(itertools.islice(runs["small"]._batches("train", BATCH, True, 0), 3))
    lookups = captured_lookups(runs["small"], batches)
    tables = {way: cpu_lookup.fused_tables(run.model)[0] for way, run in runs.items()}
    flush = torch.empty(FLUSH_MB * 2**18)
    upstream = torch.randn(BATCH, tables["huge"].total_D, generator=torch.Generator().manual_seed(0)) * 1e-4
    times: dict[str, list[float]] = {f"{part}_{way}": [] for part in ("lookup", "update") for way in runs}
    with torch.no_grad():
        for repeat in range(repeats + 2):
            for way in (("huge", "small") if repeat % 2 else ("small", "huge")):
                tbe = tables[way]
                for indices, offsets in lookups:
                    flush.fill_(repeat)
                    begin = time.perf_counter()
                    cpu_lookup.lookup(tbe, indices, offsets)
                    middle = time.perf_counter()
                    flush.fill_(repeat)
                    resumed = time.perf_counter()
                    native_update.rowwise_adagrad(tbe, indices, offsets, upstream, mean=False)
                    end = time.perf_counter()
                    if repeat >= 2:
                        times[f"lookup_{way}"].append(middle - begin)
                        times[f"update_{way}"].append(end - resumed)
    figures = {f"huge_pages_alone_{key}_ms": 1e3 * statistics.median(t) for key, t in times.items()}
    for part in ("lookup", "update"):
        figures[f"huge_pages_alone_{part}_speedup"] = (figures[f"huge_pages_alone_{part}_small_ms"]
                                                       / figures[f"huge_pages_alone_{part}_huge_ms"])
    figures["huge_pages_alone_collapse_s"] = collapse_s
    figures["huge_pages_alone_collapsed_mb"] = collapsed / 2**20
    # the same again once the first tables' huge pages are freed, as for a study's next trial
    del runs["huge"], tables["huge"]
    gc.collect()
    start = time.perf_counter()
    huge_pages.back_tables(runs["small"].model)
    figures["huge_pages_alone_collapse_again_s"] = time.perf_counter() - start
    return figures


def main() -> None:
    before_after_main(__doc__, SmallPages, "huge_pages", presets="dlrm,wukong", autocast="off", alone=alone)


if __name__ == "__main__":
    main()
