"""A batch of the ``scale`` workload read column by column against sample-major (issue 25).

``TabularData.batch`` once gathered each one-id sparse column on its own: at 4M training rows
each of the 26 columns is 32 MB, and a batch's 1024 random rows cost one cache miss per column
and row. It now reads them from one sample-major copy (``TabularData._single_ids``: each sample's
ids side by side, int32 where the tables fit), one miss or two per row. This times both on the
same random batches, alternating rounds, and checks they give the same KJT.

    .venv/bin/python -m benchmarks.batch_gather [--batch-sizes 1024,4096] [--rounds 5]

Flat keys ``batch_gather_<B>_{columns,sample_major}_ms`` (medians over rounds) and
``batch_gather_<B>_speedup``, merged into ``benchmarks/results/throughput.json``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

import torch
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from benchmarks.results_file import RESULTS, merge_results


def by_columns(data: Any, idx: torch.Tensor) -> KeyedJaggedTensor:
    """The batch's KJT as ``batch`` built it before: each column's own ``take``."""
    values, lengths = zip(*(column.take(idx) for column in data.sparse), strict=True)
    return KeyedJaggedTensor(keys=list(data.schema.sparse_names), values=torch.cat(values),
                             lengths=torch.cat(lengths).to(torch.int32))


def sample_major(data: Any, idx: torch.Tensor) -> KeyedJaggedTensor:
    """The batch's KJT as ``batch`` builds it now."""
    kjt: KeyedJaggedTensor = data.batch(idx).sparse_features
    return kjt


def _ms(build: Any, data: Any, batches: list[torch.Tensor]) -> float:
    start = time.perf_counter()
    for idx in batches:
        build(data, idx)
    return (time.perf_counter() - start) / len(batches) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-sizes", default="1024,4096")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batches", type=int, default=100, help="batches per round")
    parser.add_argument("--samples", type=int, default=5_000_000, help="rows of the scale workload")
    parser.add_argument("--json", default=str(RESULTS / "throughput.json"))
    args = parser.parse_args()
    try:
        sizes = [int(s) for s in args.batch_sizes.split(",")]
    except ValueError:
        parser.error(f"--batch-sizes: expected integers separated by commas, got {args.batch_sizes!r}")
    if not sizes or min(sizes) < 1 or args.rounds < 1 or args.batches < 1:
        parser.error("--batch-sizes, --rounds and --batches: expected integers >= 1")
    from autorec.data import load_dataset

    data = load_dataset("synthetic", preset="scale", num_samples=args.samples).splits["train"]
    generator = torch.Generator().manual_seed(0)
    figures: dict[str, Any] = {"batch_gather_rows": len(data), "batch_gather_rounds": args.rounds}
    for size in sizes:
        batches = [torch.randperm(len(data), generator=generator)[:size] for _ in range(args.batches)]
        old, new = by_columns(data, batches[0]), sample_major(data, batches[0])  # (and builds the copy)
        if not (torch.equal(old.values(), new.values()) and torch.equal(old.lengths(), new.lengths())):
            raise SystemExit(f"batch_gather: the two ways differ at batch size {size}")
        times: dict[str, list[float]] = {"columns": [], "sample_major": []}
        for r in range(args.rounds):
            for name in (("columns", "sample_major") if r % 2 == 0 else ("sample_major", "columns")):
                times[name].append(_ms(by_columns if name == "columns" else sample_major, data, batches))
        columns, major = statistics.median(times["columns"]), statistics.median(times["sample_major"])
        figures |= {f"batch_gather_{size}_columns_ms": columns, f"batch_gather_{size}_sample_major_ms": major,
                    f"batch_gather_{size}_speedup": columns / major}
        print(f"batch {size}: column by column {columns:.2f} ms, sample-major {major:.2f} ms "
              f"({columns / major:.2f}x)", flush=True)
    merge_results(Path(args.json), figures, prefix="batch_gather")


if __name__ == "__main__":
    main()
