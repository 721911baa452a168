"""Search for growth schedules: an RL policy (REINFORCE, :mod:`autorec.rl`) and Optuna TPE over
one schedule space, rewarded by final validation AUC minus a training-cost penalty.

The space (:class:`ScheduleSpace`): up to ``phases`` reduced phases, each a share of the step
budget (the growth points) and a width ratio per prunable part of the model (the prune ratios),
then a final full-size phase with the remaining steps (at least ``min_final`` of them). One
schedule is a sequence of discrete decisions::

    phase0.share, phase0.<part> for each part, phase1.share, phase1.<part>, ...

The reward of a schedule is ``val AUC - lambda * FLOPs ratio``: the final model's validation
AUC after training under the schedule (:func:`autorec.growth.train.train_schedule`) and its
training FLOPs over the full-size model's for the same steps (:class:`TrainingCostModel`, no
training needed). Kept cheap: every distinct schedule is trained at most once (equal schedules
share one evaluation; schedules that are the dense baseline take its run), and learning-curve
early stopping (:class:`~autorec.growth.train.CurveStopper`) cuts runs that fall behind the best
curve so far. ``budget`` counts trained schedules; RL and TPE get the same. Given a FLOPs budget
(``max_ratio``), schedules above it are answered without training (a schedule's FLOPs are known
before it runs), so every training goes to a schedule that can be picked.

Example:
    >>> space = ScheduleSpace(parts=("over_arch",), total_steps=100, phases=1,
    ...                       shares=(0.0, 0.5), ratios=(0.5, 1.0))
    >>> [name for name, _ in space.decisions]
    ['phase0.share', 'phase0.over_arch']
    >>> space.decode([1, 0]).to_dict()["phases"]
    [{'steps': 50, 'widths': {'over_arch': 0.5}}, {'steps': 50, 'widths': {}}]
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import optuna
import torch
from torch import nn

from autorec.growth.schedule import GrowthSchedule
from autorec.growth.space import ScheduleSpace, fit_budget
from autorec.rl import PolicyGradient, Rollout, masked_categorical

if TYPE_CHECKING:
    from autorec.arch import ArchSpec
    from autorec.data import RecDataset
    from autorec.growth.cost import TrainingCostModel
    from autorec.growth.train import CurveStopper, GrowthResult, GrowthTrainConfig

SEARCHES = ("rl", "tpe")
INFEASIBLE = -1.0  # the reward of a schedule over the evaluator's FLOPs budget (AUC is in [0, 1])


def prunable_parts(spec: ArchSpec) -> tuple[str, ...]:
    """The parts of ``spec`` that :func:`autorec.growth.shrink.shrink` makes narrower at ratio 0.5
    and that the growth operations can prune and grow back (a dlrm layer's input rows cannot).

    Example:
        >>> from autorec.data import Schema, SparseFeature
        >>> from autorec.presets import preset
        >>> spec = preset("dlrm", Schema(("x",), (SparseFeature("u", 5), SparseFeature("i", 7))))
        >>> prunable_parts(spec)
        ('dense_arch', 'over_arch')
    """
    from autorec.growth.plan import build_plan
    from autorec.growth.shrink import shrink

    names = [*(["dense_arch"] if spec.n_dense and spec.dense_arch else []),
             *(f"layers.{i}" for i in range(len(spec.layers))), "over_arch"]
    out = []
    for name in names:
        try:
            small = shrink(spec, {name: 0.5})
            if small == spec:
                continue
            build_plan(spec, small)  # prune and grow both need the plan (a GrowthError if not)
            build_plan(small, spec)
        except (ValueError, NotImplementedError):
            continue
        out.append(name)
    return tuple(out)


class SchedulePolicy(nn.Module):
    """An autoregressive policy over a :class:`ScheduleSpace`'s decisions.

    Decision ``i`` is drawn from ``heads[i](tanh(W x))`` where ``x`` [1, sum of choice counts +
    decisions] one-hot encodes the choices made so far and the position ``i``.

    Example:
        >>> space = ScheduleSpace(parts=("over_arch",), total_steps=100)
        >>> policy = SchedulePolicy(space)
        >>> actions, log_prob, entropy = policy.act(torch.Generator().manual_seed(0))
        >>> len(actions) == len(space.decisions), log_prob.shape
        (True, torch.Size([]))
    """

    def __init__(self, space: ScheduleSpace, hidden: int = 64) -> None:
        super().__init__()
        self.space = space
        self.sizes = [len(c) for _, c in space.decisions]
        self.offsets = [sum(self.sizes[:i]) for i in range(len(self.sizes))]
        self.inputs = sum(self.sizes) + len(self.sizes)
        self.body = nn.Sequential(nn.Linear(self.inputs, hidden), nn.Tanh())
        self.heads = nn.ModuleList(nn.Linear(hidden, n) for n in self.sizes)

    def act(self, generator: torch.Generator | None = None,
            greedy: bool = False) -> tuple[list[int], torch.Tensor, torch.Tensor]:
        """(choice indices, summed log-prob, summed entropy) of one schedule."""
        x = torch.zeros(self.inputs)
        actions: list[int] = []
        values: list[float] = []
        log_prob, entropy = torch.zeros(()), torch.zeros(())
        for i, (_, choices) in enumerate(self.space.decisions):
            position = x.clone()
            position[sum(self.sizes) + i] = 1.0
            logits = self.heads[i](self.body(position))
            mask = torch.tensor(self.space.allowed(i, values))
            action, lp, ent = masked_categorical(logits, mask, greedy=greedy, generator=generator)
            a = int(action)
            actions.append(a)
            values.append(choices[a])
            x[self.offsets[i] + a] = 1.0
            log_prob, entropy = log_prob + lp, entropy + ent
        return actions, log_prob, entropy


@dataclass
class Evaluation:
    """One schedule's score: reward = val AUC - lambda x FLOPs ratio."""

    schedule: GrowthSchedule
    flops_ratio: float
    val_auc: float
    test_auc: float
    reward: float
    stopped_at: int | None
    seconds: float
    trained: bool  # False when its score came from another evaluation (the dense baseline)
    result: GrowthResult | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"schedule": self.schedule.to_dict(), "flops_ratio": self.flops_ratio,
                "val_auc": self.val_auc, "test_auc": self.test_auc, "reward": self.reward,
                "stopped_at": self.stopped_at, "seconds": self.seconds, "trained": self.trained}


class ScheduleEvaluator:
    """Trains and scores schedules of ``spec`` on ``dataset``, each distinct one at most once.

    Args:
        spec: the full-size architecture.
        dataset: its train split trains, val scores; test is recorded, never used to choose.
        space: the schedule space (its ``total_steps`` is every run's budget).
        config: how to train (batch size, optimizers, ``eval_every`` for early stopping).
        cost_model: scores each schedule's FLOPs before training.
        lam: the cost penalty's weight.
        budget: trained schedules allowed (:attr:`exhausted` after that many).
        stopper: learning-curve early stopping (None: every run trains to the end).
        baseline: the dense baseline's evaluation (its schedule is then never trained again).
        on_trained: called with each new evaluation (progress logs).
        max_ratio: a training-FLOPs budget (ratio to the dense run): a schedule above it is never
            trained (its FLOPs are known beforehand) and scores :data:`INFEASIBLE` minus its cost
            penalty, so the whole budget of trainings goes to schedules that can be picked.
    """

    def __init__(self, spec: ArchSpec, dataset: RecDataset, space: ScheduleSpace,
                 config: GrowthTrainConfig, cost_model: TrainingCostModel, *, lam: float = 0.01,
                 budget: int = 16, stopper: CurveStopper | None = None,
                 baseline: Evaluation | None = None,
                 on_trained: Callable[[Evaluation], None] | None = None,
                 max_ratio: float | None = None) -> None:
        if budget < 1:
            raise ValueError(f"budget: expected a positive number of trained schedules, got {budget}")
        if not math.isfinite(lam) or lam < 0:
            raise ValueError(f"lambda: expected a finite weight >= 0, got {lam}")
        if max_ratio is not None and not 0 < max_ratio <= 1:
            raise ValueError(f"max_ratio: expected a FLOPs ratio in (0, 1], got {max_ratio}")
        self.max_ratio = max_ratio
        self.over_budget: list[GrowthSchedule] = []  # requests over max_ratio, answered untrained
        self.spec, self.dataset, self.space, self.config = spec, dataset, space, config
        self.cost_model, self.lam, self.budget, self.stopper = cost_model, lam, budget, stopper
        self.cache: dict[GrowthSchedule, Evaluation] = {}
        self.trained: list[Evaluation] = []  # in training order
        self.requests = 0
        self.on_trained = on_trained
        if baseline is not None:
            self.cache[baseline.schedule] = baseline

    @property
    def exhausted(self) -> bool:
        return len(self.trained) >= self.budget

    def __call__(self, schedule: GrowthSchedule) -> Evaluation:
        from autorec.growth.train import train_schedule

        self.requests += 1
        ratio = self.cost_model.flops_ratio(schedule)
        if self.max_ratio is not None and ratio > self.max_ratio + 1e-9:
            self.over_budget.append(schedule)
            return Evaluation(schedule, ratio, math.nan, math.nan, INFEASIBLE - self.lam * ratio,
                              None, 0.0, False)
        if schedule in self.cache:
            return self.cache[schedule]
        result = train_schedule(self.spec, schedule, self.dataset, self.config, stopper=self.stopper)
        test = result.test.get("auc", math.nan)
        evaluation = Evaluation(schedule, ratio, result.val_auc, test,
                                result.val_auc - self.lam * ratio, result.stopped_at, result.seconds,
                                True, result)
        if not math.isfinite(evaluation.reward):
            evaluation.reward = -1.0 - self.lam * ratio  # NaN AUC (one class): worst
        self.cache[schedule] = evaluation
        self.trained.append(evaluation)
        if self.on_trained is not None:
            self.on_trained(evaluation)
        return evaluation


@dataclass
class SearchResult:
    """A search's trained evaluations in order, its best by reward among the runs that finished,
    and its per-iteration statistics (RL) or per-trial values (TPE)."""

    method: str
    evaluations: list[Evaluation]
    best: Evaluation | None
    history: list[dict[str, float]] = field(default_factory=list)
    requests: int = 0
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "best": self.best.to_dict() if self.best else None,
                "evaluations": [e.to_dict() for e in self.evaluations], "requests": self.requests,
                "seconds": self.seconds}


def _best(evaluations: Sequence[Evaluation]) -> Evaluation | None:
    finished = [e for e in evaluations if e.stopped_at is None]
    return max(finished, key=lambda e: e.reward) if finished else None


def rl_search(evaluator: ScheduleEvaluator, *, batch_size: int = 4, lr: float = 0.02,
              entropy_weight: float = 0.02, seed: int = 0, max_iterations: int | None = None,
              hidden: int = 64) -> SearchResult:
    """REINFORCE over the evaluator's space until its budget of trained schedules is spent
    (or ``max_iterations`` updates: equal schedules are not trained again, so a converged policy
    would otherwise never spend it). The last batch may train up to ``batch_size - 1`` more than
    the budget; compare against TPE with ``len(result.evaluations)`` as its budget."""
    torch.manual_seed(seed)
    policy = SchedulePolicy(evaluator.space, hidden)
    trainer = PolicyGradient(policy, lr=lr, entropy_weight=entropy_weight, baseline="batch")
    start = time.perf_counter()

    def rollout(generator: torch.Generator) -> Rollout:
        actions, log_prob, entropy = policy.act(generator)
        evaluation = evaluator(evaluator.space.decode(actions))
        return Rollout(log_prob, entropy, evaluation.reward, evaluation)

    limit = max_iterations or 50 * evaluator.budget
    history = trainer.fit(rollout, iterations=limit, batch_size=batch_size, seed=seed,
                          callback=lambda i, stats: evaluator.exhausted)
    return SearchResult("rl", list(evaluator.trained), _best(evaluator.trained), history,
                        evaluator.requests, time.perf_counter() - start)


def tpe_search(evaluator: ScheduleEvaluator, *, seed: int = 0, n_startup_trials: int | None = None,
               max_trials: int | None = None) -> SearchResult:
    """Optuna TPE over the same decisions (one categorical each; shares past the budget are cut
    to fit, as the RL policy's mask forbids them) until the budget of trained schedules is spent.
    Under the evaluator's FLOPs budget a proposal over it is narrowed onto the budget
    (:func:`fit_budget`) and that schedule is scored, rather than answering it as infeasible:
    a -1 pushes TPE's density model away from the budget's edge, where the best schedules lie."""
    startup = n_startup_trials if n_startup_trials is not None else max(2, evaluator.budget // 3)
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(
        seed=seed, n_startup_trials=startup, multivariate=True))
    start = time.perf_counter()

    def objective(trial: optuna.Trial) -> float:
        values = [trial.suggest_categorical(name, list(choices))
                  for name, choices in evaluator.space.decisions]
        schedule = evaluator.space.schedule(values)
        if evaluator.max_ratio is not None:
            fitted = fit_budget(evaluator.space, values, evaluator.cost_model.flops_ratio,
                                evaluator.max_ratio)
            trial.set_user_attr("narrowed_to_budget", fitted is not None and fitted != schedule)
            schedule = fitted or schedule
        evaluation = evaluator(schedule)
        trial.set_user_attr("flops_ratio", evaluation.flops_ratio)
        return evaluation.reward

    def stop(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        if evaluator.exhausted:
            study.stop()

    study.optimize(objective, n_trials=max_trials or 50 * evaluator.budget, callbacks=[stop])
    history = [{"trial": t.number, "reward": float(t.value)} for t in study.trials if t.value is not None]
    return SearchResult("tpe", list(evaluator.trained), _best(evaluator.trained), history,
                        evaluator.requests, time.perf_counter() - start)


def baseline_evaluation(spec: ArchSpec, dataset: RecDataset, total_steps: int, config: GrowthTrainConfig,
                        *, lam: float = 0.01, stopper: CurveStopper | None = None) -> Evaluation:
    """The dense baseline: ``spec`` at full size for ``total_steps``; its validation curve (every
    ``config.eval_every`` steps) becomes ``stopper``'s reference."""
    from autorec.growth.train import CurveStopper, train_schedule

    schedule = GrowthSchedule.full_size(total_steps)
    result = train_schedule(spec, schedule, dataset, config, stopper=stopper or CurveStopper())
    return Evaluation(schedule, 1.0, result.val_auc, result.test.get("auc", math.nan),
                      result.val_auc - lam, None, result.seconds, True, result)


def search(spec: ArchSpec, dataset: RecDataset, *, method: str = "rl", total_steps: int = 1000,
           budget: int = 16, lam: float = 0.01, config: GrowthTrainConfig | None = None,
           seed: int = 0, phases: int = 2, shares: Sequence[float] | None = None,
           ratios: Sequence[float] | None = None, min_final: float = 0.2,
           early_stopping: bool = True, margin: float = 0.01, rl_batch_size: int = 4,
           max_ratio: float | None = None) -> tuple[SearchResult, Evaluation]:
    """One schedule search for ``spec`` on ``dataset``: the dense baseline, then ``method``
    (``rl`` or ``tpe``) with ``budget`` trained schedules. With ``max_ratio`` (a training-FLOPs
    budget) only schedules within it are trained, and early stopping measures them against the
    best of them that finished, not against the dense run (which lies outside the budget and
    which a cheap schedule trails until its last phase). Returns (search, baseline)."""
    from autorec.growth.cost import TrainingCostModel
    from autorec.growth.train import CurveStopper, GrowthTrainConfig

    if method not in SEARCHES:
        raise ValueError(f"method: expected one of {', '.join(SEARCHES)}, got {method!r}")
    config = config or GrowthTrainConfig(seed=seed)
    if early_stopping and config.eval_every is None:
        config = dataclasses.replace(config, eval_every=max(1, total_steps // 10))
    kwargs: dict[str, Any] = {"phases": phases, "min_final": min_final}
    if shares is not None:
        kwargs["shares"] = tuple(shares)
    if ratios is not None:
        kwargs["ratios"] = tuple(ratios)
    space = ScheduleSpace(prunable_parts(spec), total_steps, **kwargs)
    stopper = CurveStopper(margin) if early_stopping else None
    baseline = baseline_evaluation(spec, dataset, total_steps, config, lam=lam,
                                   stopper=stopper if max_ratio is None else None)
    cost = TrainingCostModel(spec, config.batch_size, measure=False)
    evaluator = ScheduleEvaluator(spec, dataset, space, config, cost, lam=lam, budget=budget,
                                  stopper=stopper, baseline=baseline, max_ratio=max_ratio)
    if not space.parts:  # nothing to prune: the dense schedule is the only one
        return SearchResult(method, [], baseline), baseline
    if method == "rl":
        return rl_search(evaluator, batch_size=rl_batch_size, seed=seed), baseline
    return tpe_search(evaluator, seed=seed), baseline
