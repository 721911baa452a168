"""Writing an export directory (see the package doc), checked on the way.

The exported weights must give the trained model's logits on a sample batch
(``TRAINED_TOLERANCE``) and the program the weights' logits (``PROGRAM_TOLERANCE``), or the
export fails; export.json records metrics, costs, versions and a sha256 of every file.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import hashlib
import importlib.metadata
import json
import os
import shutil
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
from safetensors import SafetensorError
from safetensors.torch import save_file
from torchrec.datasets.utils import Batch

from autorec.costs import arch_cost
from autorec.export.card import model_card
from autorec.export.compiled import compile_package, load_compiled
from autorec.export.layout import (
    ARCH,
    CARD,
    COMPILED,
    COMPILED_TOLERANCE,
    FORMAT_VERSION,
    MANIFEST,
    PREDICTIONS,
    PROGRAM,
    PROGRAM_TOLERANCE,
    TRAINED_TOLERANCE,
    WEIGHTS,
    ExportError,
)
from autorec.export.plain import plain_model
from autorec.export.program import TensorInputs, export_program, program_inputs
from autorec.models import RecModel
from autorec.textfiles import partial_path

if TYPE_CHECKING:
    from autorec.train.trainer import Trainer


def export_trained(trainer: Trainer, out_dir: str | Path, *, metrics: Mapping[str, Any],
                   retrain_command: str, costs: Mapping[str, Any] | None = None,
                   sample_batch: Batch | None = None, compile: bool = False) -> Path:
    """Export a :class:`~autorec.train.trainer.Trainer`'s model into ``out_dir``.

    Checks on the way that the exported weights give the trained model's logits on
    ``sample_batch`` (within float summation order, ``TRAINED_TOLERANCE``). In a
    multi-process run call it on every rank; rank 0 writes.

    Args:
        trainer: the trainer (its ``model``, ``spec``, ``dataset`` and ``device`` are used).
        out_dir: created if missing; the export's files in it are replaced, all of them or (when
            the export fails, e.g. on a full disk) none.
        metrics: shown in the model card and export.json (e.g. ``TrainResult.to_dict()``).
        retrain_command: the command line that retrains this model.
        costs: cost figures to record; default ``arch_cost(trainer.spec).to_dict()``.
        sample_batch: the batch recorded in predictions.json; default the first 16 test rows.
        compile: also write the AOTInductor package (:mod:`~autorec.export.compiled`).
    """
    if sample_batch is None:
        sample_batch = next(iter(trainer.dataset.batches("test", 16, shuffle=False)))
    model = plain_model(trainer.model, trainer.spec)
    was_training = trainer.model.training
    trainer.model.eval()
    try:
        with torch.no_grad():
            on_device = sample_batch.to(trainer.device)
            trained = trainer.model(on_device.dense_features, on_device.sparse_features).cpu()
    finally:
        trainer.model.train(was_training)
    if dist.is_initialized() and dist.get_rank() != 0:
        return Path(out_dir)
    return export_model(model, out_dir, metrics=metrics, costs=costs, retrain_command=retrain_command,
                        sample_batch=sample_batch, trained_logits=trained, compile=compile)


def export_model(model: RecModel, out_dir: str | Path, *, sample_batch: Batch,
                 metrics: Mapping[str, Any] | None = None, retrain_command: str = "",
                 costs: Mapping[str, Any] | None = None,
                 trained_logits: torch.Tensor | None = None, compile: bool = False) -> Path:
    """Export a plain :class:`RecModel` into ``out_dir`` (see :func:`export_trained`).

    ``trained_logits``, when given, are the logits the trained model gave on
    ``sample_batch``; the export fails unless its own agree within ``TRAINED_TOLERANCE``.
    ``model`` is moved to the CPU and left in eval mode. With ``compile``, the program is also
    compiled by AOTInductor into ``model.aoti.pt2``, whose logits must agree within
    ``COMPILED_TOLERANCE``.
    """
    spec = model.spec
    model = model.cpu().eval()
    dense, values, lengths = program_inputs(spec, sample_batch.dense_features.cpu(),
                                            sample_batch.sparse_features.to(torch.device("cpu")))
    with torch.no_grad():
        logits = TensorInputs(model)(dense, values, lengths)
    checks: dict[str, float | None] = {"trained_max_abs_diff": None}
    if trained_logits is not None:
        checks["trained_max_abs_diff"] = _max_diff(
            logits, trained_logits, TRAINED_TOLERANCE,
            "the exported weights' logits differ from the trained model's")

    with _staged(Path(out_dir)) as out:
        spec.save(out / ARCH)
        state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
        metadata = {"format": f"autorec-weights/{FORMAT_VERSION}", "arch": spec.to_json(indent=None)}
        _save(lambda: save_file(state, str(out / WEIGHTS), metadata=metadata), out / WEIGHTS)
        program = export_program(model)
        with torch.no_grad():
            checks["program_max_abs_diff"] = _max_diff(
                program.module()(dense, values, lengths), logits, PROGRAM_TOLERANCE,
                "the exported program's logits differ from the model's")
        _save(lambda: torch.export.save(program, str(out / PROGRAM)), out / PROGRAM)
        files = [ARCH, WEIGHTS, PROGRAM, PREDICTIONS]
        if compile:
            compile_package(program, out / COMPILED)
            with torch.no_grad():
                checks["compiled_max_abs_diff"] = _max_diff(
                    load_compiled(out)(dense, values, lengths), logits, COMPILED_TOLERANCE,
                    "the compiled package's logits differ from the model's")
            files.append(COMPILED)
        (out / PREDICTIONS).write_text(json.dumps({
            "format": FORMAT_VERSION,
            "features": list(spec.feature_names),
            "inputs": {"dense": dense.tolist(), "values": values.tolist(), "lengths": lengths.tolist()},
            "logits": logits.tolist(),
            "checks": checks,
        }) + "\n")

        cost = arch_cost(spec)
        costs = dict(costs) if costs is not None else cost.to_dict()
        manifest = {
            "format": FORMAT_VERSION,
            "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "arch": spec.name,
            "versions": _versions(),
            "metrics": _jsonable(dict(metrics or {})),
            "costs": _jsonable(costs),
            "retrain_command": retrain_command,
            "program": {"inputs": ["dense [B, n_dense] float32", "values [N] int64", "lengths [F, B] int64"],
                        "features": list(spec.feature_names), "output": "logits [B]"},
            "files": {name: _sha256(out / name) for name in files},
        }
        (out / CARD).write_text(model_card(spec, cost, manifest))
        (out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return Path(out_dir)


@contextlib.contextmanager
def _staged(out: Path) -> Iterator[Path]:
    """A fresh folder beside ``out`` to write the export into; on success its files replace
    those of ``out`` (renamed, so each is whole), on failure it is removed and ``out`` is left as
    it was. An OSError (disk full, read-only folder) becomes an ExportError naming ``out``."""
    staged = partial_path(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        staged.mkdir()
        yield staged
        if not out.exists():
            os.rename(staged, out)
        for item in staged.iterdir() if staged.exists() else ():
            os.replace(item, out / item.name)
    except OSError as exc:
        raise ExportError(f"{out}: cannot write the export: {exc.strerror or exc}") from None
    finally:
        shutil.rmtree(staged, ignore_errors=True)


def _save(write: Callable[[], None], path: Path) -> None:
    """Run a binary writer (safetensors, torch.export); its failure to write ``path`` (raised as
    its own error type, e.g. on a full disk) becomes an OSError, as Python's own writes raise."""
    try:
        write()
    except (SafetensorError, RuntimeError) as exc:
        raise OSError(errno.EIO, str(exc).strip().splitlines()[0], str(path)) from exc


def _max_diff(a: torch.Tensor, b: torch.Tensor, tolerance: float, what: str) -> float:
    diff = (a.float() - b.float()).abs().max().item() if a.numel() else 0.0
    if not diff <= tolerance:
        raise ExportError(f"{what} by up to {diff:.3g} (tolerance {tolerance:g})")
    return diff


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 24), b""):
            digest.update(block)
    return digest.hexdigest()


def _versions() -> dict[str, str]:
    versions = {"torch": torch.__version__}
    for name, dist_name in (("torchrec", "torchrec"), ("autorec", "autorec-nas")):
        try:
            versions[name] = importlib.metadata.version(dist_name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "unknown"
    return versions


def _jsonable(value: Any) -> Any:
    """Numbers, strings, lists and dicts as they are; numpy scalars and tensors as numbers."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if hasattr(value, "item"):
        return value.item()
    return str(value)
