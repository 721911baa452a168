"""Export a trained model as a self-describing directory, and load it back.

An export directory holds::

    arch.json             the ArchSpec (ArchSpec.save)
    schedule.json         the growth schedule that trained it, for a growth study's trial only
    weights.safetensors   every parameter as a plain tensor, keyed like build_model(arch).state_dict()
    model.pt2             a torch.export program of the model with those weights (see below)
    predictions.json      a sample batch's inputs and the logits recorded at export time
    export.json           metrics, costs, versions, the retrain command, sha256 of every file
    MODEL_CARD.md         the same for people, with the architecture layer by layer

The program takes tensors only, so it runs without torchrec (serving, AOTInductor)::

    program(dense [B, n_dense] float32, values [N] int64, lengths [F, B] int64) -> logits [B]

where F runs over ``arch.feature_names`` in order and ``values`` holds every id of feature 0
(sample by sample), then of feature 1, and so on: a KeyedJaggedTensor's values and lengths.
B and N are dynamic: any batch size, any jagged lengths. :func:`program_inputs` converts a
(dense, KeyedJaggedTensor) pair.

A trainer's model is a torchrec DistributedModelParallel whose state_dict holds
ShardedTensors for sharded tables; :func:`gather_state_dict` assembles them into ordinary
tensors. The keys need no renaming: DistributedModelParallel already strips its wrapper, so
they read ``sparse_arch.embedding_bags.<table>.weight``, ``over_arch.0._mlp.0._linear.weight``
and so on, as in :class:`~autorec.models.RecModel`.

Example:
    >>> import tempfile
    >>> from autorec.data import load_dataset
    >>> from autorec.presets import preset
    >>> from autorec.train.trainer import TrainConfig, Trainer
    >>> ds = load_dataset("movielens100k")
    >>> trainer = Trainer(preset("dlrm", ds.schema, dim=8), ds,
    ...                   TrainConfig(epochs=1, max_steps_per_epoch=2, progress=False))
    >>> out = export_trained(trainer, tempfile.mkdtemp(), metrics=trainer.evaluate("test"),
    ...                      retrain_command="autorec train --data movielens100k --arch dlrm")
    >>> load_model(out).spec == trainer.spec
    True
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import importlib.metadata
import json
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
from safetensors import safe_open
from safetensors.torch import save_file
from torch import nn
from torch.distributed._shard.sharded_tensor import ShardedTensor
from torch.distributed.tensor import DTensor
from torch.export import Dim, ExportedProgram
from torchrec.datasets.utils import Batch
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from autorec.arch import ArchSpec, ArchSpecError
from autorec.costs import ArchCost, arch_cost, tensor_bytes
from autorec.models import RecModel, build_model

if TYPE_CHECKING:
    from autorec.train.trainer import Trainer

FORMAT_VERSION = 1
ARCH, WEIGHTS, PROGRAM = "arch.json", "weights.safetensors", "model.pt2"
PREDICTIONS, MANIFEST, CARD = "predictions.json", "export.json", "MODEL_CARD.md"
FILES = (ARCH, WEIGHTS, PROGRAM, PREDICTIONS, MANIFEST, CARD)
# The plain copy's logits may differ from the sharded model's by float summation order only.
TRAINED_TOLERANCE = 1e-5
PROGRAM_TOLERANCE = 1e-6


class ExportError(RuntimeError):
    """An export cannot be written or an export directory cannot be read; names the file."""


# ---- from a trainer's model to a plain one ---------------------------------------------------
def gather_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """``model.state_dict()`` with sharded tensors assembled into ordinary CPU tensors.

    In a multi-process run every rank must call it (gathering is collective); rank 0 gets the
    full state and the other ranks an empty dict.
    """
    distributed = dist.is_initialized() and dist.get_world_size() > 1
    rank = dist.get_rank() if distributed else 0
    out = {}
    for key, value in model.state_dict().items():
        full = _full_tensor(value, distributed, rank)
        if rank == 0:
            out[key] = full
    return out


def _full_tensor(value: torch.Tensor, distributed: bool, rank: int) -> torch.Tensor:
    if isinstance(value, ShardedTensor):
        with warnings.catch_warnings():  # torchrec 1.8 still hands out ShardedTensors, not DTensors
            warnings.filterwarnings("ignore", "Please use DTensor instead", FutureWarning)
            full = torch.empty(value.size(), dtype=value.dtype)
        if distributed:
            value.gather(dst=0, out=full if rank == 0 else None)
            return full
        for shard in value.local_shards():
            where = tuple(slice(o, o + n) for o, n in zip(shard.metadata.shard_offsets,
                                                          shard.metadata.shard_sizes, strict=True))
            full[where] = shard.tensor.detach().cpu()
        return full
    if isinstance(value, DTensor):
        return value.full_tensor().detach().cpu()
    return value.detach().cpu().clone()


def plain_model(model: nn.Module, spec: ArchSpec) -> RecModel:
    """A CPU :class:`RecModel` of ``spec`` holding ``model``'s weights (sharded or not), in
    eval mode. Collective in a multi-process run (see :func:`gather_state_dict`)."""
    state = gather_state_dict(model)
    plain = build_model(spec)
    if not dist.is_initialized() or dist.get_rank() == 0:  # the other ranks hold no state
        try:
            plain.load_state_dict(state, strict=True)
        except RuntimeError as exc:
            raise ExportError(f"the trained model's state does not fit build_model(arch): {exc}") from None
    return plain.eval()


# ---- the program ---------------------------------------------------------------------------
class TensorInputs(nn.Module):
    """A RecModel taking (dense, values, lengths) tensors instead of a KeyedJaggedTensor.

    Shapes: dense [B, n_dense], values [N], lengths [F, B] (F = ``spec.feature_names``)
    -> logits [B].

    Args:
        model: the model to wrap.
    """

    def __init__(self, model: RecModel) -> None:
        super().__init__()
        self.model = model
        self.keys = list(model.spec.feature_names)

    def forward(self, dense: torch.Tensor, values: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        sparse = KeyedJaggedTensor(keys=self.keys, values=values, lengths=lengths.flatten())
        return self.model(dense, sparse)


def program_inputs(spec: ArchSpec, dense: torch.Tensor,
                   sparse: KeyedJaggedTensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dense, values, lengths) for the exported program from a batch's dense features and
    KeyedJaggedTensor (which may hold more features than ``spec`` uses, in any order)."""
    by_name = sparse.to_dict()
    missing = [f for f in spec.feature_names if f not in by_name]
    if missing:
        raise ValueError(f"the batch lacks features {missing}; the model needs {list(spec.feature_names)}")
    values = torch.cat([by_name[f].values() for f in spec.feature_names]).long()
    lengths = torch.stack([by_name[f].lengths() for f in spec.feature_names]).long()
    return dense.float(), values, lengths


def _tracing_inputs(spec: ArchSpec, batch: int = 5) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random inputs whose sizes avoid 0 and 1, which torch.export would specialise on."""
    g = torch.Generator().manual_seed(0)
    rows = [t.num_embeddings for t in spec.tables for _ in t.features]
    lengths = torch.randint(1, 4, (len(rows), batch), generator=g)
    values = torch.cat([torch.randint(0, n, (int(k.sum()),), generator=g) for n, k in zip(rows, lengths,
                                                                                          strict=True)])
    return torch.randn(batch, spec.n_dense, generator=g), values, lengths


def export_program(model: RecModel) -> ExportedProgram:
    """``torch.export`` of ``model`` (see the module docstring for its signature)."""
    batch, nnz = Dim("batch"), Dim("nnz")
    with torch.no_grad():
        return torch.export.export(TensorInputs(model.eval()), _tracing_inputs(model.spec),
                                   dynamic_shapes=({0: batch}, {0: nnz}, {1: batch}), strict=False)


# ---- writing ---------------------------------------------------------------------------------
def export_trained(trainer: Trainer, out_dir: str | Path, *, metrics: Mapping[str, Any],
                   retrain_command: str, costs: Mapping[str, Any] | None = None,
                   sample_batch: Batch | None = None) -> Path:
    """Export a :class:`~autorec.train.trainer.Trainer`'s model into ``out_dir``.

    Checks on the way that the exported weights give the trained model's logits on
    ``sample_batch`` (within float summation order, ``TRAINED_TOLERANCE``). In a
    multi-process run call it on every rank; rank 0 writes.

    Args:
        trainer: the trainer (its ``model``, ``spec``, ``dataset`` and ``device`` are used).
        out_dir: created if missing; the export's files in it are overwritten.
        metrics: shown in the model card and export.json (e.g. ``TrainResult.to_dict()``).
        retrain_command: the command line that retrains this model.
        costs: cost figures to record; default ``arch_cost(trainer.spec).to_dict()``.
        sample_batch: the batch recorded in predictions.json; default the first 16 test rows.
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
                        sample_batch=sample_batch, trained_logits=trained)


def export_model(model: RecModel, out_dir: str | Path, *, sample_batch: Batch,
                 metrics: Mapping[str, Any] | None = None, retrain_command: str = "",
                 costs: Mapping[str, Any] | None = None,
                 trained_logits: torch.Tensor | None = None) -> Path:
    """Export a plain :class:`RecModel` into ``out_dir`` (see :func:`export_trained`).

    ``trained_logits``, when given, are the logits the trained model gave on
    ``sample_batch``; the export fails unless its own agree within ``TRAINED_TOLERANCE``.
    ``model`` is moved to the CPU and left in eval mode.
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

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    spec.save(out / ARCH)
    state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(out / WEIGHTS),
              metadata={"format": f"autorec-weights/{FORMAT_VERSION}", "arch": spec.to_json(indent=None)})
    program = export_program(model)
    with torch.no_grad():
        checks["program_max_abs_diff"] = _max_diff(
            program.module()(dense, values, lengths), logits, PROGRAM_TOLERANCE,
            "the exported program's logits differ from the model's")
    torch.export.save(program, str(out / PROGRAM))
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
        "files": {name: _sha256(out / name) for name in (ARCH, WEIGHTS, PROGRAM, PREDICTIONS)},
    }
    (out / CARD).write_text(model_card(spec, cost, manifest))
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return out


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


# ---- the model card --------------------------------------------------------------------------
def model_card(spec: ArchSpec, cost: ArchCost, manifest: Mapping[str, Any]) -> str:
    """MODEL_CARD.md: metrics, costs, the architecture layer by layer, how to use and retrain."""
    lines = [f"# {spec.name}: autorec model card", "",
             f"Exported {manifest['created']} with " +
             ", ".join(f"{k} {v}" for k, v in manifest["versions"].items()) + ".", ""]
    lines += ["## Metrics", "", *_key_value_table(manifest["metrics"]), ""]
    lines += ["## Costs", "", *_key_value_table(manifest["costs"], skip=("parts",)), ""]
    lines += ["## Architecture", "", *_architecture(spec, cost), ""]
    lines += ["## Files", "",
              f"- `{ARCH}`: the ArchSpec; `ArchSpec.load` reads it.",
              f"- `{WEIGHTS}`: every parameter, keyed like `build_model(arch).state_dict()`.",
              f"- `{PROGRAM}`: a `torch.export` program: (dense [B, {spec.n_dense}] float32, values [N] "
              f"int64, lengths [{len(spec.feature_names)}, B] int64) -> logits [B]; any B and N.",
              f"- `{PREDICTIONS}`: a sample batch and its logits at export time.",
              f"- `{MANIFEST}`: metrics, costs, versions and file checksums.", ""]
    lines += ["## Use", "", "```python",
              "from autorec.export import load_model, load_program, program_inputs",
              "model = load_model(export_dir)      # a RecModel in eval mode",
              "logits = model(dense, kjt)          # dense [B, n_dense], a KeyedJaggedTensor",
              "program = load_program(export_dir)  # torch.export.ExportedProgram",
              "logits = program.module()(*program_inputs(model.spec, dense, kjt))",
              "```", ""]
    lines += ["## Retrain", "", "```sh", manifest["retrain_command"] or "(not recorded)", "```", ""]
    return "\n".join(lines)


def _architecture(spec: ArchSpec, cost: ArchCost) -> list[str]:
    widths = spec.layer_widths()
    parts = {p.name: p for p in cost.parts}
    lines = [f"Embedding dim D = {spec.dim}; {spec.n_dense} dense features; "
             f"{len(spec.feature_names)} sparse features in {len(spec.tables)} tables; "
             f"{widths[0]} vectors enter the interaction stack.", "",
             "| table | features | rows | dim | precision | size |", "|---|---|---:|---:|---|---:|"]
    lines += [f"| {t.name} | {', '.join(t.features)} | {t.num_embeddings:,} | {t.dim} | {t.precision} | "
              f"{_human_bytes(tensor_bytes(t.num_embeddings * t.dim, t.precision))} |"
              for t in spec.tables]
    lines += ["", "| part | kind | configuration | vectors in -> out | precision | params | FLOPs/sample |",
              "|---|---|---|---|---|---:|---:|"]

    def row(name: str, kind: str, config: str, shape: str, precision: str) -> str:
        part = parts.get(name)
        params, flops = (part.params, part.forward_flops) if part else (0, 0)
        return f"| {name} | {kind} | {config} | {shape} | {precision} | {params:,} | {flops:,} |"

    if spec.n_dense:
        lines.append(row("dense_arch", "mlp", f"sizes {[spec.n_dense, *spec.dense_arch, spec.dim]}",
                         "dense -> 1", "fp32"))
    if "projections" in parts:
        lines.append(row("projections", "linear", f"tables narrower or wider than {spec.dim}", "-", "fp32"))
    for i, layer in enumerate(spec.layers):
        config = ", ".join(f"{f.name}={getattr(layer, f.name)}" for f in dataclasses.fields(layer)
                           if f.name != "precision")
        lines.append(row(f"layers.{i}", layer.kind, config or "-", f"{widths[i]} -> {widths[i + 1]}",
                         layer.precision))
    lines.append(row("over_arch", "mlp", f"sizes {[widths[-1] * spec.dim, *spec.over_arch, 1]}",
                     f"{widths[-1]} -> logit", "fp32"))
    return lines


def _human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000:
            return f"{n:.3g} {unit}"
        n /= 1000
    return f"{n:,.1f} TB"


def _key_value_table(values: Mapping[str, Any], skip: tuple[str, ...] = ()) -> list[str]:
    flat = _flatten({k: v for k, v in values.items() if k not in skip})
    if not flat:
        return ["(none recorded)"]
    return ["| name | value |", "|---|---:|", *(f"| {k} | {_fmt(v)} |" for k, v in flat.items())]


def _flatten(values: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in values.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_flatten(value, f"{name}."))
        elif isinstance(value, list):
            text = json.dumps(value)
            out[name] = text if len(text) <= 80 else f"({len(value)} entries; see {MANIFEST})"
        else:
            out[name] = value
    return out


def _fmt(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value).replace("|", "\\|")


# ---- reading ---------------------------------------------------------------------------------
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
