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


def test_wukong_and_dhen_close_half_of_dlrms_gap_on_a_third_order_teacher():
    """The order3 preset (BENCHMARKS.md): gap closed = (AUC - AUC_dlrm) / (Bayes - AUC_dlrm)."""
    from benchmarks.synthetic_teacher import run

    out = run("order3", seed=0, presets=["dlrm", "wukong", "dhen"], epochs=15)
    for name in ("wukong", "dhen"):
        assert out["models"][name]["gap_closed"] >= 0.5, out
