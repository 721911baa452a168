"""The arch package's docstring examples run and give what they show."""

import pytest

from tests.doctests import assert_examples_run


@pytest.mark.parametrize("name", ["autorec.arch", "autorec.arch.checks", "autorec.arch.layers",
                                  "autorec.arch.spec"])
def test_doctests(name: str) -> None:
    assert_examples_run(name)
