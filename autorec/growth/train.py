"""Train an architecture under a growth schedule: phases, pruning and growth at their boundaries.

:func:`train_schedule` trains the dense model of each phase at the phase's widths
(:meth:`GrowthSchedule.phase_specs`) for the phase's steps, one data stream over all phases
(epochs follow each other, reshuffled). The first phase's model is built at its size; at each
boundary the model is pruned (:func:`autorec.growth.ops.prune`) to the narrower of the two
phases' widths, part by part, then grown (:func:`autorec.growth.ops.grow`, function-preserving)
to the next phase's widths. The embedding tables are never resized.

Optimizers follow the trainer's recipe (:class:`autorec.train.trainer.TrainConfig`): row-wise
Adagrad on the embedding tables, Adam (or Adagrad) on the dense part. At a boundary the
optimizer state is carried for every parameter that comes through unchanged (same name, shape
and values: the tables, and the parts the boundary did not resize) and started afresh for the
rest; the phase records say how many were carried.

The model is a plain single-process :class:`~autorec.models.RecModel` (the tables are
unsharded), on the CPU or, untested here, a CUDA device. Learning-curve early stopping: with a
``stopper`` (:class:`CurveStopper`), validation AUC is measured every ``eval_every`` steps and
the run stops once it falls behind the reference curve.

Example:
    >>> from autorec.data import load_dataset
    >>> from autorec.presets import preset
    >>> from autorec.growth.schedule import GrowthSchedule, Phase
    >>> ds = load_dataset("synthetic", preset="tiny", num_samples=2000)
    >>> spec = preset("dlrm", ds.schema)
    >>> schedule = GrowthSchedule((Phase(20, {"over_arch": 0.5}), Phase(10)))
    >>> result = train_schedule(spec, schedule, ds, GrowthTrainConfig(batch_size=64))
    >>> [p.spec.over_arch for p in result.phases], result.schedule == schedule
    ([(128, 64), (256, 128)], True)
    >>> 0.0 <= result.test["auc"] <= 1.0
    True
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from autorec.arch import ArchSpec
from autorec.costs.training import training_flops
from autorec.metrics import binary_metrics
from autorec.models import build_model
from autorec.train.embedding_init import init_embeddings
from autorec.train.embedding_optim import RowSparseAdagrad
from autorec.train.records import dense_optimizer
from autorec.train.trainer import DENSE_OPTIMIZERS, TrainingDiverged, seed_everything

if TYPE_CHECKING:
    from torchrec.datasets.utils import Batch

    from autorec.data import RecDataset
    from autorec.growth.schedule import GrowthSchedule, Phase


@dataclass(frozen=True)
class GrowthTrainConfig:
    """How to train under a schedule (the optimizer fields mean what they do in TrainConfig; a
    study's growth strategy takes them from the study's ``train:`` recipe, see
    :meth:`from_recipe`; the defaults are those the growth benchmarks were measured with).

    Args:
        batch_size: samples per step.
        eval_batch_size: samples per evaluation batch.
        seed: model init, embedding init and data order.
        eval_every: with a stopper, measure validation AUC every this many steps (and at each
            phase's end); without one, only at the end.
        carry_optimizer: carry the optimizer state of unchanged parameters across boundaries
            (False: every boundary starts all optimizers afresh).
        device: ``cpu`` or ``cuda`` (CUDA is untested here).
    """

    batch_size: int = 1024
    eval_batch_size: int = 8192
    seed: int = 0
    dense_optimizer: str = "adam"
    dense_lr: float = 1e-3
    dense_weight_decay: float = 0.0
    embedding_lr: float = 0.05
    embedding_weight_decay: float = 0.0
    eval_every: int | None = None
    carry_optimizer: bool = True
    device: str = "cpu"

    def __post_init__(self) -> None:
        for name in ("batch_size", "eval_batch_size"):
            if isinstance(getattr(self, name), bool) or getattr(self, name) < 1:
                raise ValueError(f"{name}: expected a positive integer, got {getattr(self, name)!r}")
        if self.eval_every is not None and self.eval_every < 1:
            raise ValueError(f"eval_every: expected a positive integer or None, got {self.eval_every!r}")
        if self.dense_optimizer not in DENSE_OPTIMIZERS:
            raise ValueError(f"dense_optimizer: expected one of {', '.join(DENSE_OPTIMIZERS)}, "
                             f"got {self.dense_optimizer!r}")
        if self.device not in ("cpu", "cuda"):
            raise ValueError(f"device: expected cpu or cuda, got {self.device!r}")
        for name in ("dense_weight_decay", "embedding_weight_decay"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name}: expected a number >= 0, got {getattr(self, name)!r}")

    RECIPE = ("dense_optimizer", "dense_lr", "dense_weight_decay", "embedding_lr", "embedding_weight_decay")

    @classmethod
    def from_recipe(cls, recipe: Any, **fields: Any) -> GrowthTrainConfig:
        """A config whose optimizer fields (``RECIPE``) are those of ``recipe`` (a TrainConfig:
        the study's training), so schedules are searched under the recipe their trial trains
        with; ``fields`` sets the rest. (No learning-rate schedule: schedules train at constant rates.)

        Example:
            >>> from autorec.train.records import TrainConfig
            >>> GrowthTrainConfig.from_recipe(TrainConfig(dense_lr=0.01), batch_size=64).dense_lr
            0.01
        """
        return cls(**{name: getattr(recipe, name) for name in cls.RECIPE}, **fields)


@dataclass
class PhaseRecord:
    """What one phase did: its architecture, steps, time and loss, and the boundary before it."""

    index: int
    start: int
    steps: int
    spec: ArchSpec
    train_flops: int  # the phase's total training FLOPs (autorec.costs.training), steps x batch x per-sample
    seconds: float  # wall-clock of its training steps
    cpu_seconds: float  # process CPU time of its training steps
    train_loss: float
    boundary: str  # "build", "prune", "grow", "prune+grow" or "none"
    carried: int  # parameters whose optimizer state was carried over the boundary
    restarted: int  # parameters whose optimizer state started afresh

    @property
    def step_seconds(self) -> float:
        return self.seconds / self.steps if self.steps else math.nan

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in dataclasses.asdict(self).items() if k != "spec"}
        return {**out, "dense_arch": list(self.spec.dense_arch), "over_arch": list(self.spec.over_arch),
                "step_seconds": self.step_seconds}


@dataclass
class GrowthResult:
    """A run under a schedule. ``spec`` is the full-size architecture, ``schedule`` what trained it;
    ``curve`` the (step, val AUC) points measured; ``stopped_at`` the step an early stop cut the
    run at (None: it ran to the end; then ``val`` and ``test`` are the final model's)."""

    spec: ArchSpec
    schedule: GrowthSchedule
    phases: list[PhaseRecord] = field(default_factory=list)
    curve: list[tuple[int, float]] = field(default_factory=list)
    val: dict[str, float] = field(default_factory=dict)
    test: dict[str, float] = field(default_factory=dict)
    train_flops: int = 0
    dense_train_flops: int = 0  # the full-size model for as many steps
    seconds: float = 0.0
    stopped_at: int | None = None
    model: nn.Module | None = None

    @property
    def flops_ratio(self) -> float:
        return self.train_flops / self.dense_train_flops if self.dense_train_flops else math.nan

    @property
    def val_auc(self) -> float:
        """The last validation AUC measured (the final model's when not stopped early)."""
        return self.curve[-1][1] if self.curve else math.nan

    def to_dict(self) -> dict[str, Any]:
        return {"schedule": self.schedule.to_dict(), "phases": [p.to_dict() for p in self.phases],
                "curve": self.curve, "val": self.val, "test": self.test,
                "train_flops": self.train_flops, "dense_train_flops": self.dense_train_flops,
                "flops_ratio": self.flops_ratio, "seconds": self.seconds, "stopped_at": self.stopped_at}


class CurveStopper:
    """Learning-curve early stopping against a reference curve.

    The reference is the validation curve of the best finished run so far (:meth:`offer`). A
    reduced model lags the full-size one while it is reduced, so only evaluation points where
    the run has been back at full size for ``settle`` of the total steps count: the run stops at
    the first such point (at or after ``min_fraction`` of the total) whose AUC is more than
    ``margin`` below the reference's AUC at the same step.

    Example:
        >>> stopper = CurveStopper(margin=0.01, min_fraction=0.5, settle=0.1)
        >>> stopper.offer([(50, 0.70), (80, 0.74), (100, 0.75)], final=0.75)
        >>> stopper.should_stop(80, 0.70, total=100, full_since=60)
        True
        >>> stopper.should_stop(80, 0.70, total=100, full_since=75)  # just grown: not yet
        False
    """

    def __init__(self, margin: float = 0.01, min_fraction: float = 0.3, settle: float = 0.1) -> None:
        if margin < 0 or not 0 <= min_fraction <= 1 or not 0 <= settle <= 1:
            raise ValueError("expected margin >= 0, min_fraction and settle in [0, 1], got "
                             f"{margin}, {min_fraction}, {settle}")
        self.margin, self.min_fraction, self.settle = margin, min_fraction, settle
        self.reference: dict[int, float] = {}
        self.best = -math.inf

    def offer(self, curve: list[tuple[int, float]], final: float) -> None:
        """A finished run's curve: it becomes the reference when its final AUC is the best."""
        if final > self.best:
            self.best, self.reference = final, dict(curve)

    def should_stop(self, step: int, auc: float, total: int, full_since: int | None = 0) -> bool:
        """Whether a run at ``auc`` after ``step`` of ``total`` steps, at full size since step
        ``full_since`` (None: not at full size), falls behind the reference."""
        if full_since is None or step - full_since < self.settle * total:
            return False
        if step < self.min_fraction * total or step not in self.reference:
            return False
        return not auc >= self.reference[step] - self.margin  # NaN stops


def _batches(dataset: RecDataset, batch_size: int, seed: int) -> Iterator[Batch]:
    """Training batches forever: epoch after epoch, each reshuffled."""
    for epoch in itertools.count():
        yield from dataset.batches("train", batch_size, shuffle=True, seed=seed, epoch=epoch)


def _sample_flops(spec: ArchSpec, config: GrowthTrainConfig) -> int:
    """Total training FLOPs per sample (dense, lookups, both optimizers) at the config's batch."""
    return round(training_flops(spec, config.batch_size, dense_optimizer=config.dense_optimizer).total)


def _optimizers(model: nn.Module, config: GrowthTrainConfig) -> list[torch.optim.Optimizer]:
    tables = [p for n, p in model.named_parameters() if n.startswith("sparse_arch.")]
    dense = [p for n, p in model.named_parameters() if not n.startswith("sparse_arch.")]
    return [RowSparseAdagrad(tables, lr=config.embedding_lr, weight_decay=config.embedding_weight_decay),
            dense_optimizer(config.dense_optimizer, dense, lr=config.dense_lr,
                            weight_decay=config.dense_weight_decay)]


def _carry(old: nn.Module, old_opts: list[torch.optim.Optimizer], new: nn.Module,
           new_opts: list[torch.optim.Optimizer]) -> tuple[int, int]:
    """Copy the optimizer state of every parameter of ``new`` that ``old`` holds under the same
    name with the same shape and values; (carried, restarted) counts."""
    old_params = dict(old.named_parameters())
    state = {id(p): s for opt in old_opts for p, s in opt.state.items()}
    target = {id(p): opt for opt in new_opts for group in opt.param_groups for p in group["params"]}
    carried = restarted = 0
    for name, param in new.named_parameters():
        before = old_params.get(name)
        same = (before is not None and before.shape == param.shape
                and torch.equal(before.detach(), param.detach()))
        if same and id(before) in state:
            target[id(param)].state[param] = {
                k: v.clone() if torch.is_tensor(v) else v for k, v in state[id(before)].items()}
            carried += 1
        else:
            restarted += 1
    return carried, restarted


def _min_widths(a: Phase, b: Phase) -> dict[str, float]:
    """Per part, the narrower of two phases' widths (full parts left out)."""
    parts = {p for p, _ in a.widths} | {p for p, _ in b.widths}
    return {p: min(a.width(p), b.width(p)) for p in parts if min(a.width(p), b.width(p)) < 1.0}


@torch.no_grad()
def evaluate(model: nn.Module, dataset: RecDataset, split: str, batch_size: int,
             device: torch.device) -> dict[str, float]:
    """``binary_metrics`` of ``model`` over a whole split (eval mode, then back to train)."""
    model.eval()
    labels, probs = [], []
    for batch in dataset.batches(split, batch_size, shuffle=False):
        batch = batch.to(device)
        probs.append(torch.sigmoid(model(batch.dense_features, batch.sparse_features)).double().cpu())
        labels.append(batch.labels.cpu())
    model.train()
    p = torch.cat(probs).numpy()
    if not np.isfinite(p).all():
        raise TrainingDiverged(f"the model predicts NaN or infinity on the {split} split")
    return binary_metrics(torch.cat(labels).numpy().astype(np.float32), p)


def train_schedule(spec: ArchSpec, schedule: GrowthSchedule, dataset: RecDataset,
                   config: GrowthTrainConfig | None = None, *, stopper: CurveStopper | None = None,
                   keep_model: bool = False) -> GrowthResult:
    """Train ``spec`` (the full size) under ``schedule`` on ``dataset`` (module docstring).

    Returns the final model's validation and test metrics (validation only when the stopper
    cut the run), per-phase records and the FLOPs spent; ``result.spec`` is ``spec`` and
    ``result.schedule`` the schedule. ``keep_model`` keeps the trained model in ``result.model``.
    """
    from autorec.growth.ops import grow, prune
    from autorec.growth.shrink import shrink

    config = config or GrowthTrainConfig()
    device = torch.device(config.device)
    full = spec
    specs = schedule.phase_specs(full)
    total = schedule.total_steps
    result = GrowthResult(full, schedule,
                          dense_train_flops=total * config.batch_size * _sample_flops(full, config))
    seed_everything(config.seed)
    model = build_model(specs[0], device=device)
    init_embeddings(model, config.seed)
    optimizers = _optimizers(model, config)
    batches = _batches(dataset, config.batch_size, config.seed)
    t_start, step = time.perf_counter(), 0
    eval_every = config.eval_every if stopper is not None else None
    for index, (phase, phase_spec) in enumerate(zip(schedule.phases, specs, strict=True)):
        boundary, carried, restarted = "build", 0, 0
        if index > 0:
            before, cur = schedule.phases[index - 1], specs[index - 1]
            narrow = _min_widths(before, phase)
            middle = shrink(full, narrow) if narrow else full
            boundary = "none"
            new = model
            if middle != cur:
                new = prune(new, cur, middle, method=schedule.method)
                boundary = "prune"
            if middle != phase_spec:
                new = grow(new, middle, phase_spec)
                boundary = "grow" if boundary == "none" else "prune+grow"
            if new is not model:
                new = new.to(device)
                new_opts = _optimizers(new, config)
                if config.carry_optimizer:
                    carried, restarted = _carry(model, optimizers, new, new_opts)
                else:
                    restarted = sum(1 for _ in new.parameters())
                model, optimizers = new, new_opts
        model.train()
        losses: list[float] = []
        wall, cpu = 0.0, 0.0
        for _ in range(phase.steps):
            batch = next(batches).to(device)
            w0, c0 = time.perf_counter(), time.process_time()
            logits = model(batch.dense_features, batch.sparse_features)
            loss = nn.functional.binary_cross_entropy_with_logits(logits, batch.labels)
            for opt in optimizers:
                opt.zero_grad(set_to_none=True)
            loss.backward()
            for opt in optimizers:
                opt.step()
            if device.type == "cuda":
                torch.cuda.synchronize()
            wall += time.perf_counter() - w0
            cpu += time.process_time() - c0
            value = float(loss.detach())
            if not math.isfinite(value):
                raise TrainingDiverged(f"loss is {value} at step {step} (phase {index})")
            losses.append(value)
            step += 1
            last = step == total
            if eval_every and (step % eval_every == 0 or step == _phase_end(schedule, index)) \
                    and not last:
                auc = evaluate(model, dataset, "val", config.eval_batch_size, device)["auc"]
                result.curve.append((step, auc))
                full_since = schedule.starts[index] if phase.full else None
                if stopper is not None and stopper.should_stop(step, auc, total, full_since):
                    result.stopped_at = step
                    break
        flops = len(losses) * config.batch_size * _sample_flops(phase_spec, config)
        result.train_flops += flops
        result.phases.append(PhaseRecord(index, schedule.starts[index], len(losses), phase_spec, flops,
                                         wall, cpu, float(np.mean(losses)) if losses else math.nan,
                                         boundary, carried, restarted))
        if result.stopped_at is not None:
            break
    if result.stopped_at is None:
        result.val = evaluate(model, dataset, "val", config.eval_batch_size, device)
        result.curve.append((step, result.val["auc"]))
        result.test = evaluate(model, dataset, "test", config.eval_batch_size, device)
        if stopper is not None:
            stopper.offer(result.curve, result.val["auc"])
    result.seconds = time.perf_counter() - t_start
    result.model = model if keep_model else None
    return result


def _phase_end(schedule: GrowthSchedule, index: int) -> int:
    """The step count at the end of phase ``index``."""
    return schedule.starts[index] + schedule.phases[index].steps
