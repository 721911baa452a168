"""The docstring examples of the data modules split out of criteo.py and synthetic.py run."""

from __future__ import annotations

import pytest

from tests.doctests import assert_examples_run

MODULES = ["files", "criteo.parse", "criteo.encode", "synthetic.config", "synthetic.sampling",
           "synthetic.dataset"]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name: str) -> None:
    assert_examples_run(f"autorec.data.{name}")
