"""``autorec data describe``: a dataset's schema and sizes."""

from __future__ import annotations

import argparse
import json
from typing import Any

from autorec.cli.common import load_data


def add_parser(commands: Any) -> None:
    data = commands.add_parser("data", help="inspect datasets").add_subparsers(
        dest="data_command", required=True)
    describe = data.add_parser("describe", help="print a dataset's schema and sizes")
    describe.add_argument("data", metavar="DATASET")
    describe.add_argument("--data-path")
    describe.add_argument("--data-opt", action="append", default=[], metavar="KEY=VALUE")
    describe.add_argument("--seed", type=int, default=0)
    describe.add_argument("--json", action="store_true")
    describe.set_defaults(func=cmd_data_describe)


def cmd_data_describe(args: argparse.Namespace) -> int:
    info = load_data(args).describe()
    if args.json:
        print(json.dumps(info))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{info['name']}: {len(info['dense'])} dense, {len(info['sparse'])} sparse")
    table.add_column("feature")
    table.add_column("kind")
    table.add_column("ids", justify="right")
    for name in info["dense"]:
        table.add_row(name, "dense", "")
    for f in info["sparse"]:
        table.add_row(f["name"], "multi-hot" if f["multi_hot"] else "sparse", f"{f['num_embeddings']:,}")
    console = Console()
    console.print(table)
    rows = ", ".join(f"{k} {v:,}" if v is not None else f"{k} (streamed)" for k, v in info["rows"].items())
    console.print(f"rows: {rows}")
    for key, value in info.items():
        if key not in ("name", "dense", "sparse", "rows"):
            console.print(f"{key}: {value}")
    return 0
