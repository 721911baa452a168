"""Strategies that are an Optuna sampler over the space: random, TPE and NSGA-II."""

from __future__ import annotations

from typing import Any

import optuna

from autorec.strategies.base import Strategy, checked_options


class RandomStrategy(Strategy):
    """Uniform random architectures: the baseline every other strategy must beat."""

    name = "random"

    def sampler(self, num_objectives: int) -> optuna.samplers.BaseSampler:
        return optuna.samplers.RandomSampler(seed=self.seed)


class TPEStrategy(Strategy):
    """Tree-structured Parzen estimator (multivariate, grouped for the conditional space)."""

    name = "tpe"

    @checked_options
    def __init__(self, seed: int = 0, n_startup_trials: int = 5, **options: Any) -> None:
        super().__init__(seed, **options)
        self.n_startup_trials = n_startup_trials

    def sampler(self, num_objectives: int) -> optuna.samplers.BaseSampler:
        return optuna.samplers.TPESampler(seed=self.seed, n_startup_trials=self.n_startup_trials,
                                          multivariate=True, group=True)


class NSGA2Strategy(Strategy):
    """NSGA-II: a genetic algorithm for multi-objective (quality against cost) studies."""

    name = "nsga2"

    @checked_options
    def __init__(self, seed: int = 0, population_size: int = 8, **options: Any) -> None:
        super().__init__(seed, **options)
        self.population_size = population_size

    def sampler(self, num_objectives: int) -> optuna.samplers.BaseSampler:
        return optuna.samplers.NSGAIISampler(seed=self.seed, population_size=self.population_size)
