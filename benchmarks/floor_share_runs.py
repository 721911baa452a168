"""Issue 25's floor shares over several processes: each preset profiled alone, again and again.

On the 2-core VMs this project runs on, one preset's step time moves by up to 40% from one
process to the next (Wukong under bf16 autocast: 46 to 80 ms per step, in runs minutes apart),
and a preset profiled after another in the same process may carry the first's state. So this
runs ``benchmarks/step_profile.py`` for one preset at a time, each in a fresh process, the presets
rotating from round to round so that a load that comes and goes weighs on each alike, and keeps
every run's step time and floor share (each run measures its own rates, as ``step_profile``
does). The figures are the median, least and greatest over the runs.

With ``--against DIR`` (a checkout of an earlier commit, say ``git worktree add DIR <commit>``),
every round also runs each preset from DIR's code, the two trees' runs alternating, so that the
earlier commit is measured in the same hour on the same machine: a slow or fast spell of the VM
then moves both alike.

    OMP_NUM_THREADS=2 .venv/bin/python -m benchmarks.floor_share_runs [--presets dlrm,wukong] [--runs 5] \
        [--autocast bf16] [--dim 64] [--fp32-matmul bf16] [--against ../base]

Flat keys ``<key>_floor_share_runs_{median,min,max}``, ``<key>_step_ms_runs_{median,min,max}``
and ``<key>_floor_share_runs`` (the count), where ``<key>`` is ``step_profile``'s figure key
(``<preset>[_dim<D>][_bf16][_bf16mm]``), and with ``--against``, the same keys of DIR's runs
ending in ``_at_<its commit>``, merged into ``benchmarks/results/throughput.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from autorec.presets import PRESETS
from benchmarks.results_file import RESULTS, merge_results
from benchmarks.step_profile import figure_key


def one_run(preset: str, autocast: str, out: Path, extra: tuple[str, ...] = (),
            dim: int | None = None, fp32_matmul: str = "ieee", tree: Path | None = None) -> dict[str, float]:
    """``preset``'s step time, floor share, page faults and kernel ms per step from one
    ``step_profile`` process (``extra``: more of its flags; ``dim``, ``fp32_matmul``: its
    ``--dim``, ``--fp32-matmul``; ``tree``: a checkout whose code it runs, else this one's)."""
    command = [sys.executable, "-m", "benchmarks.step_profile", "--presets", preset, "--autocast", autocast,
               "--fp32-matmul", fp32_matmul, "--json", str(out),
               *([] if dim is None else ["--dim", str(dim)]), *extra]
    env = None if tree is None else {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(command, capture_output=True, text=True, cwd=tree, env=env)
    if done.returncode != 0:
        raise SystemExit(f"floor_share_runs: {' '.join(command)} failed ({done.returncode}):\n"
                         f"{done.stderr[-2000:]}")
    key = figure_key(preset, autocast, dim, fp32_matmul)
    record = json.loads(out.read_text())
    return {figure: record[f"{key}_{figure}"]
            for figure in ("step_ms", "floor_share", "faults_per_step", "sys_ms_per_step")}


def summary(key: str, runs: list[dict[str, float]], suffix: str = "") -> dict[str, Any]:
    """Median, least and greatest of each figure over ``runs``, keyed ``<key>_<figure>_runs_*``
    (each key followed by ``suffix``)."""
    out: dict[str, Any] = {f"{key}_floor_share_runs{suffix}": len(runs)}
    for figure in ("step_ms", "floor_share"):
        values = [r[figure] for r in runs]
        out |= {f"{key}_{figure}_runs_median{suffix}": statistics.median(values),
                f"{key}_{figure}_runs_min{suffix}": min(values),
                f"{key}_{figure}_runs_max{suffix}": max(values)}
    return out


def tree_commit(tree: Path) -> str:
    """The short commit checked out at ``tree``; SystemExit where it is no git checkout."""
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=tree, capture_output=True, text=True)
    if done.returncode != 0 or not (tree / "benchmarks" / "step_profile.py").exists():
        raise SystemExit(f"--against {tree}: expected a checkout of autorec "
                         f"(git worktree add {tree} <commit>)")
    return done.stdout.strip()


def runs_args(doc: str | None, argv: list[str] | None = None) -> tuple[argparse.Namespace, list[str]]:
    """The flags of a benchmark of runs in fresh processes (``--presets``, ``--runs``,
    ``--autocast``, ``--json``) and the presets named, each checked (a parser error names the flag)."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presets", default="dlrm,wukong")
    parser.add_argument("--runs", type=int, default=5, help="processes per preset (and arm)")
    parser.add_argument("--autocast", choices=("off", "bf16"), default="off")
    parser.add_argument("--fp32-matmul", choices=("ieee", "bf16", "tf32"), default="ieee")
    parser.add_argument("--dim", type=int, default=None, help="step_profile's --dim (default: the presets')")
    parser.add_argument("--json", default=str(RESULTS / "throughput.json"))
    parser.add_argument("--against", type=Path, default=None,
                        help="a checkout of an earlier commit, run in alternation with this one")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error(f"--runs: expected at least 1, got {args.runs}")
    presets = args.presets.split(",")
    unknown = [p for p in presets if p not in PRESETS]
    if unknown:
        parser.error(f"--presets: no preset {unknown[0]!r}; expected names from {', '.join(PRESETS)}")
    return args, presets


def main() -> None:
    args, presets = runs_args(__doc__)
    trees: dict[str, Path | None] = {"": None}  # key suffix -> the checkout whose code runs
    if args.against is not None:
        trees[f"_at_{tree_commit(args.against)}"] = args.against.resolve()
    arms = [(preset, suffix) for preset in presets for suffix in trees]
    runs: dict[tuple[str, str], list[dict[str, float]]] = {arm: [] for arm in arms}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.runs):
            for preset, suffix in arms[r % len(arms):] + arms[:r % len(arms)]:
                got = one_run(preset, args.autocast, Path(tmp) / f"{preset}{suffix}_{r}.json", dim=args.dim,
                              fp32_matmul=args.fp32_matmul, tree=trees[suffix])
                runs[(preset, suffix)].append(got)
                print(f"run {r}: {preset}{suffix} {got['step_ms']:.1f} ms/step, floor share "
                      f"{got['floor_share']:.2f}", flush=True)
    figures: dict[str, Any] = {}
    for preset, suffix in arms:
        key = figure_key(preset, args.autocast, args.dim, args.fp32_matmul)
        figures |= summary(key, runs[(preset, suffix)], suffix)
    for name, value in figures.items():
        print(f"{name:44s} {value:.3f}" if isinstance(value, float) else f"{name:44s} {value}")
    merge_results(Path(args.json), figures,
                  prefix=figure_key("floor_runs", args.autocast, args.dim, args.fp32_matmul))


if __name__ == "__main__":
    main()
