"""Search strategies: one base class, looked up by the name a study file gives."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from autorec.config.errors import describe
from autorec.strategies.base import Strategy
from autorec.strategies.dnas import DnasStrategy
from autorec.strategies.growth import GrowthStrategy
from autorec.strategies.ladder import LadderStrategy
from autorec.strategies.oneshot import OneShotStrategy
from autorec.strategies.samplers import NSGA2Strategy, RandomStrategy, TPEStrategy

STRATEGIES: dict[str, type[Strategy]] = {
    cls.name: cls for cls in (RandomStrategy, TPEStrategy, NSGA2Strategy, DnasStrategy, GrowthStrategy,
                              OneShotStrategy, LadderStrategy)
}


def make_strategy(name: str, seed: int = 0, **options: Any) -> Strategy:
    """The strategy called ``name`` (random, tpe, nsga2, dnas, ...)."""
    if name not in STRATEGIES:
        raise ValueError(f"unknown strategy {name!r}; expected one of {', '.join(STRATEGIES)}")
    try:
        return STRATEGIES[name](seed=seed, **options)
    except ValidationError as exc:  # an option of the wrong type (see strategies.base.checked_options)
        raise ValueError(f"strategy {name!r}: {describe(exc)}") from None


__all__ = ["STRATEGIES", "Strategy", "make_strategy"]
