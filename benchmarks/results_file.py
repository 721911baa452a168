"""Writing a results file: flat figures merged into ``benchmarks/results/<name>.json``, and
the stamps every results file carries: :func:`machine` (CPU, cores, memory, Python, torch) and
:func:`commit` (the work tree's short commit).

Several benchmarks share one file (``claims.json`` holds serving, sharding, growth and towers
figures): each merges its own keys, stamps the machine and commit beside them under its prefix
(``<prefix>_machine``, ``<prefix>_commit``), and sets the top-level ``machine`` and ``commit`` to
its own (the newest writer's), so the file always says where its latest figures came from.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results"


def machine() -> str:
    """The machine a figure was measured on, e.g. ``AMD EPYC ..., 2 cores, 24 GiB, Python 3.11.7,
    torch 2.13.0+cpu``."""
    cpu = platform.processor() or platform.machine()
    try:
        match = re.search(r"model name\s*:\s*(.+)", Path("/proc/cpuinfo").read_text())
        cpu = match.group(1).strip() if match else cpu
    except OSError:
        pass
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    import torch

    return (f"{cpu}, {os.cpu_count()} cores, {mem_gib:.0f} GiB, Python {platform.python_version()}, "
            f"torch {torch.__version__}")


def commit() -> str:
    """The short commit of the work tree the benchmark runs from ('' outside a git checkout)."""
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True).stdout.strip() or os.environ.get("AUTOREC_COMMIT", "")
    except OSError:  # no git on the machine (a lent device machine, say)
        return os.environ.get("AUTOREC_COMMIT", "")


def merge_results(path: Path, figures: Mapping[str, Any], prefix: str | None = None) -> dict[str, Any]:
    """Merge ``figures`` into the JSON at ``path`` (created if missing) with the machine and
    commit stamped as the module docstring says; returns the whole record written."""
    record: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    record.update(figures)
    here, stamp = machine(), commit()
    if prefix:
        record.update({f"{prefix}_machine": here, f"{prefix}_commit": stamp})
    record.update(machine=here, commit=stamp)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    return record


def read_json(path: Path, expected: type, what: str, flag: str = "", hint: str = "") -> Any:
    """The JSON value in the file at ``path``, which must be an ``expected`` (``dict`` or ``list``;
    ``what`` names it, as "a JSON object"); otherwise a SystemExit that names the option the path
    came from (``flag``, if any), the file and what is wrong (``hint`` follows a missing file's
    message: how to write one). The one-shot report's readers of results files (``tpe_record``,
``read_tau_parts``, ``read_units``, the predictor refit's ``--scores``) read through it.

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "r.json"
        >>> _ = path.write_text('[1, 2]')
        >>> read_json(path, list, "a JSON list")
        [1, 2]
        >>> read_json(path, dict, "a JSON object", flag="--record")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        SystemExit: --record: .../r.json holds a list, expected a JSON object
    """
    where = f"{flag}: " if flag else ""
    if not path.is_file():
        raise SystemExit(f"{where}no file at {path}{hint}")
    try:
        value = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise SystemExit(f"{where}{path} is not JSON ({err})") from None
    if not isinstance(value, expected):
        raise SystemExit(f"{where}{path} holds a {type(value).__name__}, expected {what}")
    return value
