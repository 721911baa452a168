"""The ``autorec`` command line (``python -m autorec.cli`` or the ``autorec`` script)."""

from autorec.cli.common import UsageError, parse_options
from autorec.cli.main import build_parser, main

__all__ = ["UsageError", "build_parser", "main", "parse_options"]
