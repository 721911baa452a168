"""The one check behind every package's tests/<package>/test_docs.py."""

from __future__ import annotations

import doctest
import importlib


def assert_examples_run(module_name: str) -> None:
    """Every docstring example of ``module_name`` runs and gives what it shows, and it has one."""
    module = importlib.import_module(module_name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{module_name} has no Example:"
    assert result.failed == 0
