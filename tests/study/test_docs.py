"""The study package's docstring examples run."""

import pytest

from tests.doctests import assert_examples_run


@pytest.mark.parametrize("name", ["autorec.study", "autorec.study.config", "autorec.study.storage",
                                  "autorec.study.seeding", "autorec.study.recovery",
                                  "autorec.study.ray_trial",
                                  "autorec.config.errors"])
def test_doctests(name: str) -> None:
    assert_examples_run(name)
