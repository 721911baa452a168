"""The one-shot search on the planted teachers, trained for real (slow: `make test-all`).

The issue's checks of the redesigned search: on the 2nd-order teacher it picks dot or cross
layers; on the 3rd-order one it picks layers that model 3rd-order terms (Wukong, DHEN or a
stacked DCNv2) and its winner lands within 0.003 test AUC of the best preset trained with the
same final budget. Fixed seeds; the numbers each run measured are in BENCHMARKS.md ("One-shot
search on the planted teachers").
"""

import pytest

pytestmark = pytest.mark.slow


def pairwise(layer: dict) -> bool:
    """A dot or cross layer, or a DHEN layer ensembling only dot and DCN modules."""
    from benchmarks.oneshot_synthetic import PAIRWISE

    return layer["kind"] in PAIRWISE or (layer["kind"] == "dhen" and set(layer["modules"]) <= {"dot", "dcn"})


def test_on_a_second_order_teacher_the_oneshot_search_picks_dot_or_cross_layers():
    """Measured at e867754 it derives two DHEN layers of dot + DCN modules (no attention), and tests
    0.0008 below dlrm (0.9120 against 0.9128; dcnv2 0.9105, dhen 0.9124)."""
    from benchmarks.oneshot_synthetic import run

    out = run("order2", seed=0, presets=("dlrm", "dcnv2"))
    layers = out["arch"]["layers"]
    assert layers and all(pairwise(layer) for layer in layers), out["arch"]
    best = max(row["test_auc"] for name, row in out["models"].items() if name != "derived")
    assert out["models"]["derived"]["test_auc"] >= best - 0.003, out["models"]


@pytest.mark.timeout(1800)  # four presets and a supernet: 705 s alone, past 900 s beside other jobs
def test_on_a_third_order_teacher_it_picks_higher_order_layers_within_0003_of_the_best_preset():
    from benchmarks.oneshot_synthetic import HIGHER, run

    out = run("order3", seed=0)
    assert out["derived_layers"] and set(out["derived_layers"]) <= set(HIGHER), out["arch"]
    best = max(row["test_auc"] for name, row in out["models"].items() if name != "derived")
    assert out["models"]["derived"]["test_auc"] >= best - 0.003, out["models"]
