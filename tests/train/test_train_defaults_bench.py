"""benchmarks/train_defaults.py: a recipe the machine refuses (an embedding weight decay on
fbgemm's CPU kernels) is recorded as refused and left out of the ranking, not a crash that loses
the cells already trained; each cell's figures are kept in the summary."""

import json

import pytest

from autorec.data import load_dataset
from benchmarks import train_defaults as bench


def _cell(val: float, auc: float = 0.7) -> dict:
    return {"val": {"logloss": val}, "test": {"logloss": val + 0.01, "auc": auc}, "best_epoch": 1}


def test_a_refused_recipe_is_left_out_and_named():
    runs = {"ds": {"dlrm/base": _cell(0.50), "dlrm/cosine": _cell(0.48),
                   "dlrm/emb_wd_1e-6": {"refused": "no weight decay on CPU"}}}
    row = bench.summarise(runs, ["base", "cosine", "emb_wd_1e-6"])
    assert row["refused_recipes"] == "emb_wd_1e-6"
    assert row["best_recipe"] == "cosine" and row["cells"] == 1
    assert row["base_mean_val_regret"] == pytest.approx(0.02)
    assert row["ds_dlrm_base_val_logloss"] == 0.5 and row["ds_dlrm_cosine_test_auc"] == 0.7
    assert not any(k.startswith("emb_wd") for k in row)


def test_an_incomplete_cell_is_not_ranked():
    runs = {"ds": {"dlrm/base": _cell(0.50), "dcnv2/base": _cell(0.40), "dcnv2/cosine": _cell(0.45)}}
    row = bench.summarise(runs, ["base", "cosine"])
    assert row["cells"] == 1 and row["cosine_worst_val_regret"] == pytest.approx(0.05)
    assert "ds_dlrm_base_val_logloss" not in row


def test_run_records_the_cpu_refusal_and_keeps_going(tmp_path, monkeypatch):
    tiny = load_dataset("synthetic", preset="tiny", num_samples=600)
    monkeypatch.setattr(bench, "dataset", lambda key: tiny)
    runs = bench.run(["tiny"], ["base", "emb_wd_1e-6"], tmp_path, ["dlrm"])
    assert "refused" in runs["tiny"]["dlrm/emb_wd_1e-6"]
    assert "embedding_weight_decay" in runs["tiny"]["dlrm/emb_wd_1e-6"]["refused"]
    assert runs["tiny"]["dlrm/base"]["val"]["logloss"] > 0
    cached = json.loads((tmp_path / "tiny.json").read_text())
    assert set(cached) == {"dlrm/base", "dlrm/emb_wd_1e-6"}
    # a rerun trains nothing: both cells come from the cache
    monkeypatch.setattr(bench, "cell", lambda *a: pytest.fail("retrained a cached cell"))
    assert bench.run(["tiny"], ["base", "emb_wd_1e-6"], tmp_path, ["dlrm"]) == runs
