"""The one-shot supernet's step with freed memory kept warm (``SupernetTraining(keep_freed_memory=
True)``, :mod:`autorec.train.memory`) against glibc's defaults, in fresh processes.

Issue 20's search trains its supernet, fits the kind heads, scores the layer grid and runs the
fine phase before the study builds any Trainer, and until the thirty-second session nothing set
glibc's thresholds in those stages: every step faulted its large temporaries in again. Each run
here is its own process (the setting is process-wide): the supernet of
``benchmarks/spaces/scale.yaml`` with issue 20's recipe options (variant ``k59``: own columns per
width and rows per hash size, DLRM rescaled, batch 1024) on the ``scale`` workload, ``--warmup``
steps, then ``--steps`` timed coarse steps (all-alike paths, as the first 2000 of ``k59``) and as
many fine ones (per-feature paths half the time, from step 2000); the arms alternate from run to
run. Figures: each arm's median, least and greatest ms per step, page faults and kernel (sys) ms
per step of both phases, and the median of the runs' paired ratios (default over kept).

    OMP_NUM_THREADS=2 .venv/bin/python -m benchmarks.supernet_memory [--runs 4] [--steps 60]

Flat keys ``supernet_memory_{kept,default}_{coarse,fine}_{step_ms,faults_per_step,sys_ms_per_step}
_{median,min,max}``, ``supernet_memory_{coarse,fine}_speedup`` (with ``_min``, ``_max``) and
``supernet_memory_runs``, merged into ``benchmarks/results/throughput.json`` with the machine and
commit.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import fields
from pathlib import Path
from typing import Any

from benchmarks.results_file import RESULTS, ROOT, merge_results

SPACE = ROOT / "benchmarks" / "spaces" / "scale.yaml"
PHASES = {"coarse": 0, "fine": 2000}  # the step index each phase's timed steps start at
FIGURES = ("step_ms", "faults_per_step", "sys_ms_per_step")


def _timed_steps(training: Any, batches: Any, start: int, n: int) -> dict[str, float]:
    """ms, minor page faults and kernel ms per step over ``n`` steps from index ``start``."""
    before, clock = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    for i in range(n):
        training.step(next(batches), start + i)
    seconds, after = time.perf_counter() - clock, resource.getrusage(resource.RUSAGE_SELF)
    return {"step_ms": seconds / n * 1e3, "faults_per_step": (after.ru_minflt - before.ru_minflt) / n,
            "sys_ms_per_step": (after.ru_stime - before.ru_stime) / n * 1e3}


def child(keep: bool, warmup: int, steps: int, samples: int, out: Path) -> None:
    """One run in this process: build the supernet (``keep``: with the setting), warm up, time
    both phases; the figures to ``out`` as JSON."""
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.getLogger().setLevel(logging.ERROR)
    from autorec.data import load_dataset
    from autorec.oneshot.train import OneShotTrainConfig, SupernetTraining
    from autorec.space import SearchSpace
    from benchmarks.oneshot_variants import VARIANTS

    names = {f.name for f in fields(OneShotTrainConfig)}
    options = {k: v for k, v in VARIANTS["k59"][1].items() if k in names}
    config = OneShotTrainConfig(steps=3000, batch_size=1024, **options)
    data = load_dataset("synthetic", preset="scale", num_samples=samples)
    folder = tempfile.mkdtemp(prefix="supernet-memory-")
    training = SupernetTraining(SearchSpace.load(SPACE), data, config, folder, keep_freed_memory=keep)
    batches, _ = training.search.batches(start=0)
    got: dict[str, float] = {}
    for phase, start in PHASES.items():
        for i in range(warmup):
            training.step(next(batches), start + i)
        got |= {f"{phase}_{k}": v for k, v in _timed_steps(training, batches, start + warmup, steps).items()}
    out.write_text(json.dumps(got))


def figures_of(runs: dict[str, list[dict[str, float]]]) -> dict[str, Any]:
    """Each arm's median, least and greatest of every figure and phase, and the paired ratios.

    Example:
        >>> run = {f"{p}_{f}": 1.0 for p in PHASES for f in FIGURES}
        >>> out = figures_of({"kept": [run], "default": [{**run, "coarse_step_ms": 1.25}]})
        >>> out["supernet_memory_coarse_speedup"], out["supernet_memory_fine_speedup"]
        (1.25, 1.0)
    """
    out: dict[str, Any] = {"supernet_memory_runs": len(runs["kept"])}
    for arm, got in runs.items():
        for phase in PHASES:
            for figure in FIGURES:
                values = [g[f"{phase}_{figure}"] for g in got]
                key = f"supernet_memory_{arm}_{phase}_{figure}"
                out |= {f"{key}_median": statistics.median(values), f"{key}_min": min(values),
                        f"{key}_max": max(values)}
    for phase in PHASES:
        ratios = [d[f"{phase}_step_ms"] / k[f"{phase}_step_ms"]
                  for d, k in zip(runs["default"], runs["kept"], strict=True)]
        out |= {f"supernet_memory_{phase}_speedup": statistics.median(ratios),
                f"supernet_memory_{phase}_speedup_min": min(ratios),
                f"supernet_memory_{phase}_speedup_max": max(ratios)}
    return out


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """The flags; an error naming the flag for a count below 1."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=4, help="processes per arm")
    parser.add_argument("--warmup", type=int, default=10, help="untimed steps before each phase")
    parser.add_argument("--steps", type=int, default=60, help="timed steps per phase")
    parser.add_argument("--samples", type=int, default=300_000, help="rows of the scale workload")
    parser.add_argument("--json", default=str(RESULTS / "throughput.json"))
    parser.add_argument("--child", choices=("kept", "default"), help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    for name in ("runs", "warmup", "steps", "samples"):
        if getattr(args, name) < 1:
            parser.error(f"--{name}: expected an integer >= 1, got {getattr(args, name)}")
    return args


def main() -> None:
    args = parse()
    if args.child:
        child(args.child == "kept", args.warmup, args.steps, args.samples, args.out)
        return
    runs: dict[str, list[dict[str, float]]] = {"kept": [], "default": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.runs):
            for arm in (("kept", "default") if r % 2 == 0 else ("default", "kept")):
                out = Path(tmp) / f"{arm}_{r}.json"
                command = [sys.executable, "-m", "benchmarks.supernet_memory", "--child", arm,
                           "--out", str(out), "--warmup", str(args.warmup), "--steps", str(args.steps),
                           "--samples", str(args.samples)]
                done = subprocess.run(command, capture_output=True, text=True)
                if done.returncode != 0:
                    raise SystemExit(f"supernet_memory: {' '.join(command)} failed ({done.returncode}):\n"
                                     f"{done.stderr[-2000:]}")
                runs[arm].append(json.loads(out.read_text()))
                got = runs[arm][-1]
                print(f"run {r} {arm:7s} " + "; ".join(
                    f"{p} {got[f'{p}_step_ms']:.1f} ms/step, {got[f'{p}_faults_per_step']:.0f} faults, "
                    f"{got[f'{p}_sys_ms_per_step']:.1f} kernel ms" for p in PHASES), flush=True)
    figures = figures_of(runs)
    for name, value in figures.items():
        print(f"{name:56s} {value:.3f}" if isinstance(value, float) else f"{name:56s} {value}")
    merge_results(Path(args.json), figures, prefix="supernet_memory")


if __name__ == "__main__":
    main()
