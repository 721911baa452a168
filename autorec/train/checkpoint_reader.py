"""Reading a checkpoint folder back without unpickling arbitrary objects, with errors that name it.

torch.distributed.checkpoint reads a checkpoint's index (``.metadata``) with ``pickle.load`` and
its non-tensor entries (optimizer settings, step counts) with ``torch.load(weights_only=False)``,
so a hand-made checkpoint could run code when it is loaded. Here the index is unpickled against
an allowlist (DCP's own metadata dataclasses, ``torch.Size``, dtypes and layouts) and every entry
through ``torch.load(weights_only=True)`` (the shards' tensors already are). A damaged or foreign
checkpoint raises :class:`CheckpointError` naming the folder or file, never a stack of DCP frames.

Example:
    >>> import tempfile, torch
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = dcp.save({"w": torch.ones(2), "lr": 0.1}, storage_writer=dcp.FileSystemWriter(str(folder)))
    >>> state = {"w": torch.zeros(2), "lr": 0.0}
    >>> load_state(state, folder); state["w"].tolist(), state["lr"]
    ([1.0, 1.0], 0.1)
"""

from __future__ import annotations

import hashlib
import io
import json
import pickle
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.metadata import Metadata, StorageMeta

from autorec.train.checkpoints import META

if TYPE_CHECKING:
    from autorec.arch import ArchSpec

# What a DCP index may name besides the classes of torch.distributed.checkpoint.metadata.
_INDEX_MODULES = ("torch.distributed.checkpoint.metadata",)
_INDEX_NAMES = {("torch", "Size"), ("torch.serialization", "_get_layout"), ("pathlib", "PosixPath"),
                ("pathlib", "WindowsPath"), ("torch.distributed.checkpoint.filesystem", "_StorageInfo"),
                ("collections", "OrderedDict")}


class CheckpointError(ValueError):
    """A checkpoint cannot be read: damaged, foreign, or holding objects other than tensors and
    plain values; the message names the folder or file."""


class _IndexUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        dtype = module == "torch" and isinstance(getattr(torch, name, None), torch.dtype)
        if module in _INDEX_MODULES or (module, name) in _INDEX_NAMES or dtype:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name} has no place in a checkpoint index")


class SafeReader(dcp.FileSystemReader):
    """FileSystemReader whose index is unpickled against the allowlist of this module."""

    def read_metadata(self, *args: Any, **kwargs: Any) -> Metadata:
        path = self._get_metadata_path(kwargs.get("rank"))
        with self.fs.create_stream(path, "rb") as metadata_file:
            metadata = _IndexUnpickler(metadata_file).load()
        if not isinstance(metadata, Metadata):
            raise pickle.UnpicklingError(f"expected a checkpoint index, got {type(metadata).__name__}")
        if getattr(metadata, "storage_meta", None) is None:
            metadata.storage_meta = StorageMeta()
        metadata.storage_meta.load_id = self.load_id
        return metadata


class SafePlanner(dcp.DefaultLoadPlanner):
    """DefaultLoadPlanner that reads non-tensor entries with ``torch.load(weights_only=True)``."""

    def load_bytes(self, read_item: Any, value: io.BytesIO) -> None:
        safe = io.BytesIO()
        torch.save(torch.load(value, weights_only=True), safe)  # only plain values get this far
        safe.seek(0)
        super().load_bytes(read_item, safe)


def one_process() -> bool:
    """No process group, or one of a single rank: a load then needs no collective."""
    return not dist.is_initialized() or dist.get_world_size() == 1


def load_state(state: dict[str, Any], path: str | Path, *, allow_partial_load: bool = False) -> None:
    """``dcp.load(state)`` from the checkpoint folder ``path`` through :class:`SafeReader` and
    :class:`SafePlanner`; raises :class:`CheckpointError` when it cannot be read.

    In one process the load runs without the process group (``no_dist``), as
    :func:`autorec.train.checkpoints.save_states` saves: a load through the one-process gloo
    group left every later step of the process slower, a supernet's 1.58 times and a Trainer's
    1.22 (``benchmarks/checkpoint_slowdown.py --modes load_group,load_no_dist``, BENCHMARKS.md
    issue 20): the one-shot fine phase, which resumes from the supernet's checkpoint, and the
    rung's trainings, which resume from their pauses, ran at that pace."""
    try:
        dcp.load(state, storage_reader=SafeReader(str(path)),
                 planner=SafePlanner(allow_partial_load=allow_partial_load), no_dist=one_process())
    except CheckpointException as exc:  # a BaseException: one wrapped failure per rank
        failure = next(iter(exc.failures.values()), None)  # (exception, traceback summary)
        reason = failure[0] if failure else exc
        raise CheckpointError(f"{path}: not a readable checkpoint ({_first_line(reason)})") from None


def saved_keys(path: str | Path) -> set[str]:
    """The flattened state keys the checkpoint folder ``path`` holds."""
    try:
        return set(SafeReader(str(path)).read_metadata().state_dict_metadata)
    except (OSError, pickle.UnpicklingError, EOFError, ValueError, AttributeError) as exc:
        raise CheckpointError(f"{path}: not a readable checkpoint ({_first_line(exc)})") from None


def read_meta(path: str | Path) -> dict[str, Any]:
    """The ``autorec.json`` of the checkpoint folder ``path`` (its metadata and layout)."""
    file = Path(path) / META
    try:
        meta = json.loads(file.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{file}: not readable checkpoint metadata ({_first_line(exc)})") from None
    if not isinstance(meta, dict):
        raise CheckpointError(f"{file}: expected a JSON object of checkpoint metadata, got "
                              f"{type(meta).__name__}")
    return meta


def arch_key(spec: ArchSpec) -> str:
    """What a checkpoint's architecture is, whatever it is called (its spec's hash, name aside)."""
    return hashlib.sha256(spec.replace(name="-").to_json(indent=None).encode()).hexdigest()[:16]


def resumable_meta(path: Path, arch: tuple[str, str], monitor: str) -> dict[str, Any]:
    """The progress meta of checkpoint ``path``, refused (ValueError naming it) unless it is of the
    architecture ``arch`` (its key, or its name: the same architecture under another name resumes,
    a search's retry of a cut trial) and watched ``monitor`` (a checkpoint before monitors: val AUC)."""
    meta = read_meta(path)
    if meta.get("arch_key", meta.get("arch")) not in arch:
        raise ValueError(f"{path}: checkpoint of architecture {meta.get('arch')!r}, not "
                         f"{arch[1]!r}; use another checkpoint_dir or do not resume")
    if meta.get("monitor", "val_auc") != monitor:
        raise ValueError(f"{path}: a run that watched {meta.get('monitor', 'val_auc')}; this one "
                         f"watches {monitor} (resume with the same monitor)")
    return meta


def resumed_sharding_types(checkpoint_dir: str | None, resume: bool) -> dict[str, str] | None:
    """Each table's sharding type in the checkpoint a training resumes from (``resume`` from the
    latest under ``checkpoint_dir``), so the planner keeps them at another world size; None when
    it resumes nothing (or from a checkpoint written before the types were recorded)."""
    from autorec.train.checkpoints import latest

    newest = latest(Path(checkpoint_dir)) if resume and checkpoint_dir else None
    return None if newest is None else read_meta(newest).get("layout", {}).get("sharding_types")


def _first_line(exc: object) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]
