"""How long the hand-written kernels take to build on first use, and to load from the cache.

Each kernel of :mod:`autorec.native` is compiled into a fresh empty cache (what a process on a
new machine, or after a source change, pays once), then found there by a second call (what
every later process pays), ``--repeats`` times each, with the same compiler and flags as
:func:`autorec.native.build.compile_kernel`.

    .venv/bin/python -m benchmarks.native_build [--repeats 3]

Flat keys ``native_build_<kernel>_cold_s`` (median seconds of a build into an empty cache) and
``native_build_<kernel>_cached_s``, merged into ``benchmarks/results/throughput.json``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from autorec.native import build
from benchmarks.results_file import RESULTS, merge_results

KERNELS = ("rowwise_adagrad", "pooled_lookup", "pair_dots", "layer_norm", "wukong_layer")


def build_times(name: str, repeats: int) -> tuple[float, float]:
    """(cold, cached) median seconds of :func:`build.compile_kernel` for ``<name>.cpp``."""
    cold, cached = [], []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as root:
            start = time.perf_counter()
            built = build.compile_kernel(build.HERE / f"{name}.cpp", root=Path(root))
            cold.append(time.perf_counter() - start)
            start = time.perf_counter()
            assert build.compile_kernel(build.HERE / f"{name}.cpp", root=Path(root)) == built
            cached.append(time.perf_counter() - start)
    return statistics.median(cold), statistics.median(cached)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", default=str(RESULTS / "throughput.json"))
    args = parser.parse_args(argv)
    figures: dict[str, float] = {}
    for name in KERNELS:
        cold, cached = build_times(name, args.repeats)
        figures[f"native_build_{name}_cold_s"], figures[f"native_build_{name}_cached_s"] = cold, cached
        print(f"{name}: built in {cold:.2f} s into an empty cache, "
              f"found in the cache in {cached * 1e3:.1f} ms")
    merge_results(Path(args.json), figures, prefix="native_build")


if __name__ == "__main__":
    main()
