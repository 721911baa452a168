"""DNAS against TPE and random search on the same space and data, trials interleaved in one process.

Each strategy's study comes from a study file (default: ``studies/movielens.yaml`` for TPE, the
same with ``strategy: random`` for random search, ``studies/movielens_dnas.yaml`` for DNAS),
minus its preset baselines and with its storage under ``--out``. The studies run round-robin,
one trial each in turn, in this one process with one torch thread, so that the load of a shared
machine falls on all alike. Each trial's wall seconds and process-CPU seconds are charged to its
strategy; a DNAS trial's include its supernet run.

Reported per strategy, after each trial: the best test AUC so far (of the trial with the best
validation AUC), wall and CPU seconds so far, and full trainings so far (a trial whose model
trained to its end or early stop: pruned trials are not full trainings), and then when (if) it
first reached a given test AUC (``--target``; default: TPE's final best test AUC in this run,
so a run without TPE must give it).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/dnas_vs_tpe.py
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
import warnings
from pathlib import Path
from typing import Any

import optuna
import yaml

from autorec.study import StudyConfig, TrialRunner, create_study, finished_count

ROOT = Path(__file__).resolve().parents[1]


def _config(source: Path, name: str, out: Path, strategy: Any = None,
            max_trials: int | None = None) -> StudyConfig:
    data = yaml.safe_load(source.read_text())
    data["space"] = str((source.parent / data["space"]).resolve())
    data.update(name=name, baselines=[])
    if max_trials is not None:
        data["budget"]["trials"] = min(data["budget"]["trials"], max_trials)
    if strategy is not None:
        data["strategy"] = strategy
    folder = out / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    (folder / "study.yaml").write_text(yaml.safe_dump(data))
    return StudyConfig.load(folder / "study.yaml")


def _one_trial(config: StudyConfig, study: optuna.Study, runner: TrialRunner) -> dict[str, Any]:
    wall, cpu = time.perf_counter(), time.process_time()
    study.optimize(runner, n_trials=1, catch=(Exception,))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    trial = study.get_trials(deepcopy=False)[-1]
    metrics = trial.user_attrs.get("metrics")
    row = {"trial": trial.number, "state": trial.state.name, "wall_s": wall, "cpu_s": cpu,
           "full_training": metrics is not None}
    if metrics:
        row.update(val_auc=metrics["val"]["auc"], test_auc=metrics["test"]["auc"],
                   mflops=trial.user_attrs["costs"]["flops"] / 1e6,
                   layers=[layer["kind"] for layer in trial.user_attrs["arch"]["layers"]])
    dnas = trial.user_attrs.get("dnas")
    if dnas:
        row["supernet_s"] = dnas["seconds"]
    return row


def _timeline(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Running totals and the best trial so far (by validation AUC) after each trial."""
    out, wall, cpu, full, best = [], 0.0, 0.0, 0, None
    for row in rows:
        wall, cpu, full = wall + row["wall_s"], cpu + row["cpu_s"], full + row["full_training"]
        if row["full_training"] and (best is None or row["val_auc"] > best["val_auc"]):
            best = row
        out.append({"trial": row["trial"], "wall_s": wall, "cpu_s": cpu, "full_trainings": full,
                    "best_val_auc": best and best["val_auc"], "best_test_auc": best and best["test_auc"],
                    "best_mflops": best and best["mflops"]})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tpe", default=str(ROOT / "studies" / "movielens.yaml"))
    parser.add_argument("--dnas", default=str(ROOT / "studies" / "movielens_dnas.yaml"))
    parser.add_argument("--strategies", default="dnas,tpe,random")
    parser.add_argument("--target", type=float, default=None,
                        help="test AUC to reach (default: TPE's final best in this run; required "
                             "when --strategies leaves TPE out)")
    parser.add_argument("--max-trials", type=int, default=None,
                        help="cap every study's trial budget (default: each study file's)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "out" / "dnas_vs_tpe"))
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    import torch

    torch.set_num_threads(1)
    out = Path(args.out)
    sources = {"tpe": (Path(args.tpe), None), "random": (Path(args.tpe), "random"),
               "dnas": (Path(args.dnas), None)}
    names = args.strategies.split(",")
    unknown = [n for n in names if n not in sources]
    if unknown:
        raise SystemExit(f"--strategies: unknown {unknown}; expected some of {', '.join(sources)}")
    if args.target is None and "tpe" not in names:
        raise SystemExit(f"--strategies {args.strategies}: without tpe there is no TPE best to "
                         f"reach; give --target AUC (e.g. the TPE best recorded in BENCHMARKS.md)")
    runs = {}
    for name in names:
        source, strategy = sources[name]
        config = _config(source, name, out, strategy, args.max_trials)
        runs[name] = (config, create_study(config), TrialRunner(config), [])
    while any(finished_count(study) < config.budget.trials for config, study, _, _ in runs.values()):
        for name, (config, study, runner, rows) in runs.items():
            if finished_count(study) < config.budget.trials:
                rows.append(_one_trial(config, study, runner))
                r = rows[-1]
                auc = r.get("test_auc", float("nan"))
                print(f"{name} trial {r['trial']} {r['state']}: test AUC {auc:.4f} {r.get('layers', '')}"
                      f" {r['wall_s']:.0f} s wall, {r['cpu_s']:.0f} s CPU", flush=True)
    timelines = {name: _timeline(rows) for name, (_, _, _, rows) in runs.items()}
    target = args.target if args.target is not None else timelines["tpe"][-1]["best_test_auc"]
    results: dict[str, Any] = {"target": target}
    for name, (_, _, _, rows) in runs.items():
        timeline = timelines[name]
        reached = next((t for t in timeline if t["best_test_auc"] is not None
                        and t["best_test_auc"] >= target), None)
        results[name] = {"trials": rows, "timeline": timeline, "reached": reached}
    (out / "results.json").write_text(json.dumps(results, indent=1))
    print(f"\n| strategy | trials | full trainings | wall s | CPU s | best val AUC | its test AUC | MFLOPs |"
          f" reached {target:.4f} after (wall s, CPU s, full trainings) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in runs:
        r = results[name]
        end, hit = r["timeline"][-1], r["reached"]
        when = f"{hit['wall_s']:.0f}, {hit['cpu_s']:.0f}, {hit['full_trainings']}" if hit else "not reached"
        auc = (f"{end['best_val_auc']:.4f} | {end['best_test_auc']:.4f} | {end['best_mflops']:.2f}"
               if end["best_val_auc"] is not None else "- | - | -")
        print(f"| {name} | {len(r['trials'])} | {end['full_trainings']} | {end['wall_s']:.0f} | "
              f"{end['cpu_s']:.0f} | {auc} | {when} |")
    print("\nbest test AUC (of the best-by-validation trial) after each trial: "
          "wall s / CPU s / full trainings")
    for name in runs:
        r = results[name]
        print(name + ": " + "; ".join(
            f"{t['best_test_auc']:.4f} @ {t['wall_s']:.0f}/{t['cpu_s']:.0f}/{t['full_trainings']}"
            for t in r["timeline"] if t["best_test_auc"] is not None))


if __name__ == "__main__":
    main()
