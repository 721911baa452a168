"""Every module of autorec.costs with examples runs them as shown."""

import pytest

from tests.doctests import assert_examples_run


@pytest.mark.parametrize("name", ["analytic", "latency", "training"])
def test_examples_run(name):
    assert_examples_run(f"autorec.costs.{name}")
