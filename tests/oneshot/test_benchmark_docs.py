"""The docstring examples of issue 20's benchmark modules run."""

import pytest

from tests.doctests import assert_examples_run


@pytest.mark.parametrize("name", ["benchmarks.oneshot_vs_tpe", "benchmarks.oneshot_variants",
                                  "benchmarks.study_archive", "benchmarks.oneshot_cross_scores",
                                  "benchmarks.oneshot_kind_bias",
                                  "benchmarks.final_seeds", "benchmarks.planted_oracle",
                                  "benchmarks.adjacent_units", "benchmarks.results_file"])
def test_doctests(name: str) -> None:
    assert_examples_run(name)
