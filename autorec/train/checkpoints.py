"""The folder of a resumable run's checkpoints: metadata, the LATEST pointer, atomic writes.

Every checkpoint is a torch.distributed.checkpoint folder with ``autorec.json`` (its metadata
and sharding layout) beside the shards; ``LATEST`` names the newest resumable one and is
replaced atomically, so a run killed mid-save resumes from the previous one.

Example:
    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> (root / "step-1").mkdir(); write_json(root / "step-1" / META, {"epoch": 0})
    >>> point_latest(root, "step-1"); latest(root).name
    'step-1'
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

META, LATEST = "autorec.json", "LATEST"


def latest(root: Path) -> Path | None:
    """The checkpoint ``root/LATEST`` points to, or None."""
    pointer = root / LATEST
    if not pointer.exists():
        return None
    path = root / pointer.read_text().strip()
    return path if (path / META).exists() else None


def write_json(path: Path, obj: Any) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(obj))
    os.replace(tmp, path)


def point_latest(root: Path, name: str) -> None:
    """Point ``root/LATEST`` at the checkpoint ``root/name`` (replaced atomically), then delete
    the checkpoint it pointed to before."""
    previous = latest(root)
    tmp = root / f"{LATEST}.tmp"
    tmp.write_text(name + "\n")
    os.replace(tmp, root / LATEST)
    if previous is not None and previous.name != name:
        shutil.rmtree(previous, ignore_errors=True)
