"""The commands that read a finished study: ``export``, ``report`` and ``dashboard``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from autorec.cli.common import UsageError


def add_parsers(commands: Any) -> None:
    export = commands.add_parser("export", help="export trained architectures of a study")
    export.add_argument("study", help="the study file")
    export.add_argument("--trial", type=int, help="this trial number")
    export.add_argument("--best", type=int, help="the K best trials by validation AUC (default 1)")
    export.add_argument("-o", "--output", required=True, help="output folder")
    export.add_argument("--compile", action="store_true",
                        help="also compile each model ahead of time with AOTInductor (model.aoti.pt2, "
                             "for serving; needs a C++ compiler)")
    export.set_defaults(func=cmd_export)

    report = commands.add_parser("report", help="write a self-contained HTML report of a study")
    report.add_argument("study", help="the study file")
    report.add_argument("-o", "--output", default="report.html")
    report.add_argument("--top-k", type=int, default=3, help="architectures drawn")
    report.set_defaults(func=cmd_report)

    dashboard = commands.add_parser("dashboard", help="serve the study in optuna-dashboard")
    dashboard.add_argument("study", help="the study file")
    dashboard.add_argument("--host", default="127.0.0.1")
    dashboard.add_argument("--port", type=int, default=8080)
    dashboard.set_defaults(func=cmd_dashboard)


def cmd_export(args: argparse.Namespace) -> int:
    from autorec.study import StudyConfig, export_trials

    config = StudyConfig.load(args.study)
    if args.trial is not None and args.best is not None:
        raise UsageError("--trial and --best exclude each other")
    export_trials(config, Path(args.output), trial=args.trial, best=args.best or 1,
                  log=lambda m: print(m, file=sys.stderr), compile=args.compile)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from autorec.report import write_report
    from autorec.study import StudyConfig, load_study

    path = write_report(load_study(StudyConfig.load(args.study)), args.output, top_k=args.top_k)
    print(f"report written to {path}", file=sys.stderr)
    return 0


def cmd_dashboard(args: argparse.Namespace) -> int:
    from autorec.dashboard import prepare_dashboard, serve_dashboard
    from autorec.study import StudyConfig, load_study

    config = StudyConfig.load(args.study)
    saved = prepare_dashboard(load_study(config))
    print(f"saved {len(saved)} figures into study {config.name!r}; serving optuna-dashboard on "
          f"http://{args.host}:{args.port}/ (Ctrl-C stops it)", file=sys.stderr)
    serve_dashboard(config.storage_url, host=args.host, port=args.port,
                    artifact_dir=config.directory / "artifacts")
    return 0
