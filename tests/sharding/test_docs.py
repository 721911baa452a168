"""Every sharding module's docstring examples run and give what they show."""

from __future__ import annotations

import pytest

from tests.doctests import assert_examples_run

MODULES = ["tables", "cost_model", "profiler", "base", "policy", "episodes", "objectives", "planner",
           "training", "plans", "baselines", "topology", "polished"]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name: str) -> None:
    assert_examples_run(f"autorec.sharding.{name}")
