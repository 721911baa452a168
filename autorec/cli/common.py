"""What every command shares: the usage error, ``key=value`` options, the data and arch arguments.

Each command module under ``autorec.cli`` adds its own subparser and imports these by their public
names; nothing below the CLI imports it back.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any


class UsageError(ValueError):
    """A command-line value is wrong; the message names the flag."""


def parse_options(pairs: Sequence[str], flag: str = "--data-opt") -> dict[str, Any]:
    """``key=value`` pairs; values parsed as JSON when they parse, else kept as strings
    (``flag``: the option they came from, named in the error)."""
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"{flag}: expected key=value, got {pair!r}")
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    return options


def load_data(args: argparse.Namespace) -> Any:
    from autorec.data import load_dataset

    return load_dataset(args.data, path=args.data_path, seed=args.seed, **parse_options(args.data_opt))


def resolve_arch(value: str, schema: Any) -> Any:
    from autorec.arch import ArchSpec
    from autorec.presets import PRESETS, preset

    if value in PRESETS:
        return preset(value, schema)
    path = Path(value)
    if path.suffix == ".json" or path.exists():
        return ArchSpec.load(path)
    raise UsageError(f"--arch: {value!r} is neither a preset ({', '.join(PRESETS)}) "
                     "nor an arch.json file")


def add_data_args(parser: argparse.ArgumentParser) -> None:
    from autorec.data import DATASETS

    parser.add_argument("--data", default="movielens100k", choices=sorted(DATASETS),
                        help="dataset (default: movielens100k)")
    parser.add_argument("--data-path",
                        help="the file a file-based dataset (criteo, libfm, csv, parquet) reads")
    parser.add_argument("--data-opt", action="append", default=[], metavar="KEY=VALUE",
                        help="a dataset option, e.g. hash_size=1000000 (repeatable)")
    parser.add_argument("--seed", type=int, default=0, help="seed for the split, init and shuffling")
