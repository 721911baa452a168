"""``autorec schema``: the JSON schema of a study file, for an editor to complete and check them.

    autorec schema -o study.schema.json

With ``-o`` the schema goes to that file, else to stdout. An editor with a YAML language server
picks it up from a ``# yaml-language-server: $schema=study.schema.json`` line atop a study file.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def add_parser(commands: Any) -> None:
    """Register ``schema`` on the CLI's subcommands."""
    schema = commands.add_parser("schema", help="write the JSON schema of a study file")
    schema.add_argument("-o", "--output", help="write the schema here (default: stdout)")
    schema.set_defaults(func=cmd_schema)


def cmd_schema(args: argparse.Namespace) -> int:
    from autorec.study.config import study_json_schema

    text = json.dumps(study_json_schema(), indent=2) + "\n"
    if args.output:
        Path(args.output).write_text(text)
        print(f"schema written to {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
