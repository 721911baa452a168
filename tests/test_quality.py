"""Quality targets of the foundation, trained for real (slow: `make test-all`)."""

import pytest

from autorec.data import load_dataset
from autorec.presets import PRESETS, preset
from autorec.train.trainer import TrainConfig, Trainer

pytestmark = pytest.mark.slow


def test_movielens_presets_reach_their_targets():
    """Random 80/10/10 split, seed 0: every preset >= 0.775 test AUC, the best >= 0.790."""
    data = load_dataset("movielens100k", seed=0)
    config = TrainConfig(seed=0, progress=False)
    aucs = {name: Trainer(preset(name, data.schema), data, config).fit().test["auc"] for name in PRESETS}
    assert min(aucs.values()) >= 0.775, aucs
    assert max(aucs.values()) >= 0.790, aucs


@pytest.fixture(scope="module")
def order3_gaps() -> dict:
    from benchmarks.synthetic_teacher import run

    return run("order3", seed=0, presets=["dlrm", "wukong", "dhen"], epochs=15)


def test_dhen_closes_half_of_dlrms_gap_on_a_third_order_teacher(order3_gaps):
    """The order3 preset (BENCHMARKS.md): gap closed = (AUC - AUC_dlrm) / (Bayes - AUC_dlrm)."""
    assert order3_gaps["models"]["dhen"]["gap_closed"] >= 0.5, order3_gaps


@pytest.mark.xfail(strict=False, reason="on the line: under the tuned recipe (dense lr 3e-3, tables 0.2) "
                   "Wukong closed 0.487 of the gap at commit 1978760 on an AMD EPYC (0.52 under the old "
                   "recipe) and more than half on an Intel Xeon (2026-11-27, float order); BENCHMARKS.md, "
                   "'Wukong and DHEN against DLRM on a planted 3rd-order teacher'")
def test_wukong_closes_half_of_dlrms_gap_on_a_third_order_teacher(order3_gaps):
    assert order3_gaps["models"]["wukong"]["gap_closed"] >= 0.5, order3_gaps
