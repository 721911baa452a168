"""How a supernet run is configured, and what it gives back.

The temperature of the Gumbel-softmax anneals geometrically over the run:

    >>> config = SupernetConfig(steps=3, warmup_steps=0, tau_start=1.0, tau_end=0.25)
    >>> [config.tau(step) for step in range(3)]
    [1.0, 0.5, 0.25]

``weight_sampling: uniform`` draws the WEIGHT step's path uniformly (every value of every choice
equally often, whatever the logits: single-path one-shot training, Guo et al. 2020), while the
architecture step still samples from the logits and descends the same loss, so the cost penalty
still steers them. Under the default ``arch`` both steps sample from the logits, which lets the
architecture step concentrate the weight training on an early favourite (DARTS's fast-learner
bias) and leave the other candidates under-trained.

``arch_estimator: reinforce`` replaces the architecture step's gradient. The straight-through
Gumbel gradient of a hard step only asks whether scaling the sampled candidate's output would
lower the loss, which ranks candidates by output scale as much as by quality (on the planted
teachers the logits then favoured a path that scored worse than the others with its own
weights). REINFORCE instead draws ``arch_samples`` one-hot paths from the logits, scores each
on the same validation batch with forward passes only, and moves the logits along
``sum_s (loss_s - mean of the others' losses) * grad log p(path_s)``: an unbiased estimate of the
gradient of E_path[validation BCE] (the leave-one-out baseline of Kool et al., 2019; REINFORCE
over paths as in ENAS and ProxylessNAS). The cost term stays the exact, differentiable E[cost].

After training, the architecture is chosen by ``selection``: ``argmax`` takes the most probable
value of every choice (DARTS); ``validation`` scores candidate paths with the supernet's
inherited weights on held-out validation batches (SPOS-style, Guo et al. 2020; cf. Wang et al.,
ICLR 2021, on why the logits' argmax is a weak selector): layer by layer, each kind with its
field values tuned one field at a time, the other layers at their current choice, keeping the
path of highest validation AUC. Embedding widths, towers and precisions stay at the argmax.
``penalized`` runs the same search on the architecture step's own objective evaluated at each
one-hot path: validation BCE + ``lambda * (cost / target) ** beta``, lowest first, so that a
supernet trained on uniform paths (where the logits never see lambda) still derives cheaper
architectures as lambda grows and a study over lambda traces the quality-cost front.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from autorec.arch import ArchSpec
from autorec.supernet.cost import COST_METRICS
from autorec.supernet.hashing import HASH_ROWS
from autorec.supernet.widths import WIDTH_COLUMNS

SELECTIONS = ("argmax", "validation", "penalized")  # how fit() turns the trained supernet into an ArchSpec
WEIGHT_SAMPLINGS = ("arch", "uniform")  # how the weight step draws its path
ARCH_ESTIMATORS = ("gumbel", "reinforce")  # how the architecture step gets the logits' gradient
SELECTION_SWEEPS = 3  # most passes over the layers of ``selection: validation``


@dataclass(frozen=True)
class SupernetConfig:
    """How to run the supernet.

    Args:
        steps: weight steps (each followed by an architecture step after ``warmup_steps``).
        warmup_steps: weight-only steps first, so the ops learn before they are judged.
        batch_size: training and validation batch size.
        hard: hard (one-hot, straight-through) Gumbel sampling, else soft.
        tau_start, tau_end: the Gumbel-softmax temperature's geometric schedule.
        dense_lr, embedding_lr: Adam on the dense weights; fused row-wise Adagrad on the tables.
        arch_lr: Adam on the architecture logits.
        cost_metric: flops, params_bytes or embedding_bytes (see :mod:`autorec.supernet.cost`).
        cost_lambda, cost_beta: the penalty ``lambda * (E[cost] / target) ** beta``; 0 turns it off.
        cost_target: the target in the metric's units; None: ``cost_target_ratio`` times E[cost]
            of the uniform start.
        cost_target_ratio: see ``cost_target``.
        record_every: record the probabilities every this many steps.
        selection: ``argmax`` (the most probable choices), ``validation`` (paths scored by
            validation AUC with the supernet's weights) or ``penalized`` (paths scored by
            validation BCE plus the cost penalty; see the module docstring).
        selection_samples: validation samples each path is scored on (``validation`` and
            ``penalized``).
        rescale: RMS-rescale the dlrm/dcnv2 outputs in the mix (see :class:`Supernet`); False
            makes every path the function its derived model computes, for shallow spaces; a
            list of kinds rescales only those.
        width_columns: ``shared`` (each embedding width a prefix of one table) or ``own`` (each
            width its own columns; see :mod:`autorec.supernet.widths`).
        hash_rows: ``shared`` (each hash size the first rows of one table) or ``own`` (each
            its own rows; see :mod:`autorec.supernet.hashing`).
        weight_sampling: ``arch`` (the weight step samples from the logits, as the
            architecture step does) or ``uniform`` (the weight step samples every choice
            uniformly; the architecture step is unchanged; see the module docstring).
        weight_hard: hard (one path) or soft (every candidate) weight steps; None follows
            ``hard``. ``hard: false`` with ``weight_hard: true`` trains one path per weight step
            and scores every candidate in the architecture step: soft architecture gradients at
            about single-path weight cost.
        arch_every: past the warm-up, an architecture step follows every ``arch_every``-th
            weight step (1: every one, as in DARTS).
        arch_estimator: ``gumbel`` (backpropagate the validation loss through the Gumbel-softmax
            weights, straight-through when ``hard``) or ``reinforce`` (score ``arch_samples``
            paths drawn from the logits on one validation batch, forward only, and follow the
            score-function gradient with a leave-one-out baseline; see the module docstring).
        arch_samples: paths per architecture step under ``reinforce`` (at least 2).
        seed: fixes init, batches and Gumbel noise.
    """

    steps: int = 300
    warmup_steps: int = 50
    batch_size: int = 512
    hard: bool = True
    tau_start: float = 5.0
    tau_end: float = 0.5
    dense_lr: float = 1e-3
    embedding_lr: float = 0.05
    arch_lr: float = 0.05
    cost_metric: str = "flops"
    cost_lambda: float = 0.0
    cost_beta: float = 1.0
    cost_target: float | None = None
    cost_target_ratio: float = 1.0
    record_every: int = 10
    selection: str = "argmax"
    selection_samples: int = 20_000
    rescale: bool | tuple[str, ...] = True
    width_columns: str = "shared"
    hash_rows: str = "shared"
    weight_sampling: str = "arch"
    weight_hard: bool | None = None
    arch_every: int = 1
    arch_estimator: str = "gumbel"
    arch_samples: int = 4
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "record_every", "arch_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"supernet {name}: expected an integer >= 1, got {getattr(self, name)}")
        if not 0 <= self.warmup_steps <= self.steps:
            raise ValueError(
                f"supernet warmup_steps: expected 0..steps ({self.steps}), got {self.warmup_steps}"
            )
        if not 0 < self.tau_end <= self.tau_start:
            raise ValueError(
                f"supernet tau: expected 0 < tau_end <= tau_start, got {self.tau_start} -> {self.tau_end}"
            )
        if self.cost_metric not in COST_METRICS:
            raise ValueError(
                f"supernet cost_metric: expected one of {', '.join(COST_METRICS)}, got {self.cost_metric!r}"
            )
        if self.cost_lambda < 0 or self.cost_beta <= 0:
            raise ValueError(
                f"supernet cost: expected lambda >= 0 and beta > 0, got {self.cost_lambda}, {self.cost_beta}"
            )
        if self.cost_target_ratio <= 0:
            raise ValueError(f"supernet cost_target_ratio: expected a positive number, "
                             f"got {self.cost_target_ratio}")
        if self.selection not in SELECTIONS:
            raise ValueError(f"supernet selection: expected one of {', '.join(SELECTIONS)}, "
                             f"got {self.selection!r}")
        if self.weight_sampling not in WEIGHT_SAMPLINGS:
            raise ValueError(f"supernet weight_sampling: expected one of {', '.join(WEIGHT_SAMPLINGS)}, "
                             f"got {self.weight_sampling!r}")
        if self.arch_estimator not in ARCH_ESTIMATORS:
            raise ValueError(f"supernet arch_estimator: expected one of {', '.join(ARCH_ESTIMATORS)}, "
                             f"got {self.arch_estimator!r}")
        if self.arch_samples < 2:
            raise ValueError(f"supernet arch_samples: expected an integer >= 2 (the baseline of each "
                             f"path is the others' mean), got {self.arch_samples}")
        if self.selection_samples < 1:
            raise ValueError(f"supernet selection_samples: expected an integer >= 1, "
                             f"got {self.selection_samples}")
        if self.width_columns not in WIDTH_COLUMNS:
            raise ValueError(f"supernet width_columns: expected one of {', '.join(WIDTH_COLUMNS)}, "
                             f"got {self.width_columns!r}")
        if self.hash_rows not in HASH_ROWS:
            raise ValueError(f"supernet hash_rows: expected one of {', '.join(HASH_ROWS)}, "
                             f"got {self.hash_rows!r}")
        if self.cost_target is not None and self.cost_target <= 0:
            raise ValueError(f"supernet cost_target: expected a positive number, got {self.cost_target}")

    @property
    def weight_step_hard(self) -> bool:
        """Whether the weight step draws one path (``weight_hard``, else ``hard``)."""
        return self.hard if self.weight_hard is None else self.weight_hard

    def arch_step_at(self, step: int) -> bool:
        """Whether weight step ``step`` (0-based) is followed by an architecture step."""
        return step >= self.warmup_steps and (step - self.warmup_steps) % self.arch_every == 0

    def tau(self, step: int) -> float:
        frac = step / max(self.steps - 1, 1)
        return self.tau_start * (self.tau_end / self.tau_start) ** frac


@dataclass
class SupernetResult:
    """What a supernet run gives: the derived spec, and the probabilities over training."""

    spec: ArchSpec
    arch_probs: list[list[dict[str, float]]]  # [layer][record] -> {kind: probability}
    steps: list[int]
    final_probs: dict[str, dict[str, float]]  # choice -> {value: probability}
    expected_cost: float
    cost_target: float
    seconds: float
    step_seconds: float  # mean seconds of one weight + architecture step pair
    config: SupernetConfig
    losses: list[float] = field(default_factory=list)
    argmax_spec: ArchSpec | None = None  # what argmax gives (= spec under selection: argmax)
    selection: list[dict[str, Any]] = field(default_factory=list)  # the paths scored, in order
    selection_seconds: float = 0.0
    weight_counts: list[dict[str, int]] = field(default_factory=list)  # [layer] -> {kind: weight steps}

    def to_dict(self) -> dict[str, Any]:
        return {
            "arch": self.spec.to_dict(),
            "arch_probs": self.arch_probs,
            "steps": self.steps,
            "final_probs": self.final_probs,
            "expected_cost": self.expected_cost,
            "cost_target": self.cost_target,
            "seconds": self.seconds,
            "step_seconds": self.step_seconds,
            "config": asdict(self.config),
            "argmax_arch": None if self.argmax_spec is None else self.argmax_spec.to_dict(),
            "selection": self.selection,
            "selection_seconds": self.selection_seconds,
            "weight_counts": self.weight_counts,
        }
