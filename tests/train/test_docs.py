"""The docstring examples of the parts split out of the trainer run and give what they show."""

from __future__ import annotations

import pytest

from tests.doctests import assert_examples_run

MODULES = ["records", "checkpoints", "waiting", "embedding_optim", "compiled", "progress_bar"]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name: str) -> None:
    assert_examples_run(f"autorec.train.{name}")
