"""Freed memory kept for reuse (``TrainConfig.keep_freed_memory``, :mod:`autorec.train.memory`)
against glibc's defaults: each preset's step in fresh processes, the two arms alternating.

The setting is process-wide and cannot be undone, so every run is its own process: one
``benchmarks/step_profile.py`` run of one preset, with or without ``--no-keep-freed-memory``,
the arms alternating and the presets rotating from round to round, so that a load that comes
and goes weighs on both arms alike. The figures are the median, least and greatest step time,
floor share, page faults and kernel (sys) milliseconds per step of each arm, and the median of
the rounds' paired ratios (default over kept).

    OMP_NUM_THREADS=2 .venv/bin/python -m benchmarks.malloc_keep [--presets dlrm,wukong] [--runs 5] \\
        [--autocast bf16] [--dim 64]

Flat keys ``malloc_keep_<preset>[_dim<D>][_bf16]_{kept,default}_<figure>_median`` (figure: ``step_ms``,
``floor_share``, ``faults_per_step``, ``sys_ms_per_step``; and
``_min``, ``_max``) and ``malloc_keep_<preset>[_dim<D>][_bf16]_speedup`` (with ``_min``, ``_max``), merged
into ``benchmarks/results/throughput.json``.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.floor_share_runs import one_run, runs_args
from benchmarks.results_file import merge_results
from benchmarks.step_profile import figure_key

ARMS = {"kept": (), "default": ("--no-keep-freed-memory",)}


def figures_of(key: str, runs: dict[str, list[dict[str, float]]]) -> dict[str, Any]:
    """Each arm's median, least and greatest step time, floor share, page faults and kernel
    milliseconds per step, and the paired ratios of step time."""
    out: dict[str, Any] = {}
    for arm, got in runs.items():
        for figure in ("step_ms", "floor_share", "faults_per_step", "sys_ms_per_step"):
            values = [g[figure] for g in got]
            out |= {f"{key}_{arm}_{figure}_median": statistics.median(values),
                    f"{key}_{arm}_{figure}_min": min(values), f"{key}_{arm}_{figure}_max": max(values)}
    ratios = [d["step_ms"] / k["step_ms"] for d, k in zip(runs["default"], runs["kept"], strict=True)]
    out |= {f"{key}_speedup": statistics.median(ratios), f"{key}_speedup_min": min(ratios),
            f"{key}_speedup_max": max(ratios), f"{key}_runs": len(ratios)}
    return out


def main() -> None:
    args, presets = runs_args(__doc__)
    runs = {p: {arm: [] for arm in ARMS} for p in presets}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.runs):
            arms = list(ARMS) if r % 2 == 0 else list(ARMS)[::-1]
            for preset in presets[r % len(presets):] + presets[:r % len(presets)]:
                for arm in arms:
                    got = one_run(preset, args.autocast, Path(tmp) / f"{preset}_{arm}_{r}.json", ARMS[arm],
                                  dim=args.dim)
                    runs[preset][arm].append(got)
                    print(f"run {r}: {preset} {arm} {got['step_ms']:.1f} ms/step, "
                          f"floor share {got['floor_share']:.2f}, {got['faults_per_step']:.0f} faults "
                          f"and {got['sys_ms_per_step']:.1f} kernel ms per step", flush=True)
    figures: dict[str, Any] = {}
    for preset in presets:
        key = "malloc_keep_" + figure_key(preset, args.autocast, args.dim)
        figures |= figures_of(key, runs[preset])
    for name, value in figures.items():
        print(f"{name:52s} {value:.3f}" if isinstance(value, float) else f"{name:52s} {value}")
    merge_results(Path(args.json), figures, prefix="malloc_keep")


if __name__ == "__main__":
    main()
