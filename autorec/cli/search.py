"""``autorec search``: run or resume a study, locally or on Ray, with a live progress line."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_parser(commands: Any) -> None:
    search = commands.add_parser("search", help="run (or resume) an architecture study")
    search.add_argument("study", help="a study file, e.g. studies/quickstart.yaml")
    search.add_argument("--workers", type=int, help="local worker processes (default: the study's)")
    search.add_argument("--backend", default="local", choices=["local", "ray"])
    search.add_argument("--ray-address", help="join this Ray cluster (default: start a local one)")
    search.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    search.set_defaults(func=cmd_search)


def cmd_search(args: argparse.Namespace) -> int:
    import optuna
    from rich.console import Console

    from autorec.study import StudyConfig, dumps, finished_count, run_study

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    config = StudyConfig.load(args.study)
    console = Console(stderr=True)
    log = console.print if not args.json else (lambda *_: None)
    show = not args.json and sys.stderr.isatty()

    if args.backend == "ray":
        from autorec.study.ray_runner import run_study_ray

        summary = run_study_ray(config, address=args.ray_address, workers=args.workers, log=log)
    else:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), TextColumn("{task.fields[best]}"), console=console,
                            disable=not show)
        total = config.budget.trials
        if config.strategy.name == "oneshot":  # its trials are the candidates scored on the supernet
            from autorec.strategies import make_strategy

            # (None, a bar without an end, when the grid and its crossings are all it scores)
            total = make_strategy("oneshot", config.seed, **config.strategy.options).candidates or None
        task = progress.add_task(f"search {config.name}", total=total, best="")

        def on_trial(study: Any, trial: Any) -> None:
            done = [t for t in study.get_trials(deepcopy=False) if t.user_attrs.get("metrics")]
            best = max(done, key=lambda t: t.user_attrs["metrics"]["val"]["auc"], default=None)
            text = (f"best val AUC {best.user_attrs['metrics']['val']['auc']:.4f} (trial {best.number})"
                    if best else "")
            progress.update(task, completed=finished_count(study), best=text)
            state = trial.state.name.lower()
            auc = trial.user_attrs.get("metrics", {}).get("val", {}).get("auc")
            log(f"trial {trial.number} {state}" + (f": val AUC {auc:.4f}" if auc is not None else "")
                + (f" ({trial.user_attrs['fail_reason']})" if trial.user_attrs.get("fail_reason") else ""))

        with progress:
            summary = run_study(config, workers=args.workers, on_trial=on_trial, log=log)
    if args.json:
        print(dumps(summary))
    else:
        _print_summary(summary)
    return 0


def _print_summary(summary: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"study {summary.name}: best trials by validation AUC")
    for column in ("trial", "val AUC", "test AUC", "MFLOPs/sample", "seconds"):
        table.add_column(column, justify="right")
    # Each architecture once: a trial that reused an earlier training repeats its row.
    done = sorted((t for t in summary.trials if t["val_auc"] is not None and t.get("reused_from") is None),
                  key=lambda t: -t["val_auc"])
    for t in done[:5]:
        flops = t["costs"].get("flops")
        test = f"{t['test_auc']:.4f}" if t["test_auc"] is not None else ""
        table.add_row(str(t["number"]), f"{t['val_auc']:.4f}", test,
                      f"{flops / 1e6:.2f}" if flops is not None else "", f"{t['seconds'] or 0:.0f}")
    for number, full in summary.final.items():  # the best trials retrained in full
        table.add_row(f"{number}, in full", f"{full['val']['auc']:.4f}", f"{full['test']['auc']:.4f}", "",
                      f"{full.get('seconds', 0):.0f}")
    for name, b in summary.baselines.items():
        flops = b.get("costs", {}).get("flops")
        table.add_row(f"preset {name}", f"{b['val']['auc']:.4f}", f"{b['test']['auc']:.4f}",
                      f"{flops / 1e6:.2f}" if flops is not None else "", "")
    console = Console()
    console.print(table)
    for t in summary.trials:  # a failed trial says why (diverged, out of memory, over its time limit)
        if t["state"] == "FAIL" and t.get("fail_reason"):
            console.print(f"trial {t['number']} failed ({t.get('fail_kind') or 'error'}): {t['fail_reason']}",
                          markup=False)
    reused = sum(t.get("reused_from") is not None for t in summary.trials)
    if reused:
        console.print(f"{reused} proposals repeated an architecture already trained: its result was "
                      "reused, not trained again")
    console.print(summary.verdict())
