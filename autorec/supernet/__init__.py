"""Differentiable NAS: one weight-sharing supernet over every block of a SearchSpace.

- :mod:`~autorec.supernet.mixed`: choices, Gumbel-softmax weights, width masks, MixedChoice;
- :mod:`~autorec.supernet.ops`: max-size weight-shared ops per block kind;
- :mod:`~autorec.supernet.supernet`: the Supernet module and ``derive() -> ArchSpec``;
- :mod:`~autorec.supernet.cost`: E[cost] from the analytic cost model;
- :mod:`~autorec.supernet.config`: the run's options (SupernetConfig) and its result;
- :mod:`~autorec.supernet.search`: the bilevel training run.
"""

from autorec.supernet.config import SupernetConfig, SupernetResult
from autorec.supernet.cost import ExpectedCost
from autorec.supernet.mixed import Choice, ChoiceSet, MixedChoice, width_mask
from autorec.supernet.search import SupernetSearch
from autorec.supernet.supernet import Supernet, SupernetError

__all__ = [
    "Choice",
    "ChoiceSet",
    "ExpectedCost",
    "MixedChoice",
    "Supernet",
    "SupernetConfig",
    "SupernetError",
    "SupernetResult",
    "SupernetSearch",
    "width_mask",
]
