"""benchmarks/oneshot_finals.py describes each one-shot run's winner beside its tested AUC."""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest

from benchmarks.oneshot_finals import finals, main, winner_row
from tests.studyfiles import run_micro_oneshot


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return run_micro_oneshot(tmp_path_factory.mktemp("finals"), "_f", (0,), shared_crossings=1)


def _final(root: Path) -> optuna.trial.FrozenTrial:
    db = root / "oneshot_f_seed0" / "oneshot_f_seed0" / "study.db"
    study = optuna.load_study(study_name="oneshot_f_seed0", storage=f"sqlite:///{db}")
    return next(t for t in study.trials if t.user_attrs.get("stage") == "final")


def test_each_final_is_described_as_trained(root):
    final = _final(root)
    arch, metrics = final.user_attrs["arch"], final.user_attrs["metrics"]
    figures = finals(["_f"], [0, 1], root, strong=["cat_0"])  # seed 1 has no study: skipped
    assert figures["f_seed0_kinds"] == "+".join(layer["kind"] for layer in arch["layers"])
    assert figures["f_seed0_tables"] == len(arch["tables"])
    assert figures["f_seed0_test_auc"] == metrics["test"]["auc"]
    assert not any(k.startswith("f_seed1") for k in figures)
    group = "other" if not figures["f_seed0_alike"] else \
        "alike_dcnv2" if "dcnv2" in figures["f_seed0_kinds"] else "alike_no_dcnv2"
    assert figures[f"{group}_finals"] == 1 and figures[f"{group}_test_auc_mean"] == metrics["test"]["auc"]
    assert sum(figures[f"{g}_finals"] for g in ("other", "alike_dcnv2", "alike_no_dcnv2")) == 1


def test_alike_means_every_feature_at_one_width_and_every_row():
    tables = [{"features": [f], "dim": 8, "num_embeddings": 10, "hash_from": 10} for f in "ab"]
    metrics = {"val": {"auc": 0.7}, "test": {"auc": 0.69}}
    assert winner_row({"layers": [], "tables": tables}, metrics, ["a", "b"], ["a"])["alike"] == 1
    assert winner_row({"layers": [], "tables": tables}, metrics, ["a", "b", "c"], ["c"]) \
        == {"kinds": "", "alike": 0, "widths": "8", "tables": 2, "hashed": 0, "strong_min_width": 0,
            "val_auc": 0.7, "test_auc": 0.69}  # c dropped: not alike, its strong table at width 0
    hashed = [tables[0], {**tables[1], "num_embeddings": 5}]
    assert winner_row({"layers": [], "tables": hashed}, metrics, ["a", "b"], [])["alike"] == 0


def test_main_writes_the_figures_and_refuses_bad_flags(root, tmp_path, capsys):
    out = tmp_path / "finals.json"
    main(["--tags", "_f", "--seeds", "0", "--root", str(root), "--out", str(out)])
    record = json.loads(out.read_text())
    assert record["f_seed0_test_auc"] == _final(root).user_attrs["metrics"]["test"]["auc"]
    assert {"machine", "commit"} <= set(record)
    with pytest.raises(SystemExit, match="no final training in runs"):
        main(["--tags", "_none", "--root", str(root), "--out", str(out)])
    for flags in (["--tags", "k9"], ["--tags", "_f", "--seeds", "0,x"]):
        with pytest.raises(SystemExit):
            main([*flags, "--root", str(root), "--out", str(out)])
    assert "are not run tags" in capsys.readouterr().err
