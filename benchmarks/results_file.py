"""Writing a results file: flat figures merged into ``benchmarks/results/<name>.json``.

Several benchmarks share one file (``claims.json`` holds serving, sharding, growth and towers
figures): each merges its own keys, stamps the machine and commit beside them under its prefix
(``<prefix>_machine``, ``<prefix>_commit``), and sets the top-level ``machine`` and ``commit`` to
its own (the newest writer's), so the file always says where its latest figures came from.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from benchmarks.criteo_read import machine
from benchmarks.oneshot_vs_tpe import _commit

RESULTS = Path(__file__).parent / "results"


def merge_results(path: Path, figures: Mapping[str, Any], prefix: str | None = None) -> dict[str, Any]:
    """Merge ``figures`` into the JSON at ``path`` (created if missing) with the machine and
    commit stamped as the module docstring says; returns the whole record written."""
    record: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    record.update(figures)
    here, commit = machine(), _commit()
    if prefix:
        record.update({f"{prefix}_machine": here, f"{prefix}_commit": commit})
    record.update(machine=here, commit=commit)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    return record
