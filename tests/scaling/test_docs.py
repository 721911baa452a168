"""The scaling package's docstring examples run."""

import pytest

from tests.doctests import assert_examples_run


@pytest.mark.parametrize("name", ["autorec.scaling.ladder", "autorec.scaling.fit", "autorec.scaling.results",
                                  "autorec.scaling.figure", "autorec.strategies.ladder"])
def test_doctests(name: str) -> None:
    assert_examples_run(name)
