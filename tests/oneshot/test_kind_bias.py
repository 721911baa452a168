"""The kind-bias probe's parts: every layer setting of a space, its label, the per-kind figures;
and one run on a tiny trained supernet."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.oneshot_kind_bias import all_alike, kind_figures, label, main, slug


def test_all_alike_sets_every_feature_to_one_width_and_every_row():
    names = {"layer0.kind": ["dcnv2"], "emb.a": ["4", "8"], "emb.a.hash": ["1", "0.25"]}
    assert all_alike(names, "8") == {"emb.a": "8", "emb.a.hash": "1"}


def test_labels_and_keys():
    arch = {"layers": [{"kind": "wukong", "n_fm": 16, "n_lcb": 8}, {"kind": "dlrm"}], "over_arch": [256, 128]}
    assert label(arch) == "wukong(16,8)+dlrm 256"
    assert slug("dcnv2(1,0)+dhen2 512") == "dcnv2_1_0_dhen2_512"


def test_kind_figures_rank_each_kinds_best_and_average_it():
    rows = [("dhen2 512", "dhen", 0.59), ("dcnv2(1,0) 512", "dcnv2", 0.57), ("dhen3 512", "dhen", 0.58),
            ("dlrm 512", "dlrm", 0.55)]
    figures = kind_figures(rows, "k")
    assert figures["k_best_rank_dhen"] == 1 and figures["k_best_rank_dcnv2"] == 3
    assert figures["k_best_rank_dlrm"] == 4 and figures["k_settings"] == 4
    assert figures["k_mean_auc_dhen"] == pytest.approx(0.585)
    assert figures["k_rank_dcnv2_1_0_512"] == 3


def test_a_run_scores_every_setting_with_both_heads(tmp_path: Path) -> None:
    from tests.studyfiles import run_micro_oneshot

    run_micro_oneshot(tmp_path, "_x", (0,))
    out = tmp_path / "bias.json"
    args = ["--tag", "_x", "--seed", "0", "--width", "8", "--samples", "512", "--heads", "2",
            "--root", str(tmp_path), "--out", str(out)]
    figures = main([*args, "--probe-steps", "2", "--probe", "dlrm 16"])
    assert figures["x_s0_w8_shared_settings"] == figures["x_s0_w8_heads2_settings"] > 2
    assert {"x_s0_w8_shared_best_rank_dcnv2", "x_s0_w8_heads2_best_rank_dlrm"} <= set(figures)
    assert json.loads(out.read_text())["x_s0_w8_probe2_dlrm_16_after"] > 0
    with pytest.raises(SystemExit, match="--probe: no layer setting 'wukong 16'; the space's are, for "):
        main([*args, "--probe-steps", "2", "--probe", "dlrm 16;wukong 16"])
    with pytest.raises(SystemExit, match="--width: '16' is not a width"):
        main([*args[:4], "--width", "16", *args[6:]])
