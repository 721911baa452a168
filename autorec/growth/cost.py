"""Training-cost model of a growth schedule: FLOPs and step time of each phase's architecture.

A schedule's training cost is the sum over its phases of (steps x batch) samples at the phase
architecture's total training FLOPs per sample (:func:`autorec.costs.training.training_flops`:
forward + backward of the dense part, the embedding lookups, and both optimizers' updates, the
per-step ones shared by the batch), and of steps x the phase architecture's step time. Step
times are measured (one forward, backward and optimizer step on a real batch, minimum of
``repeats``) for each phase architecture the model is asked about, at most once per
architecture, or, with ``measure=False``, predicted by a line ``seconds = a + b * FLOPs``
fitted to the architectures measured so far. Scoring a schedule needs no training, so a search
ranks schedules by cost before (and instead of) training them.

Example:
    >>> from autorec.arch import ArchSpec, TableSpec
    >>> from autorec.growth.schedule import GrowthSchedule, Phase
    >>> spec = ArchSpec(dim=8, tables=(TableSpec(name="t", features=("f",), num_embeddings=10, dim=8),),
    ...                 over_arch=(64, 32))
    >>> model = TrainingCostModel(spec, batch_size=256, measure=False)
    >>> dense = model.cost(GrowthSchedule.full_size(100))
    >>> dense.flops == 100 * 256 * round(training_flops(spec, 256).total)
    True
    >>> half = model.cost(GrowthSchedule((Phase(50, {"over_arch": 0.5}), Phase(50))))
    >>> 0.5 < half.flops / dense.flops < 1.0
    True
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from autorec.costs.training import training_flops

if TYPE_CHECKING:
    from torchrec.datasets.utils import Batch

    from autorec.arch import ArchSpec
    from autorec.growth.schedule import GrowthSchedule


@dataclass(frozen=True)
class PhaseCost:
    """One phase: its architecture's training FLOPs per sample and step time.

    ``step_seconds`` is measured when ``measured``, else predicted (NaN when nothing was
    measured to predict from)."""

    steps: int
    samples: int
    train_flops_per_sample: int
    step_seconds: float
    measured: bool

    @property
    def flops(self) -> int:
        return self.samples * self.train_flops_per_sample

    @property
    def seconds(self) -> float:
        return self.steps * self.step_seconds


@dataclass(frozen=True)
class ScheduleCost:
    """The training cost of a whole schedule: FLOPs (dense part) and estimated seconds."""

    phases: tuple[PhaseCost, ...]

    @property
    def flops(self) -> int:
        return sum(p.flops for p in self.phases)

    @property
    def seconds(self) -> float:
        return sum(p.seconds for p in self.phases)

    def to_dict(self) -> dict[str, Any]:
        return {"flops": self.flops, "seconds": self.seconds,
                "phases": [{"steps": p.steps, "train_flops_per_sample": p.train_flops_per_sample,
                            "step_seconds": p.step_seconds, "measured": p.measured}
                           for p in self.phases]}


def measure_train_step(spec: ArchSpec, batch: Batch, repeats: int = 5, warmup: int = 2) -> float:
    """Minimum wall-clock seconds of one training step (forward, backward, Adam step on every
    parameter) of a freshly built ``spec`` model on ``batch``; CPU or the batch's device.

    Example:
        >>> from autorec.data import load_dataset
        >>> from autorec.presets import preset
        >>> ds = load_dataset("synthetic", preset="tiny", num_samples=200)
        >>> batch = next(iter(ds.batches("train", 64, shuffle=False)))
        >>> measure_train_step(preset("dlrm", ds.schema), batch, repeats=2) > 0
        True
    """
    from autorec.models import build_model

    if repeats < 1 or warmup < 0:
        raise ValueError(f"expected repeats >= 1 and warmup >= 0, got {repeats} and {warmup}")
    device = batch.labels.device
    model = build_model(spec, device=device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    best = math.inf
    for i in range(warmup + repeats):
        sync()
        start = time.perf_counter()
        logits = model(batch.dense_features, batch.sparse_features)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, batch.labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        sync()
        if i >= warmup:
            best = min(best, time.perf_counter() - start)
    return best


class TrainingCostModel:
    """Scores growth schedules of the full-size ``spec`` (see the module docstring).

    Args:
        spec: the full-size architecture the schedules end at.
        batch_size: samples per step.
        batch: a training batch to time steps on (needed when ``measure``).
        measure: time each new phase architecture (else predict from the fitted line).
        repeats: timed steps per measurement (the minimum is kept).
    """

    def __init__(self, spec: ArchSpec, batch_size: int, *, batch: Batch | None = None,
                 measure: bool = True, repeats: int = 5) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size: expected a positive integer, got {batch_size}")
        if measure and batch is None:
            raise ValueError("measure=True needs a batch to time training steps on")
        self.spec = spec
        self.batch_size, self.batch, self.measure, self.repeats = batch_size, batch, measure, repeats
        self.step_seconds: dict[ArchSpec, float] = {}  # measured, per phase architecture

    def train_flops(self, spec: ArchSpec) -> int:
        """Total training FLOPs per sample of one architecture: dense, lookups and optimizers
        (:func:`autorec.costs.training.training_flops` at this batch size)."""
        return round(training_flops(spec, self.batch_size).total)

    def fit(self) -> tuple[float, float]:
        """``(a, b)`` of ``seconds = a + b * train FLOPs per sample`` over the measured
        architectures (least squares; one measurement: a line through the origin)."""
        if not self.step_seconds:
            return math.nan, math.nan
        x = torch.tensor([float(self.train_flops(s)) for s in self.step_seconds], dtype=torch.float64)
        y = torch.tensor(list(self.step_seconds.values()), dtype=torch.float64)
        if len(x) == 1 or float(x.max() - x.min()) == 0.0:
            return 0.0, float(y.mean() / x.mean()) if float(x.mean()) else 0.0
        design = torch.stack([torch.ones_like(x), x], 1)
        a, b = torch.linalg.lstsq(design, y.unsqueeze(1)).solution.squeeze(1).tolist()
        return a, b

    def seconds(self, spec: ArchSpec) -> tuple[float, bool]:
        """(step seconds of ``spec``, whether measured)."""
        if spec in self.step_seconds:
            return self.step_seconds[spec], True
        if self.measure and self.batch is not None:
            self.step_seconds[spec] = measure_train_step(spec, self.batch, self.repeats)
            return self.step_seconds[spec], True
        a, b = self.fit()
        return a + b * self.train_flops(spec), False

    def cost(self, schedule: GrowthSchedule) -> ScheduleCost:
        """FLOPs and seconds of training ``self.spec`` under ``schedule``."""
        phases = []
        for phase, spec in zip(schedule.phases, schedule.phase_specs(self.spec), strict=True):
            seconds, measured = self.seconds(spec)
            phases.append(PhaseCost(phase.steps, phase.steps * self.batch_size, self.train_flops(spec),
                                    seconds, measured))
        return ScheduleCost(tuple(phases))

    def flops_ratio(self, schedule: GrowthSchedule) -> float:
        """Training FLOPs of ``schedule`` over those of the full-size model for as many steps."""
        dense = schedule.total_steps * self.batch_size * self.train_flops(self.spec)
        return self.cost(schedule).flops / dense
