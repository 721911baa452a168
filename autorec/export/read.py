"""Loading an export directory back: its ArchSpec, model, program and recorded predictions.

Every reader names the file it could not read and why (:class:`ExportError`); the weights are
loaded strictly into ``build_model(arch)`` and must have been exported for that architecture.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from torch.export import ExportedProgram
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from autorec.arch import ArchSpec, ArchSpecError
from autorec.export.layout import ARCH, FILES, PREDICTIONS, PROGRAM, WEIGHTS, ExportError
from autorec.models import RecModel, build_model


def _path(out_dir: str | Path, name: str) -> Path:
    root = Path(out_dir)
    if not root.is_dir():
        raise ExportError(f"{root}: not an export directory (it should hold {', '.join(FILES)})")
    path = root / name
    if not path.is_file():
        raise ExportError(f"{path}: missing from the export directory")
    return path


def load_arch(out_dir: str | Path) -> ArchSpec:
    """The ArchSpec of an export (``arch.json``)."""
    try:
        return ArchSpec.load(_path(out_dir, ARCH))
    except ArchSpecError as exc:
        raise ExportError(str(exc)) from None


def load_model(out_dir: str | Path) -> RecModel:
    """``build_model(arch)`` with the exported weights loaded strictly, on the CPU, in eval mode."""
    spec = load_arch(out_dir)
    path = _path(out_dir, WEIGHTS)
    try:
        with safe_open(str(path), framework="pt") as f:
            metadata = f.metadata() or {}
            state = {key: f.get_tensor(key) for key in f.keys()}
    except Exception as exc:  # safetensors raises its own error types for bad headers and data
        raise ExportError(f"{path}: not a readable safetensors file: {exc}") from None
    if "arch" in metadata and _structure(ArchSpec.from_json(metadata["arch"], str(path))) != _structure(spec):
        raise ExportError(f"{path}: the weights were exported for another architecture than "
                          f"{path.parent / ARCH} describes")
    model = build_model(spec)
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        raise ExportError(f"{path}: the weights do not fit {path.parent / ARCH}: {exc}") from None
    return model.eval()


def _structure(spec: ArchSpec) -> dict[str, Any]:
    """What determines the model: everything but the name and metadata."""
    return {k: v for k, v in spec.to_dict().items() if k not in ("name", "metadata")}


def load_program(out_dir: str | Path) -> ExportedProgram:
    """The exported program (``torch.export.load``); call ``.module()(dense, values, lengths)``."""
    path = _path(out_dir, PROGRAM)
    try:
        return torch.export.load(str(path))
    except Exception as exc:  # torch.export.load raises zipfile, pickle and schema errors alike
        raise ExportError(f"{path}: not a readable torch.export program: {exc}") from None


@dataclass(frozen=True)
class RecordedSample:
    """The sample batch of ``predictions.json``: program inputs and the logits at export."""

    features: tuple[str, ...]
    dense: torch.Tensor
    values: torch.Tensor
    lengths: torch.Tensor
    logits: torch.Tensor

    def kjt(self) -> KeyedJaggedTensor:
        return KeyedJaggedTensor(keys=list(self.features), values=self.values, lengths=self.lengths.flatten())


def load_predictions(out_dir: str | Path) -> RecordedSample:
    """The sample batch and logits recorded at export time (``predictions.json``)."""
    path = _path(out_dir, PREDICTIONS)
    try:
        data = json.loads(path.read_text())
        inputs = data["inputs"]
        return RecordedSample(
            features=tuple(data["features"]),
            dense=torch.tensor(inputs["dense"], dtype=torch.float32),
            values=torch.tensor(inputs["values"], dtype=torch.int64),
            lengths=torch.tensor(inputs["lengths"], dtype=torch.int64).reshape(len(data["features"]), -1),
            logits=torch.tensor(data["logits"], dtype=torch.float32))
    except (ValueError, KeyError, TypeError, IndexError, RuntimeError) as exc:
        raise ExportError(f"{path}: malformed predictions file: {type(exc).__name__}: {exc}") from None
