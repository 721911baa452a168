"""Growth-and-pruning schedules as a study strategy: each trial searches how to train its proposal.

The Optuna sampler (TPE) picks the architecture from the space, as the ``tpe`` strategy does.
Then, on the study's data, the trial trains the dense baseline (that architecture at full size
for ``steps`` steps) and runs a schedule search (:mod:`autorec.growth.search`: ``rl`` or
``tpe``, ``budget`` trained schedules, reward = val AUC - ``lambda`` x FLOPs ratio). The
proposal is the architecture; its best schedule (the baseline's single full-size phase when no
schedule beats it) goes, with the search's summary, into the trial's ``growth`` user attribute
(``growth.best.schedule``), which the report draws and export writes as ``schedule.json``.
With ``retrain: warm`` the study's trainer starts from the model the best schedule trained
(recurring training on the full-size model); with ``scratch`` it trains the architecture anew.

Example (in a study file)::

    strategy:
      name: growth
      options: {search: rl, steps: 400, budget: 8, lambda: 0.01, batch_size: 1024}
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import optuna

from autorec.strategies.base import Strategy, checked_options

if TYPE_CHECKING:
    from autorec.arch import ArchSpec
    from autorec.data import RecDataset
    from autorec.data.schema import Schema
    from autorec.space import SearchSpace

GROWTH_ATTR = "growth"
RETRAIN = ("scratch", "warm")


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"strategy 'growth': {name}: expected a positive integer, got {value!r}")
    return value


class GrowthStrategy(Strategy):
    """Architectures by TPE, each trained under a searched growth schedule (module docstring).

    Args:
        seed: seeds the sampler and (with the trial number) each schedule search.
        search: ``rl`` (REINFORCE policy) or ``tpe`` (Optuna TPE over the schedule space).
        steps: training steps of every schedule (the dense baseline's too).
        budget: trained schedules per trial.
        lambda: weight of the FLOPs ratio in the reward.
        batch_size: samples per training step.
        phases: reduced phases before the final full-size one.
        shares, ratios, min_final: the schedule space (:class:`~autorec.growth.search.ScheduleSpace`).
        early_stopping: learning-curve early stopping against the best curve so far.
        rl_batch_size: schedules per policy update (``rl``).
        retrain: ``scratch`` or ``warm`` (see the module docstring).
        n_startup_trials: random trials before the architecture sampler's TPE starts.
        max_flops_ratio: a training-FLOPs budget (ratio to the dense run, in (0, 1]): only
            schedules within it are trained and picked (``None``: the whole space, and the
            best schedule must beat the dense baseline's reward).

    Example:
        >>> strategy = GrowthStrategy(seed=1, search="tpe", steps=200, budget=4, **{"lambda": 0.02})
        >>> strategy.search, strategy.steps, strategy.budget, strategy.lam
        ('tpe', 200, 4, 0.02)
    """

    name = "growth"

    @checked_options
    def __init__(self, seed: int = 0, search: str = "rl", steps: int = 400, budget: int = 8,
                 batch_size: int = 1024, phases: int = 2, shares: Any = None, ratios: Any = None,
                 min_final: float = 0.2, early_stopping: bool = True, rl_batch_size: int = 4,
                 retrain: str = "scratch", n_startup_trials: int = 5,
                 max_flops_ratio: float | None = None, **options: Any) -> None:
        from autorec.growth.search import SEARCHES

        lam = options.pop("lambda", 0.01)
        super().__init__(seed, **options)
        if search not in SEARCHES:
            raise ValueError(f"strategy 'growth': search: expected one of {', '.join(SEARCHES)}, "
                             f"got {search!r}")
        if retrain not in RETRAIN:
            raise ValueError(f"strategy 'growth': retrain: expected one of {', '.join(RETRAIN)}, "
                             f"got {retrain!r}")
        if isinstance(lam, bool) or not isinstance(lam, (int, float)) or not math.isfinite(lam) or lam < 0:
            raise ValueError(f"strategy 'growth': lambda: expected a number >= 0, got {lam!r}")
        self.search, self.retrain, self.lam = search, retrain, float(lam)
        self.steps = _positive_int("steps", steps)
        self.budget = _positive_int("budget", budget)
        self.batch_size = _positive_int("batch_size", batch_size)
        self.phases = _positive_int("phases", phases)
        self.rl_batch_size = _positive_int("rl_batch_size", rl_batch_size)
        self.n_startup_trials = n_startup_trials
        if max_flops_ratio is not None and (isinstance(max_flops_ratio, bool)
                                            or not isinstance(max_flops_ratio, (int, float))
                                            or not 0 < max_flops_ratio <= 1):
            raise ValueError("strategy 'growth': max_flops_ratio: expected a FLOPs ratio in (0, 1], "
                             f"got {max_flops_ratio!r}")
        self.max_flops_ratio = None if max_flops_ratio is None else float(max_flops_ratio)
        self.shares, self.ratios, self.min_final = shares, ratios, min_final
        self.early_stopping = bool(early_stopping)
        try:  # the schedule space's own checks, now rather than at the first trial
            from autorec.growth.search import ScheduleSpace

            ScheduleSpace((), self.steps, self.phases, min_final=min_final,
                          **({"shares": tuple(shares)} if shares is not None else {}),
                          **({"ratios": tuple(ratios)} if ratios is not None else {}))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"strategy 'growth': {exc}") from None
        self.dataset: RecDataset | None = None
        self.recipe: Any = None  # the study's TrainConfig (bind_training); None: the growth defaults
        self._models: dict[int, Any] = {}

    def bind(self, dataset: RecDataset) -> None:
        self.dataset = dataset

    def bind_training(self, recipe: Any) -> None:
        """Schedules are searched (and a warm retraining trained) under the study's recipe."""
        self.recipe = recipe

    def sampler(self, num_objectives: int) -> optuna.samplers.BaseSampler:
        return optuna.samplers.TPESampler(seed=self.seed, n_startup_trials=self.n_startup_trials,
                                          multivariate=True, group=True)

    def propose(self, trial: optuna.Trial, space: SearchSpace, schema: Schema) -> ArchSpec:
        from autorec.growth.search import search
        from autorec.growth.train import GrowthTrainConfig, train_schedule

        self.bound_dataset(schema, "trains schedules")
        spec = space.suggest(trial, schema)
        seed = self.seed + trial.number
        config = (GrowthTrainConfig(batch_size=self.batch_size, seed=seed) if self.recipe is None
                  else GrowthTrainConfig.from_recipe(self.recipe, batch_size=self.batch_size, seed=seed))
        result, baseline = search(spec, self.dataset, method=self.search, total_steps=self.steps,
                                  budget=self.budget, lam=self.lam, config=config, seed=seed,
                                  phases=self.phases, shares=self.shares, ratios=self.ratios,
                                  min_final=self.min_final, early_stopping=self.early_stopping,
                                  rl_batch_size=self.rl_batch_size, max_ratio=self.max_flops_ratio)
        best = result.best or baseline
        if self.max_flops_ratio is None and best.reward <= baseline.reward:
            best = baseline  # unbudgeted, a schedule must beat the dense run; budgeted, it is in budget
        trial.set_user_attr(GROWTH_ATTR, {
            "search": self.search, "lambda": self.lam, "steps": self.steps, "budget": self.budget,
            "max_flops_ratio": self.max_flops_ratio,
            "recipe": {name: getattr(config, name) for name in GrowthTrainConfig.RECIPE},
            "best": best.to_dict(), "baseline": baseline.to_dict(),
            "trained": len(result.evaluations),
            "stopped_early": sum(e.stopped_at is not None for e in result.evaluations),
            "seconds": result.seconds + baseline.seconds})
        self._models = {}
        if self.retrain == "warm":
            run = train_schedule(spec, best.schedule, self.dataset, config, keep_model=True)
            self._models[trial.number] = run.model
        return spec

    costly_proposals = True  # a supernet (schedule search) per trial

    def warm_starts(self, trial: optuna.Trial) -> bool:
        return trial.number in self._models

    def prepare_trainer(self, trial: optuna.Trial, trainer: Any) -> None:
        """With ``retrain: warm``, start the study's model from the schedule-trained one."""
        model = self._models.pop(trial.number, None)
        if model is not None:
            from autorec.supernet.warm import warm_start

            trial.set_user_attr("warm_started", warm_start(model, trainer.model))
