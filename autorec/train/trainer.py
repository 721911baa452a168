"""Train an ArchSpec on a dataset: torchrec sharded embeddings, early stopping, checkpoints."""

from __future__ import annotations

import dataclasses
import math
import random
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed.checkpoint as dcp
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from torchrec.datasets.utils import Batch
from torchrec.optim.apply_optimizer_in_backward import apply_optimizer_in_backward
from torchrec.optim.keyed import CombinedOptimizer, KeyedOptimizerWrapper
from torchrec.optim.optimizers import in_backward_optimizer_filter
from torchrec.optim.rowwise_adagrad import RowWiseAdagrad

from autorec.arch import ArchSpec
from autorec.data import RecDataset
from autorec.models import build_model
from autorec.train.distributed import default_device, shard
from autorec.train.metrics import binary_metrics

DENSE_OPTIMIZERS = {"adam": torch.optim.Adam, "adagrad": torch.optim.Adagrad}


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite."""


@dataclass(frozen=True)
class TrainConfig:
    """How to train. Embeddings use torchrec's fused row-wise Adagrad applied in backward;
    the dense parts use ``dense_optimizer``. Early stopping watches validation AUC."""

    epochs: int = 10
    batch_size: int = 1024
    eval_batch_size: int = 8192
    seed: int = 0
    dense_optimizer: str = "adam"
    dense_lr: float = 1e-3
    dense_weight_decay: float = 0.0
    embedding_lr: float = 0.05
    embedding_weight_decay: float = 0.0
    patience: int = 2
    max_steps_per_epoch: int | None = None
    checkpoint_dir: str | None = None
    num_workers: int = 0
    progress: bool = True

    def __post_init__(self) -> None:
        if self.dense_optimizer not in DENSE_OPTIMIZERS:
            raise ValueError(f"dense_optimizer: expected one of {', '.join(DENSE_OPTIMIZERS)}, "
                             f"got {self.dense_optimizer!r}")
        for name in ("epochs", "batch_size", "eval_batch_size", "patience"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: expected a positive integer, got {getattr(self, name)}")


@dataclass
class EpochRecord:
    epoch: int
    train_loss: float
    val: dict[str, float]
    samples_per_s: float
    seconds: float


@dataclass
class TrainResult:
    """What a training run produced: per-epoch history, best validation and test metrics."""

    arch: ArchSpec
    config: TrainConfig
    history: list[EpochRecord] = field(default_factory=list)
    best_epoch: int = -1
    val: dict[str, float] = field(default_factory=dict)
    test: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def samples_per_s(self) -> float:
        return float(np.mean([r.samples_per_s for r in self.history])) if self.history else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "arch": self.arch.name,
            "best_epoch": self.best_epoch,
            "val": self.val,
            "test": self.test,
            "train_samples_per_s": round(self.samples_per_s, 1),
            "seconds": round(self.seconds, 2),
            "history": [dataclasses.asdict(r) for r in self.history],
            "config": dataclasses.asdict(self.config),
        }


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


class Trainer:
    """Trains ``spec`` on ``dataset`` under torchrec DistributedModelParallel.

    Args:
        spec: the architecture.
        dataset: the data; its train split trains, val drives early stopping, test is reported.
        config: see :class:`TrainConfig`.
        on_epoch: called after every epoch's validation (a search reports and prunes here by
            raising).

    Example:
        >>> from autorec.data import load_dataset
        >>> from autorec.presets import preset
        >>> ds = load_dataset("movielens100k")
        >>> result = Trainer(preset("dlrm", ds.schema), ds, TrainConfig(epochs=1)).fit()
        >>> 0.5 < result.test["auc"] <= 1.0
        True
    """

    def __init__(self, spec: ArchSpec, dataset: RecDataset, config: TrainConfig | None = None,
                 on_epoch: Callable[[EpochRecord], None] | None = None) -> None:
        self.spec, self.dataset = spec, dataset
        self.config = config or TrainConfig()
        self.on_epoch = on_epoch
        self.device = default_device()
        missing = set(spec.feature_names) - set(dataset.schema.sparse_names)
        if missing:
            raise ValueError(f"the architecture uses features {sorted(missing)} that dataset "
                             f"{dataset.name!r} lacks; it has {', '.join(dataset.schema.sparse_names)}")
        if spec.n_dense != dataset.schema.n_dense:
            raise ValueError(f"the architecture expects n_dense={spec.n_dense}, dataset "
                             f"{dataset.name!r} has {dataset.schema.n_dense} dense features")
        seed_everything(self.config.seed)
        model = build_model(spec, device=torch.device("meta"))
        apply_optimizer_in_backward(
            RowWiseAdagrad, model.sparse_arch.parameters(),
            {"lr": self.config.embedding_lr, "weight_decay": self.config.embedding_weight_decay})
        self.model = shard(model, self.device)
        dense_cls = DENSE_OPTIMIZERS[self.config.dense_optimizer]
        dense = KeyedOptimizerWrapper(
            dict(in_backward_optimizer_filter(self.model.named_parameters())),
            lambda params: dense_cls(params, lr=self.config.dense_lr,
                                     weight_decay=self.config.dense_weight_decay))
        self.optimizer = CombinedOptimizer([self.model.fused_optimizer, dense])

    # ---- steps ------------------------------------------------------------------------
    def _batches(self, split: str, batch_size: int, shuffle: bool, epoch: int = 0) -> Iterable[Batch]:
        return self.dataset.loader(split, batch_size, shuffle=shuffle, seed=self.config.seed,
                                   epoch=epoch, num_workers=self.config.num_workers)

    def train_step(self, batch: Batch) -> float:
        batch = batch.to(self.device, non_blocking=True)
        logits = self.model(batch.dense_features, batch.sparse_features)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, batch.labels)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()

    @torch.no_grad()
    def predict(self, split: str) -> tuple[np.ndarray, np.ndarray]:
        """(labels, click probabilities) over a whole split, in the loader's order."""
        self.model.eval()
        labels, probs = [], []
        for batch in self._batches(split, self.config.eval_batch_size, shuffle=False):
            batch = batch.to(self.device)
            probs.append(torch.sigmoid(self.model(batch.dense_features, batch.sparse_features)).cpu())
            labels.append(batch.labels.cpu())
        self.model.train()
        return torch.cat(labels).numpy(), torch.cat(probs).double().numpy()

    def evaluate(self, split: str) -> dict[str, float]:
        labels, probs = self.predict(split)
        if not np.isfinite(probs).all():
            raise TrainingDiverged(f"the model predicts NaN or infinity on the {split} split")
        return binary_metrics(labels, probs)

    # ---- checkpoints ------------------------------------------------------------------
    def save_checkpoint(self, path: str | Path) -> None:
        """A torch.distributed.checkpoint (sharded) of the model and optimizer states."""
        dcp.save({"model": self.model.state_dict(), "optim": self.optimizer.state_dict()},
                 storage_writer=dcp.FileSystemWriter(str(path), overwrite=True))

    def load_checkpoint(self, path: str | Path, optimizer: bool = True) -> None:
        state: dict[str, Any] = {"model": self.model.state_dict()}
        if optimizer:
            state["optim"] = self.optimizer.state_dict()
        dcp.load(state, checkpoint_id=str(path))
        self.model.load_state_dict(state["model"])
        if optimizer:
            self.optimizer.load_state_dict(state["optim"])

    # ---- the loop ---------------------------------------------------------------------
    def fit(self) -> TrainResult:
        cfg = self.config
        result = TrainResult(self.spec, cfg)
        scratch = None if cfg.checkpoint_dir else tempfile.mkdtemp(prefix="autorec-ckpt-")
        root = Path(cfg.checkpoint_dir or scratch)
        best_auc, stale, t_start = -math.inf, 0, time.perf_counter()
        rows = self.dataset.num_rows("train")
        steps = -(-rows // cfg.batch_size) if rows else None
        if steps and cfg.max_steps_per_epoch:
            steps = min(steps, cfg.max_steps_per_epoch)
        try:
            with _progress(cfg.progress) as progress:
                for epoch in range(cfg.epochs):
                    record = self._epoch(epoch, steps, progress)
                    result.history.append(record)
                    auc = record.val["auc"]
                    if result.best_epoch < 0 or auc > best_auc:  # NaN AUC never improves
                        best_auc, stale, result.best_epoch, result.val = auc, 0, epoch, record.val
                        self.save_checkpoint(root / "best")
                    else:
                        stale += 1
                    if self.on_epoch is not None:
                        self.on_epoch(record)
                    if stale >= cfg.patience:
                        break
            if result.best_epoch != len(result.history) - 1:
                self.load_checkpoint(root / "best", optimizer=False)
            result.test = self.evaluate("test")
        finally:
            if scratch:
                shutil.rmtree(scratch, ignore_errors=True)
        result.seconds = time.perf_counter() - t_start
        return result

    def _epoch(self, epoch: int, steps: int | None, progress: Progress | None) -> EpochRecord:
        task = progress.add_task(f"epoch {epoch}", total=steps, rate="") if progress else None
        losses: list[float] = []
        samples, t0 = 0, time.perf_counter()
        for step, batch in enumerate(self._batches("train", self.config.batch_size, True, epoch)):
            if self.config.max_steps_per_epoch and step >= self.config.max_steps_per_epoch:
                break
            loss = self.train_step(batch)
            if not math.isfinite(loss):
                raise TrainingDiverged(f"loss is {loss} at epoch {epoch} step {step}")
            losses.append(loss)
            samples += batch.labels.numel()
            if progress is not None and task is not None:
                rate = samples / max(time.perf_counter() - t0, 1e-9)
                progress.update(task, advance=1, rate=f"{rate:,.0f} samples/s  loss {loss:.4f}")
        seconds = time.perf_counter() - t0
        val = self.evaluate("val")
        if progress is not None and task is not None:
            progress.update(task, rate=f"{samples / seconds:,.0f} samples/s  val AUC {val['auc']:.4f}")
        return EpochRecord(epoch, float(np.mean(losses)) if losses else float("nan"), val,
                           samples / seconds if seconds else 0.0, seconds)


class _NoProgress:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _progress(enabled: bool) -> Any:
    if not enabled:
        return _NoProgress()
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), TextColumn("{task.fields[rate]}"))


def train(spec: ArchSpec, dataset: RecDataset, config: TrainConfig | None = None) -> TrainResult:
    """Train ``spec`` on ``dataset`` and return its metrics (see :class:`Trainer`)."""
    return Trainer(spec, dataset, config).fit()
