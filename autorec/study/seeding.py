"""Seeding a strategy's sampler per trial, so that a rerun after a kill draws what the uncut run drew.

A sampler seeded once per process draws trial k's proposal from a stream that has advanced k
times; a rerun after kill -9 starts a new process, whose stream cannot continue where the cut
one stood. :class:`TrialSeededSampler` makes the strategy's sampler anew for each trial, seeded
by the study's seed plus the trial's index: its number less the interrupted trials before it
(their retries take the cut trial's parameters, not a draw). An uncut run and a rerun after a
cut therefore draw the same proposal at the same point of the study, and a rerun never replays
an earlier trial's proposal (which would only be reused: :mod:`autorec.study.reuse`). Local
workers add a salt to the seed, far apart from any trial count
(:func:`autorec.study.storage.create_study`).

Example:
    >>> sampler = TrialSeededSampler(lambda seed: optuna.samplers.RandomSampler(seed=seed), 0)
    >>> study = optuna.create_study(sampler=sampler)
    >>> study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=2)
    >>> again = optuna.create_study(sampler=TrialSeededSampler(
    ...     lambda seed: optuna.samplers.RandomSampler(seed=seed), 0))
    >>> again.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=2)
    >>> [t.params for t in study.trials] == [t.params for t in again.trials]
    True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import optuna
from optuna.distributions import BaseDistribution
from optuna.trial import FrozenTrial, TrialState

from autorec.study.recovery import INTERRUPTED_ATTR


def trial_index(study: optuna.Study, trial: FrozenTrial) -> int:
    """``trial``'s place in the study's sequence of draws: its number less the interrupted trials
    numbered before it."""
    cut = sum(1 for t in study.get_trials(deepcopy=False, states=(TrialState.FAIL,))
              if t.number < trial.number and t.user_attrs.get(INTERRUPTED_ATTR))
    return trial.number - cut


class TrialSeededSampler(optuna.samplers.BaseSampler):
    """The sampler ``make(seed)`` builds, built anew before each trial with ``seed`` plus the
    trial's :func:`trial_index` (see the module docstring).

    Args:
        make: builds the strategy's sampler for a seed.
        seed: the study's seed (plus a worker's salt).
    """

    def __init__(self, make: Callable[[int], optuna.samplers.BaseSampler], seed: int) -> None:
        self.make, self.seed = make, seed
        self.current = make(seed)

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self.current = self.make(self.seed + trial_index(study, trial))
        self.current.before_trial(study, trial)

    def infer_relative_search_space(self, study: optuna.Study,
                                    trial: FrozenTrial) -> dict[str, BaseDistribution]:
        return self.current.infer_relative_search_space(study, trial)

    def sample_relative(self, study: optuna.Study, trial: FrozenTrial,
                        search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        return self.current.sample_relative(study, trial, search_space)

    def sample_independent(self, study: optuna.Study, trial: FrozenTrial, param_name: str,
                           param_distribution: BaseDistribution) -> Any:
        return self.current.sample_independent(study, trial, param_name, param_distribution)

    def after_trial(self, study: optuna.Study, trial: FrozenTrial, state: TrialState,
                    values: Sequence[float] | None) -> None:
        self.current.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self.current.reseed_rng()
