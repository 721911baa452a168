"""Every supernet module's docstring examples run and give what they show."""

from __future__ import annotations

import pytest

from tests.doctests import assert_examples_run

MODULES = ["mixed", "masked_mlp", "ops", "supernet", "cost", "config", "search", "warm"]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name: str) -> None:
    assert_examples_run(f"autorec.supernet.{name}")
