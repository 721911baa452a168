"""The folder of a resumable run's checkpoints: metadata, the LATEST pointer, atomic writes.

Every checkpoint is a torch.distributed.checkpoint folder with ``autorec.json`` (its metadata
and sharding layout) beside the shards. A checkpoint is never written where it is read: it is
written into ``.NAME.partial`` (:func:`staging`), ``autorec.json`` last, and only then renamed to
``NAME`` (:func:`publish`); ``LATEST`` names the newest resumable one and is replaced atomically.
So a run killed mid-save leaves at most a ``.partial`` folder that nothing loads, and resumes
from the previous checkpoint.

Example:
    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> staged = staging(root / "step-1"); staged.mkdir()
    >>> _ = (staged / ".metadata").write_bytes(b""); write_json(staged / META, {"epoch": 0})
    >>> publish(staged, root / "step-1"); point_latest(root, "step-1"); latest(root).name
    'step-1'
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.api import CheckpointException

META, LATEST = "autorec.json", "LATEST"


class IncompleteCheckpoint(FileNotFoundError):
    """A checkpoint that should be complete lacks its metadata (it was damaged after it was written)."""


class CheckpointWriteError(RuntimeError):
    """Another rank failed to write its part of a checkpoint."""


def save_failure(exc: BaseException, path: Path, rank: int) -> Exception:
    """The error to raise for torch.distributed.checkpoint's ``CheckpointException`` ``exc``
    from a save.

    That exception derives from BaseException and so slips past ``except Exception`` (a
    search's trial, Optuna's ``catch``) and would end a whole search: this rank's own error is
    raised instead (an OSError keeps its errno), else a :class:`CheckpointWriteError` naming
    the ranks that failed.
    """
    failures = {r: f[0] if isinstance(f, tuple) else f  # (exception, traceback) per rank
                for r, f in getattr(exc, "failures", {}).items()}
    own = failures.get(rank)
    if isinstance(own, Exception):
        return own
    named = "; ".join(f"rank {r}: {type(e).__name__}: {e}" for r, e in sorted(failures.items()))
    return CheckpointWriteError(f"{path}: writing the checkpoint failed on another rank ({named or exc})")


def save_states(states: dict[str, Any], staged: Path, path: Path, rank: int, world_size: int) -> None:
    """Write ``states`` (state dicts by name) into the staging folder ``staged`` of the checkpoint
    at ``path`` with torch.distributed.checkpoint, each rank its own shards; a failed write raises
    :func:`save_failure`'s error.

    In one process the save runs without the process group (``no_dist``): a save through the
    one-process gloo group left every later training step about a fifth slower, for the rest of
    the process (measured by ``benchmarks/checkpoint_slowdown.py``, BENCHMARKS.md issue 20).
    """
    try:
        dcp.save(states, storage_writer=dcp.FileSystemWriter(str(staged), overwrite=True),
                 no_dist=world_size == 1)
    except CheckpointException as exc:
        raise save_failure(exc, path, rank) from None


def staging(path: Path) -> Path:
    """Where the checkpoint that becomes ``path`` is written: ``.NAME.partial`` beside it."""
    return path.with_name(f".{path.name}.partial")


def _aside(path: Path) -> Path:
    return path.with_name(f".{path.name}.old")


def is_complete(path: Path) -> bool:
    """True when ``path`` holds a whole checkpoint: the shards' index and ``autorec.json``, the
    two files written last."""
    return (path / ".metadata").is_file() and (path / META).is_file()


def publish(staged: Path, path: Path) -> None:
    """Make the complete checkpoint ``staged`` the one at ``path`` by renaming it there.

    A checkpoint already at ``path`` is first renamed aside (``.NAME.old``) and deleted after;
    a kill between the two renames leaves both whole, and :func:`restore` puts the old one back.
    """
    if not is_complete(staged):
        raise IncompleteCheckpoint(f"{staged}: not a complete checkpoint (no .metadata or {META})")
    old = _aside(path)
    if path.exists():
        shutil.rmtree(old, ignore_errors=True)
        os.rename(path, old)
    os.rename(staged, path)
    shutil.rmtree(old, ignore_errors=True)


def restore(path: Path) -> Path:
    """``path``, after putting back the checkpoint a kill between :func:`publish`'s two renames
    left aside (or the whole staged one, if the old one is gone too)."""
    if not path.exists():
        for candidate in (_aside(path), staging(path)):
            if is_complete(candidate):
                try:
                    os.rename(candidate, path)
                except OSError:  # another rank restored it first
                    if not path.exists():
                        raise
                break
    return path


def latest(root: Path) -> Path | None:
    """The checkpoint ``root/LATEST`` points to, or None when there is no pointer.

    Raises :class:`IncompleteCheckpoint` when the one it names is not whole (it was complete
    when the pointer was written, so something removed part of it since).
    """
    pointer = root / LATEST
    if not pointer.exists():
        return None
    path = restore(root / pointer.read_text().strip())
    if not is_complete(path):
        raise IncompleteCheckpoint(f"{path}: {pointer} names this checkpoint, but it is incomplete "
                                   f"(no .metadata or {META}); delete {pointer} to start afresh")
    return path


def write_json(path: Path, obj: Any) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(obj))
    os.replace(tmp, path)


def point_latest(root: Path, name: str) -> None:
    """Point ``root/LATEST`` at the checkpoint ``root/name`` (replaced atomically), then delete
    the checkpoint it pointed to before."""
    pointer = root / LATEST
    previous = root / pointer.read_text().strip() if pointer.exists() else None
    tmp = root / f"{LATEST}.tmp"
    tmp.write_text(name + "\n")
    os.replace(tmp, pointer)
    if previous is not None and previous.name != name:
        shutil.rmtree(previous, ignore_errors=True)


def drop_progress(root: Path) -> None:
    """Delete ``root/LATEST`` and the resumable checkpoint it names, keeping the rest of ``root``
    (a finished search trial's ``best``): a finished trial is never resumed, and its progress
    checkpoint is as large as its model and optimizer state. The pointer goes first, so a kill
    in between leaves no pointer to a half-deleted checkpoint."""
    pointer = root / LATEST
    if not pointer.exists():
        return
    target = root / pointer.read_text().strip()
    pointer.unlink()
    shutil.rmtree(target, ignore_errors=True)
