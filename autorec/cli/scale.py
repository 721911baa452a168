"""``autorec scale``: train the rungs of a ladder study and fit each family's scaling law."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from autorec.cli.common import UsageError


def add_parser(commands: Any) -> None:
    scale = commands.add_parser("scale", help="train scaling ladders (strategy: ladder) and fit their laws")
    scale.add_argument("config", help="a ladder study file, e.g. studies/scaling.yaml")
    scale.add_argument("--from-export", metavar="DIR",
                       help="an export (autorec export) whose architecture is scaled too, as 'searched'")
    scale.add_argument("--workers", type=int, help="local worker processes (default: the study's)")
    scale.add_argument("--backend", default="local", choices=["local", "ray"])
    scale.add_argument("--ray-address", help="join this Ray cluster (default: start a local one)")
    scale.add_argument("--out", type=Path,
                       help="folder of scaling.json and scaling.html (default: the study's folder)")
    scale.add_argument("--bootstrap", type=int, default=500, help="bootstrap resamples of each fit")
    scale.add_argument("--fit-only", action="store_true", help="fit the rungs that finished; train none")
    scale.add_argument("--json", action="store_true", help="print the fits as one JSON object")
    scale.set_defaults(func=cmd_scale)


def ladder_config(path: str, export: str | None = None) -> Any:
    """The study of ``path`` (strategy ``ladder``), with ``export`` as family ``searched`` and a
    trial budget of one trial per rung."""
    from autorec.strategies import make_strategy
    from autorec.study import StudyConfig

    config = StudyConfig.load(path)
    if config.strategy.name != "ladder":
        raise UsageError(f"{path}: strategy: autorec scale runs a ladder study (strategy: ladder), "
                         f"got {config.strategy.name!r}; autorec search runs the others")
    options = dict(config.strategy.options)
    if export is not None:
        folder = Path(export).resolve()
        if not (folder / "arch.json").is_file():
            raise UsageError(f"--from-export {export}: no arch.json there (expected the folder autorec "
                             "export wrote)")
        options["export"] = str(folder)
    strategy = make_strategy("ladder", config.seed, **options)
    return config.model_copy(update={"strategy": config.strategy.model_copy(update={"options": options}),
                                     "budget": config.budget.model_copy(update={"trials": strategy.trials})})


def cmd_scale(args: argparse.Namespace) -> int:
    import optuna
    from rich.console import Console

    from autorec.report import write_report
    from autorec.scaling.results import study_ladder
    from autorec.study import open_storage, run_study

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    config = ladder_config(args.config, args.from_export)
    console = Console(stderr=True)
    log = console.print if not args.json else (lambda *_: None)
    if not args.fit_only and args.backend == "ray":
        from autorec.study.ray_runner import run_study_ray

        run_study_ray(config, address=args.ray_address, workers=args.workers, log=log)
    elif not args.fit_only:
        run_study(config, workers=args.workers, log=log,
                  on_trial=lambda _, t: log(f"rung trial {t.number} {t.state.name.lower()}: "
                                            f"{t.user_attrs.get('scale', {})}"))
    try:
        study = optuna.load_study(study_name=config.name, storage=open_storage(config.storage_url))
    except KeyError:
        raise UsageError(f"{args.config}: no study {config.name!r} in {config.storage_url} yet: run "
                         f"autorec scale {args.config} first") from None
    summary = study_ladder(study, bootstrap_samples=args.bootstrap)
    out = args.out or config.directory
    out.mkdir(parents=True, exist_ok=True)
    record = {"study": config.name, **summary.flat(), "steepest_at_top": summary.steepest(),
              "families": summary.families,
              "rungs": {name: [vars(r) for r in rungs] for name, rungs in summary.rungs.items()}}
    (out / "scaling.json").write_text(json.dumps(record, indent=1) + "\n")
    write_report(study, out / "scaling.html")
    if args.json:
        print(json.dumps(record))
    else:
        _print_fits(summary, out)
    return 0


def _print_fits(summary: Any, out: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="scaling laws: test logloss = E + A * C^-alpha (C: training FLOPs)")
    for column in ("family", "rungs", "FLOPs span (decades)", "alpha [90% CI]", "held-out rel. error",
                   "gain per 10x at top"):
        table.add_column(column, justify="right")
    for name, fit in summary.families.items():
        alpha = (f"{fit['alpha']:.3f} [{fit['alpha_lo']:.3f}, {fit['alpha_hi']:.3f}]" if "alpha" in fit
                 else fit.get("error", ""))
        held = f"{fit['holdout_rel_err']:.1%}" if "holdout_rel_err" in fit else fit.get("holdout_error", "")
        gain = f"{fit['gain_per_decade_at_top']:.4f}" if "gain_per_decade_at_top" in fit else ""
        table.add_row(name, str(fit["rungs"]), f"{fit['flops_span_decades']:.2f}", alpha, held, gain)
    console = Console()
    console.print(table)
    steepest = summary.steepest()
    if steepest:
        console.print(f"{steepest} gains most per tenfold compute at the top of its measured range.")
    console.print(f"wrote {out / 'scaling.json'} and {out / 'scaling.html'}")
