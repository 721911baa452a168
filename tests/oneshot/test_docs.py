"""The oneshot package's docstring examples run."""

import pytest

from tests.doctests import assert_examples_run


@pytest.mark.parametrize("name", ["autorec.oneshot.fair", "autorec.oneshot.train", "autorec.oneshot.search",
                                  "autorec.oneshot.drops", "autorec.oneshot.importance",
                                  "autorec.oneshot.ranking", "autorec.oneshot.heads", "autorec.oneshot.parts",
                                  "autorec.oneshot.predictor", "autorec.oneshot.labels",
                                  "autorec.strategies.oneshot"])
def test_doctests(name: str) -> None:
    assert_examples_run(name)
