"""Every precision module's docstring examples run and give what they show."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["formats", "quantisers", "recipes", "layers", "native", "probe", "embeddings"]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name: str) -> None:
    module = importlib.import_module(f"autorec.precision.{name}")
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"autorec.precision.{name} has no Example:"
    assert result.failed == 0
