"""Total training FLOPs of an ArchSpec: the dense part, the embedding lookups and the optimizers.

:func:`autorec.costs.arch_cost` counts the dense matrix products (``train_flops`` = 3 x forward).
A training step does more than that, and a claim about training compute (a growth schedule's
saving, a scaling ladder's x axis) must count it all:

- **dense** forward and backward: ``ArchCost.train_flops`` per sample;
- **embedding lookups**: sum pooling adds ``ids x dim`` per feature and sample in the forward,
  and the backward scatters as many gradient values into the tables (``2 x ids x dim``);
- **optimizer updates**, per step and so divided by the batch size per sample: Adam over every
  dense parameter (``ADAM_FLOPS_PER_PARAM``: two moment updates, a square root, a division, the
  update; Adagrad has its own count), and row-wise Adagrad over the embedding rows it updates
  (``ROWWISE_ADAGRAD_FLOPS_PER_ELEMENT`` per element: the squared gradient, its row mean, the
  scale and the update). ``touched_rows="all"`` counts every row of every table each step, which
  is what an optimizer over dense table gradients does (torchrec's python ``RowWiseAdagrad`` in
  the growth trainer); ``"looked_up"`` counts only the rows of the batch's ids (an upper bound:
  duplicates counted), what fused in-backward kernels update.

Element-wise work inside the dense part (activations, normalisation) stays uncounted, as in every
FLOP counter of its kind.

Example:
    >>> from autorec.arch import ArchSpec, TableSpec
    >>> spec = ArchSpec(dim=4, tables=(TableSpec(name="t", features=("f",), num_embeddings=10, dim=4),),
    ...                 over_arch=(8,))
    >>> flops = training_flops(spec, batch_size=2)
    >>> flops.dense == 3 * 2 * (4 * 8 + 8 * 1)
    True
    >>> flops.lookup, flops.embedding_optimizer  # 2 x 1 id x 4; 4 x 40 elements / 2 samples
    (8.0, 80.0)
    >>> flops.total == flops.dense + flops.lookup + flops.dense_optimizer + flops.embedding_optimizer
    True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Literal

from autorec.arch import ArchSpec
from autorec.costs.analytic import arch_cost

ADAM_FLOPS_PER_PARAM = 12  # m: 3, v: 4, sqrt + eps: 2, p -= lr * m / denom: 3
DENSE_OPTIMIZER_FLOPS_PER_PARAM = {"adam": ADAM_FLOPS_PER_PARAM,
                                   "adagrad": 6}  # state += g^2: 2, sqrt + eps: 2, p -= lr g / s: 2
ROWWISE_ADAGRAD_FLOPS_PER_ELEMENT = 4  # g^2, its share of the row mean, scale, update
LOOKUP_FLOPS_PER_VALUE = 2  # one add in the forward pooling, one in the backward scatter


@dataclass(frozen=True)
class TrainingFlops:
    """FLOPs of one training sample, by where they are spent (see the module docstring)."""

    dense: float
    lookup: float
    dense_optimizer: float
    embedding_optimizer: float

    @property
    def total(self) -> float:
        return self.dense + self.lookup + self.dense_optimizer + self.embedding_optimizer

    def to_dict(self) -> dict[str, float]:
        return {**asdict(self), "total": self.total}


def training_flops(spec: ArchSpec, batch_size: int, *,
                   pooling_factors: Mapping[str, float] | None = None,
                   touched_rows: Literal["all", "looked_up"] = "all",
                   dense_optimizer: str = "adam") -> TrainingFlops:
    """Training FLOPs per sample of ``spec`` at ``batch_size`` samples per step.

    Args:
        spec: the architecture.
        batch_size: samples per optimizer step (the optimizers' per-step work is shared by them).
        pooling_factors: mean ids per sample of each sparse feature (1 where left out).
        touched_rows: which embedding rows the embedding optimizer updates each step.
        dense_optimizer: ``adam`` or ``adagrad`` (the trainers' dense optimizers).
    """
    if batch_size < 1:
        raise ValueError(f"batch_size: expected a positive integer, got {batch_size}")
    if touched_rows not in ("all", "looked_up"):
        raise ValueError(f"touched_rows: expected 'all' or 'looked_up', got {touched_rows!r}")
    if dense_optimizer not in DENSE_OPTIMIZER_FLOPS_PER_PARAM:
        raise ValueError(f"dense_optimizer: expected one of {sorted(DENSE_OPTIMIZER_FLOPS_PER_PARAM)}, "
                         f"got {dense_optimizer!r}")
    cost = arch_cost(spec, pooling_factors)
    factors = pooling_factors or {}
    values = sum(float(factors.get(f, 1.0)) * t.dim for t in spec.tables for f in t.features)
    if touched_rows == "all":
        updated = float(cost.embedding_params) / batch_size
    else:
        updated = values
    per_param = DENSE_OPTIMIZER_FLOPS_PER_PARAM[dense_optimizer]
    return TrainingFlops(dense=float(cost.train_flops), lookup=LOOKUP_FLOPS_PER_VALUE * values,
                         dense_optimizer=per_param * cost.dense_params / batch_size,
                         embedding_optimizer=ROWWISE_ADAGRAD_FLOPS_PER_ELEMENT * updated)
