"""The ``autorec`` command line: one subcommand per module of ``autorec.cli``.

``main`` builds the parser from each command module's ``add_parser`` and turns the errors a user
can cause (a bad flag, arch.json, data file or study file, a file that cannot be written) into one
line and exit status 2.
"""

from __future__ import annotations

import argparse
import logging
import sys
import warnings
from collections.abc import Sequence

import autorec.cli.data as data
import autorec.cli.precision as precision
import autorec.cli.profile_latency as profile_latency
import autorec.cli.profile_sharding as profile_sharding
import autorec.cli.scale as scale
import autorec.cli.schema as schema
import autorec.cli.search as search
import autorec.cli.serve_bench as serve_bench
import autorec.cli.shard as shard
import autorec.cli.study_views as study_views
import autorec.cli.towers as towers
import autorec.cli.train as train
from autorec.arch import ArchSpecError
from autorec.cli.common import UsageError
from autorec.data.schema import DataError
from autorec.export.layout import ExportError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="autorec", description="AutoML for large recommendation models.")
    commands = parser.add_subparsers(dest="command", required=True)
    train.add_parser(commands)
    search.add_parser(commands)
    scale.add_parser(commands)
    study_views.add_parsers(commands)
    data.add_parser(commands)
    precision.add_parser(commands)
    profile = commands.add_parser("profile", help="measure costs with the real kernels").add_subparsers(
        dest="profile_command", required=True)
    profile_sharding.add_parser(profile)
    profile_latency.add_parser(profile)
    shard.add_parser(commands)
    serve_bench.add_parser(commands)
    towers.add_parser(commands)
    schema.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    if not sys.warnoptions:  # torch/torchrec deprecation chatter drowns the output; -W brings it back
        warnings.simplefilter("ignore")
    # torchrec logs a warning per data-parallel table at every state_dict; keep errors only.
    logging.getLogger().setLevel(logging.ERROR)
    logging.getLogger("torchrec").setLevel(logging.ERROR)
    logging.getLogger("torch").setLevel(logging.ERROR)
    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # what torchrun's workers re-run
    try:
        return int(args.func(args))
    except (ArchSpecError, DataError, ExportError, UsageError, KeyError, ValueError, ImportError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"autorec: error: {message}", file=sys.stderr)
        return 2
    except OSError as exc:  # a file that cannot be read or written: disk full, read-only, missing
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"autorec: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
