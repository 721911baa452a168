"""The one-shot search on the planted teachers, trained for real (slow: `make test-all`).

The issue's checks of the redesigned search: on the 2nd-order teacher its first layer is a dot or
cross one; on the 3rd-order one it picks layers that model 3rd-order terms (Wukong, DHEN or a
stacked DCNv2); on both its winner lands within 0.003 test AUC of the best preset trained with
the same final budget. Fixed seeds, and the benchmark's strategy options
(``benchmarks.oneshot_synthetic.PER_KIND``: each block kind's best re-ranked, the two best trained
one epoch each before the better goes on, as on issue 20's scale workload); the numbers each run
measured are in BENCHMARKS.md ("The one-shot search on the planted teachers"),
``benchmarks/results/oneshot_synthetic.json`` (AMD EPYC) and ``oneshot_synthetic_intel.json``.
The picks move with the CPU's float rounding: on the Intel Xeon the strategy's defaults landed
0.0045 under order3's best preset, and at one thread order2's first layer came out a DHEN with
attention; at the suite's two threads both checks hold with ``PER_KIND``.
"""

import pytest

pytestmark = pytest.mark.slow


def test_on_a_second_order_teacher_the_oneshot_search_interacts_the_embeddings_by_dots_or_crosses():
    """The first layer, the one that forms the interactions of the embeddings, is a dot or cross
    one (DLRM, DCNv2, or DHEN of dot and DCN modules only). Not every layer: a second layer of any
    kind composes the first's terms into higher orders, and which kind the re-rank's trainings
    prefer there moved with seeds and float rounding (35ddc4a, AMD EPYC, seeds 0 / 1 / 2: DHEN
    (dot, dcn) first every time, then Wukong / DHEN (dot, attention, dcn) / the same, test AUC
    +0.0004 / -0.0018 / +0.0010 against the best of dlrm and dcnv2; at 19c1548 seed 0's second
    layer was DHEN (dot, dcn))."""
    from benchmarks.oneshot_synthetic import pairwise, run

    out = run("order2", seed=0, presets=("dlrm", "dcnv2"))
    layers = out["arch"]["layers"]
    assert layers and pairwise(layers[0]), out["arch"]
    best = max(row["test_auc"] for name, row in out["models"].items() if name != "derived")
    assert out["models"]["derived"]["test_auc"] >= best - 0.003, out["models"]


@pytest.mark.timeout(1800)  # four presets and a supernet: 705 s alone, past 900 s beside other jobs
def test_on_a_third_order_teacher_it_picks_higher_order_layers_within_0003_of_the_best_preset():
    from benchmarks.oneshot_synthetic import HIGHER, run

    out = run("order3", seed=0)
    assert out["derived_layers"] and set(out["derived_layers"]) <= set(HIGHER), out["arch"]
    best = max(row["test_auc"] for name, row in out["models"].items() if name != "derived")
    assert out["models"]["derived"]["test_auc"] >= best - 0.003, out["models"]
