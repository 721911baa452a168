"""What a training run takes and what it gives back: TrainConfig, EpochRecord, TrainResult.

These are plain dataclasses with no torchrec in them, so a search, a report or a test can build
and read them without a Trainer (:mod:`autorec.train.trainer`).

Example:
    >>> TrainConfig(epochs=0)
    Traceback (most recent call last):
    ...
    ValueError: epochs: expected a positive integer, got 0
"""

from __future__ import annotations

import dataclasses
import math
import random
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from autorec.arch import ArchSpec
from autorec.metrics import MONITORS
from autorec.train.autocast import AUTOCAST, FP32_MATMUL
from autorec.train.distributed import DENSE_PARALLEL

DENSE_OPTIMIZERS = {"adam": torch.optim.Adam, "adagrad": torch.optim.Adagrad}


FUSED_DEVICES = {"adam": ("cpu", "cuda"), "adagrad": ("cpu",)}  # where torch has a fused kernel


def dense_optimizer(name: str, params: Any, **options: Any) -> torch.optim.Optimizer:
    """The dense optimizer ``name`` (a ``DENSE_OPTIMIZERS`` key) over ``params`` (tensors), in
    torch's fused form where it has one for all of them (floating point, on a device of
    ``FUSED_DEVICES``), else in torch's default form (foreach on CUDA, per tensor on CPU).

    The fused form is the same update as one kernel over every tensor, where the default runs
    about ten operators per tensor on the CPU: the DLRM preset's optimizer step takes 1.06 ms
    against 1.63 ms, DHEN's 1.35 against 4.70 (``benchmarks/dense_optimizer.py``, BENCHMARKS.md).
    Results match the default's to float rounding (``tests/train/test_dense_optimizer.py``).

    Example:
        >>> opt = dense_optimizer("adam", [torch.nn.Parameter(torch.zeros(3))], lr=1e-3)
        >>> opt.defaults["fused"]
        True
    """
    cls = DENSE_OPTIMIZERS[name]
    params = list(params)
    fused = all(torch.is_floating_point(p) and p.device.type in FUSED_DEVICES[name] for p in params)
    return cls(params, fused=True if fused else None, **options)
LR_SCHEDULES = ("constant", "cosine")


def lr_factor(schedule: str, step: int, total: int | None, warmup_steps: int = 0) -> float:
    """The multiplier of every learning rate (dense and embedding) at global step ``step``.

    A linear warm-up from ``1 / warmup_steps`` to 1 over the first ``warmup_steps`` steps, then
    ``constant`` (1) or ``cosine`` (half a cosine from 1 down to 0.1 at step ``total``, the planned
    steps of every epoch; without a known total the factor stays 1).

    Example:
        >>> [round(lr_factor("cosine", s, 100), 3) for s in (0, 50, 100)]
        [1.0, 0.55, 0.1]
        >>> lr_factor("constant", 4, 100, warmup_steps=10)
        0.5
    """
    if warmup_steps and step < warmup_steps:
        return (step + 1) / warmup_steps
    if schedule == "constant" or not total:
        return 1.0
    progress = min(1.0, max(0.0, (step - warmup_steps) / max(1, total - warmup_steps)))
    return COSINE_FLOOR + (1.0 - COSINE_FLOOR) * 0.5 * (1.0 + math.cos(math.pi * progress))


COSINE_FLOOR = 0.1  # the cosine schedule ends at a tenth of the base rate, not at 0


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite."""


class TrainingTimeLimit(RuntimeError):
    """A training ran past its ``time_limit_s``."""


@dataclass(frozen=True)
class TrainConfig:
    """How to train. Embeddings use torchrec's fused row-wise Adagrad applied in backward;
    the dense parts use ``dense_optimizer``. Early stopping and the checkpoint kept (the best
    epoch, restored at the end) watch ``monitor``: validation logloss by default, what a CTR
    model is judged on (a model picked on AUC alone may be badly calibrated), or ``val_auc``.
    ``track_test`` evaluates the test split after every epoch too (to measure how far the
    selected epoch is from the best one; never used to select).

    ``batch_size`` and ``eval_batch_size`` are global: under W ranks each rank takes its part
    of every global batch (see :mod:`autorec.train.partition`). ``plan`` is a sharding plan file
    (:mod:`autorec.train.plan`; default: torchrec's planner). ``dense_parallel`` is ``"ddp"`` or
    ``"fsdp"`` (FSDP2 ``fully_shard``). With ``checkpoint_dir``, a resumable checkpoint is
    written after every epoch and every ``checkpoint_every`` steps, and ``resume`` continues
    from the latest one, at this or another world size. ``pipeline`` trains through torchrec's
    TrainPipelineSparseDist (:mod:`autorec.train.pipeline`)."""

    epochs: int = 10
    batch_size: int = 1024
    eval_batch_size: int = 8192
    seed: int = 0
    dense_optimizer: str = "adam"
    dense_lr: float = 3e-3  # dense_lr, embedding_lr: benchmarks/train_defaults.py (BENCHMARKS.md)
    dense_weight_decay: float = 1e-4  # benchmarks/train_defaults.py (BENCHMARKS.md, "Training defaults")
    embedding_lr: float = 0.2
    embedding_weight_decay: float = 0.0
    lr_schedule: str = "constant"
    warmup_steps: int = 0
    patience: int = 2
    max_steps_per_epoch: int | None = None
    checkpoint_dir: str | None = None
    num_workers: int = 0
    prefetch: int = 0  # batches built ahead on a thread (autorec.train.prefetch); 0: none
    compile: bool = False  # torch.compile the dense parts (autorec.train.compiled)
    autocast: str = "off"  # "bf16": the forward under bf16 autocast (autorec.train.autocast)
    fp32_matmul: str = "ieee"  # "bf16" / "tf32": fp32 products at that precision (autorec.train.autocast)
    keep_freed_memory: bool = True  # glibc keeps freed buffers up to 32 MiB warm (autorec.train.memory)
    huge_pages: bool = True  # CPU tables on 2 MiB transparent huge pages (autorec.train.huge_pages)
    progress: bool = True
    plan: str | None = None
    dense_parallel: str = "ddp"
    checkpoint_every: int | None = None
    resume: bool = False
    pipeline: bool = False
    monitor: str = "val_logloss"
    track_test: bool = False  # also evaluate the test split after every epoch (selection studies)
    evaluate_test: bool = True  # evaluate the test split at the end (a re-ranking needs val only)
    time_limit_s: float | None = None  # stop (TrainingTimeLimit) after this long; a search's per-trial limit
    val_samples: int | None = None  # validate on the split's first N samples only (a re-rank's cheaper look)
    # stop after this many steps of the run (mid-epoch too), validate, and leave the resumable
    # checkpoint there; a run with resume (and no pause, or a later one) goes on as if never
    # stopped: a rung of successive halving trains a fraction of an epoch and the leader goes on
    pause_at_step: int | None = None

    def __post_init__(self) -> None:
        if self.monitor not in MONITORS:
            raise ValueError(f"monitor: expected one of {', '.join(MONITORS)}, got {self.monitor!r}")
        if self.dense_optimizer not in DENSE_OPTIMIZERS:
            raise ValueError(f"dense_optimizer: expected one of {', '.join(DENSE_OPTIMIZERS)}, "
                             f"got {self.dense_optimizer!r}")
        if self.lr_schedule not in LR_SCHEDULES:
            raise ValueError(f"lr_schedule: expected one of {', '.join(LR_SCHEDULES)}, "
                             f"got {self.lr_schedule!r}")
        if self.warmup_steps < 0:
            raise ValueError(f"warmup_steps: expected 0 or more, got {self.warmup_steps}")
        if self.autocast not in AUTOCAST:
            raise ValueError(f"autocast: expected one of {', '.join(AUTOCAST)}, got {self.autocast!r}")
        if self.fp32_matmul not in FP32_MATMUL:
            raise ValueError(f"fp32_matmul: expected one of {', '.join(FP32_MATMUL)}, "
                             f"got {self.fp32_matmul!r}")
        if self.dense_parallel not in DENSE_PARALLEL:
            raise ValueError(f"dense_parallel: expected one of {', '.join(DENSE_PARALLEL)}, "
                             f"got {self.dense_parallel!r}")
        if self.time_limit_s is not None and not self.time_limit_s > 0:
            raise ValueError(f"time_limit_s: expected a positive number of seconds, got {self.time_limit_s}")
        if self.val_samples is not None and self.val_samples < 1:
            raise ValueError(f"val_samples: expected a positive number of samples, got {self.val_samples}")
        if self.checkpoint_every is not None and self.checkpoint_every < 1:
            raise ValueError(f"checkpoint_every: expected a positive integer, got {self.checkpoint_every}")
        if self.resume and not self.checkpoint_dir:
            raise ValueError("resume: needs checkpoint_dir, the folder to resume from")
        if self.pause_at_step is not None and self.pause_at_step < 1:
            raise ValueError(f"pause_at_step: expected a positive number of steps, got {self.pause_at_step}")
        if self.pause_at_step and not self.checkpoint_dir:
            raise ValueError("pause_at_step: needs checkpoint_dir, where the paused run is kept to go on")
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
    samples: int = 0  # training samples this epoch (0 in a checkpoint written before it was kept)
    test: dict[str, float] | None = None  # test metrics of this epoch's model (``track_test`` only)
    data_wait_s: float = 0.0  # of ``seconds``, those the steps waited for their batches (waiting.py)


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
    # The global (all-rank) mean loss of every step; not in to_dict (it grows with the run).
    step_losses: list[float] = field(default_factory=list)
    resumed_from: dict[str, int] | None = None
    # the global step the run paused at (pause_at_step): ``val`` is that step's, no test pass, and
    # ``history`` ends with the paused epoch's steps so far; None for a run that went to its end
    paused_at: int | None = None

    @property
    def train_samples(self) -> int:
        """Training samples seen over every epoch (what a scaling law counts as data)."""
        return sum(r.samples for r in self.history)

    @property
    def samples_per_s(self) -> float:
        return float(np.mean([r.samples_per_s for r in self.history])) if self.history else 0.0

    @property
    def data_wait_share(self) -> float:
        """The share of the training time spent waiting for batches (0 to 1), over all epochs."""
        seconds = sum(r.seconds for r in self.history)
        return sum(r.data_wait_s for r in self.history) / seconds if seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "arch": self.arch.name,
            "best_epoch": self.best_epoch,
            "val": self.val,
            "test": self.test,
            "train_samples_per_s": round(self.samples_per_s, 1),
            "data_wait_share": round(self.data_wait_share, 4),
            "train_samples": self.train_samples,
            "seconds": round(self.seconds, 2),
            "resumed_from": self.resumed_from,
            "paused_at": self.paused_at,
            "history": [dataclasses.asdict(r) for r in self.history],
            "config": dataclasses.asdict(self.config),
        }


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
