"""The issue's done-when checks for DNAS, trained for real (slow: `make test-all`).

Fixed seeds throughout; the numbers each run measured are in BENCHMARKS.md ("DNAS").
"""

import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
TPE_BEST_TEST_AUC = 0.7980  # BENCHMARKS.md, "The fuller MovieLens study" (studies/movielens.yaml)
TPE_BEST_FLOPS = 1.55e6


def test_on_a_second_order_teacher_the_supernet_picks_dot_or_cross_layers():
    from benchmarks.dnas_synthetic import PAIRWISE, run

    out = run("order2", seed=0, presets=())
    assert out["derived_layers"] and set(out["derived_layers"]) <= set(PAIRWISE), out["kind_probs"]


@pytest.mark.xfail(strict=True, reason=(
    "issue 4 open: since the supernet RMS-rescales dlrm/dcnv2 outputs (the 8-layer NaN fix), it "
    "derives dcnv2 x3 on order3 (0.00004 below the best preset), not wukong/dhen; selection by "
    "validation AUC (bilevel or uniform paths, rescale on or off) also puts dcnv2 first in layer 0; "
    "the dcnv2 and dhen presets tie on this teacher over 3 training seeds (0.8908 vs 0.8911); soft "
    "steps derive dhen+wukong here but also on order2; the presets rank the kinds alike on both "
    "teachers (dcnv2 and dhen first), and a REINFORCE architecture step, which follows the paths' "
    "validation losses, derives dcnv2 x3 first here and dhen on order2; with a cost penalty it "
    "derives dhen here at lambda 0.05 but dlrm on order2 only at 0.15, where it derives dlrm here "
    "too; BENCHMARKS.md"))
def test_on_a_third_order_teacher_it_picks_wukong_or_dhen_within_0003_of_the_best_preset():
    from benchmarks.dnas_synthetic import HIGHER, run

    out = run("order3", seed=0)
    assert out["derived_layers"] and set(out["derived_layers"]) <= set(HIGHER), out["kind_probs"]
    best = max(row["test_auc"] for name, row in out["models"].items() if name != "derived")
    assert out["models"]["derived"]["test_auc"] >= best - 0.003, out["models"]


@pytest.mark.xfail(strict=True, reason=(
    "issue 4 open: this study file's best derived architecture reaches 0.7937, TPE 0.7980; the best "
    "variant measured (uniform paths, selection by validation AUC, no rescale) 0.7977; BENCHMARKS.md"))
def test_movielens_dnas_study_matches_tpe_at_no_more_flops(tmp_path):
    from autorec.study import StudyConfig, run_study

    study = tmp_path / "movielens_dnas.yaml"
    shutil.copy(ROOT / "studies" / "movielens_dnas.yaml", study)
    study.write_text(study.read_text().replace("../search_spaces/", f"{ROOT}/search_spaces/"))
    summary = run_study(StudyConfig.load(study), log=lambda *_: None)
    best = summary.best  # chosen by validation AUC, as TPE's best was
    assert best["test_auc"] >= TPE_BEST_TEST_AUC and best["costs"]["flops"] <= TPE_BEST_FLOPS, summary.trials
