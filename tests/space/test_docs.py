"""Every space module's docstring examples run and give what they show."""

from __future__ import annotations

import pytest

from tests.doctests import assert_examples_run


@pytest.mark.parametrize("name", ["autorec.space", "autorec.space.tables"])
def test_doctests(name: str) -> None:
    assert_examples_run(name)
