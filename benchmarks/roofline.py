"""A roofline floor for one training step: the least time the step's work needs on these cores.

Two rates are measured on the machine, in the run that uses them: the fp32 matrix-product rate
(``torch.mm`` at the MLPs' shapes, with the threads training uses) and the memory bandwidth (a
large ``copy_``: bytes read plus bytes written per second). A step's floor is the larger of

- the **compute floor**: its training FLOPs (:func:`autorec.costs.training_flops`: dense forward
  and backward, the embedding lookups, both optimizers; rows the fused optimizer updates are
  those looked up) over the matrix-product rate, and
- the **memory floor**: the bytes it must move at least once over the bandwidth: every looked-up
  embedding row read in the forward, read and written again with its row-wise Adagrad state by
  the fused update in the backward, the pooled vectors written, and Adam's read of parameters,
  gradients and both moments and its write of parameters and moments.

Activations of the dense part are not counted (at batch 4096 they may or may not stay in cache),
so the floor is a bound the step cannot beat, not a prediction.

Example:
    >>> from autorec.arch import ArchSpec, TableSpec
    >>> spec = ArchSpec(dim=4, tables=(TableSpec(name="t", features=("f",), num_embeddings=10, dim=4),),
    ...                 over_arch=(8,))
    >>> floor = step_floor(spec, batch_size=2, rates=Rates(matmul_flops=1e9, bandwidth=1e9))
    >>> floor.seconds == max(floor.compute_s, floor.memory_s)
    True
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass

import torch

from autorec.arch import ArchSpec
from autorec.costs import arch_cost
from autorec.costs.training import training_flops

FLOAT = 4  # bytes of an fp32 value
ADAM_BYTES_PER_PARAM = 7 * FLOAT  # read parameter, gradient, m, v; write parameter, m, v
ROWWISE_STATE = 1  # values of row-wise Adagrad state per embedding row


@dataclass(frozen=True)
class Rates:
    """What the machine does per second: fp32 matrix-product FLOPs and memory bytes moved."""

    matmul_flops: float
    bandwidth: float


def _best_seconds(work: Callable[[], object], repeats: int) -> float:
    work()  # warm-up: first-touch allocation, kernel selection
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - start)
    return best


def measure_rates(m: int = 4096, k: int = 1024, n: int = 1024, copy_mib: int = 512,
                  repeats: int = 5, dtype: torch.dtype = torch.float32) -> Rates:
    """The ``torch.mm`` rate at [m, k] x [k, n] in ``dtype`` (fp32: the floor's definition; bf16
    for a step under bf16 autocast) and the ``copy_`` bandwidth of ``copy_mib`` MiB, best of
    ``repeats`` (the floor is a best case, so is its rate)."""
    a, b = torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype)
    out = torch.empty(m, n, dtype=dtype)
    mm_s = _best_seconds(lambda: torch.mm(a, b, out=out), repeats)
    src = torch.ones(copy_mib * 2**20 // FLOAT)
    dst = torch.empty_like(src)
    copy_s = _best_seconds(lambda: dst.copy_(src), repeats)
    return Rates(matmul_flops=2.0 * m * k * n / mm_s, bandwidth=2.0 * src.numel() * FLOAT / copy_s)


@dataclass(frozen=True)
class StepFloor:
    """The floor of one step and what it is made of (FLOPs and bytes per step)."""

    flops: float
    bytes: float
    compute_s: float
    memory_s: float

    @property
    def seconds(self) -> float:
        return max(self.compute_s, self.memory_s)

    @property
    def bound(self) -> str:
        return "compute" if self.compute_s >= self.memory_s else "memory"

    def to_dict(self) -> dict[str, float | str]:
        return {**asdict(self), "seconds": self.seconds, "bound": self.bound}


def step_bytes(spec: ArchSpec, batch_size: int, pooling_factors: Mapping[str, float]) -> float:
    """The bytes one training step moves at least once (see the module docstring)."""
    ids = {f: float(pooling_factors.get(f, 1.0)) * batch_size for t in spec.tables for f in t.features}
    rows = 0.0
    pooled = 0.0
    for t in spec.tables:
        for f in t.features:
            # forward read; backward read + write of the row and its state
            rows += ids[f] * (3 * t.dim + 2 * ROWWISE_STATE) * FLOAT
            pooled += batch_size * t.dim * FLOAT
    return rows + pooled + ADAM_BYTES_PER_PARAM * arch_cost(spec, pooling_factors).dense_params


def step_floor(spec: ArchSpec, batch_size: int, rates: Rates,
               pooling_factors: Mapping[str, float] | None = None) -> StepFloor:
    """The roofline floor of one training step of ``spec`` at ``batch_size`` on ``rates``."""
    factors = dict(pooling_factors or {})
    flops = training_flops(spec, batch_size, pooling_factors=factors, touched_rows="looked_up").total
    flops *= batch_size
    moved = step_bytes(spec, batch_size, factors)
    return StepFloor(flops=flops, bytes=moved, compute_s=flops / rates.matmul_flops,
                     memory_s=moved / rates.bandwidth)


def pooling_factors(batches: list) -> dict[str, float]:
    """Mean ids per sample of each sparse feature over ``batches`` (torchrec Batches)."""
    totals: dict[str, float] = {}
    samples = 0
    for batch in batches:
        kjt = batch.sparse_features
        lengths = kjt.lengths().view(len(kjt.keys()), -1).sum(1)
        for key, n in zip(kjt.keys(), lengths.tolist(), strict=True):
            totals[key] = totals.get(key, 0.0) + n
        samples += batch.labels.numel()
    return {k: v / samples for k, v in totals.items()}
