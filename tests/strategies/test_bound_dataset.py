"""Strategies that train on the study's data (dnas, growth) refuse to propose without it."""

from __future__ import annotations

import optuna
import pytest

from autorec.data import load_dataset
from autorec.space import SearchSpace
from autorec.strategies import make_strategy

SPACE = SearchSpace.from_dict({"dim": [8], "dense_arch": [[8]], "over_arch": [[8]],
                               "layers": {"kinds": ["dlrm"]}})


@pytest.mark.parametrize(("name", "why"), [("dnas", "trains a supernet"),
                                           ("growth", "trains schedules")])
def test_proposing_needs_a_bound_dataset_of_the_same_schema(name: str, why: str) -> None:
    data = load_dataset("synthetic", preset="tiny", num_samples=200)
    other = load_dataset("synthetic", preset="order2", num_samples=200)
    strategy = make_strategy(name, seed=0)
    trial = optuna.create_study().ask()
    with pytest.raises(ValueError, match=f"strategy '{name}' {why} on the study's data: "
                                         r"call bind\(dataset\) first"):
        strategy.propose(trial, SPACE, data.schema)
    strategy.bind(other)
    with pytest.raises(ValueError, match=f"strategy '{name}': the bound dataset .* has another "
                                         "schema than the one proposed for"):
        strategy.propose(trial, SPACE, data.schema)
