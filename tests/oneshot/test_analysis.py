"""benchmarks/oneshot_analysis.py reads one-shot studies back: tau of the screen's and of the
ranking proxy's scores, the pooled Spearman figures and the finals, on studies written here."""

from pathlib import Path

import optuna
import pytest
from optuna.distributions import FloatDistribution
from scipy.stats import kendalltau

from benchmarks.oneshot_analysis import analyse, main


def write_study(root: Path, name: str, rows: list[tuple[float, float, float, float]],
                final: tuple[float, float] | None, stage: str = "calibrate") -> None:
    """A study as the benchmark lays it out: trainings of ``stage`` with (screen, proxy, trained
    val AUC, forward FLOPs) and a final of (test AUC, FLOPs)."""
    folder = root / name / name
    folder.mkdir(parents=True)
    study = optuna.create_study(study_name=name, storage=f"sqlite:///{folder / 'study.db'}",
                                direction="maximize")
    for i, (screen, proxy, trained, flops) in enumerate(rows):
        study.add_trial(optuna.trial.create_trial(
            params={"x": float(i)}, distributions={"x": FloatDistribution(0, 100)}, value=trained,
            user_attrs={"stage": stage, "screen": {"val_auc": screen}, "proxy": {"val_auc": proxy},
                        "metrics": {"val": {"auc": trained}}, "costs": {"flops": flops}}))
    if final:
        study.add_trial(optuna.trial.create_trial(
            params={"x": 0.0}, distributions={"x": FloatDistribution(0, 100)}, value=final[0],
            user_attrs={"stage": "final", "proxy": {"val_auc": 0.6}, "costs": {"flops": final[1]},
                        "metrics": {"val": {"auc": final[0]}, "test": {"auc": final[0]}}}))


ROWS = [(0.60, 0.61, 0.62, 1e6), (0.62, 0.60, 0.63, 2e6), (0.61, 0.63, 0.65, 4e5), (0.59, 0.62, 0.64, 3e6)]


def test_the_figures_of_stored_studies(tmp_path):
    write_study(tmp_path, "oneshot_r3k_seed0", ROWS, final=(0.64, 7e5))
    write_study(tmp_path, "oneshot_u3k_seed1", [(p, p, t, f) for _, p, t, f in ROWS], final=(0.63, 3e5),
                stage="rerank")
    write_study(tmp_path, "oneshot_s3k_seed2", ROWS[:2], final=(0.65, 9e5))
    figures = analyse(tmp_path, ["_s3k", "_u3k", "_r3k"], [0, 1, 2])
    screen, proxy, trained = ([r[i] for r in ROWS] for i in range(3))
    assert figures["oneshot_r3k_seed0_tau_screen"] == pytest.approx(kendalltau(screen, trained)[0])
    assert figures["oneshot_r3k_seed0_tau_proxy"] == pytest.approx(kendalltau(proxy, trained)[0])
    assert figures["oneshot_r3k_seed0_tau_proxy"] != figures["oneshot_r3k_seed0_tau_screen"]
    assert figures["oneshot_u3k_seed1_pairs"] == 4  # a study of long re-ranks: its rerank stage
    assert "oneshot_s3k_seed2_tau_proxy" not in figures  # under 3 pairs: no tau
    assert figures["oneshot_r3k_seed0_final_mflops"] == pytest.approx(0.7)
    # pooled over the two studies of 4 pairs each (the same proxy ranks in both)
    assert figures["pooled_pairs"] == 8
    assert figures["pooled_spearman_proxy"] == pytest.approx(0.8)  # ranks 1,0,3,2 vs 0,1,3,2
    assert figures["finals"] == 3 and figures["finals_spearman_test_auc_vs_flops"] == pytest.approx(1.0)


def test_no_study_says_where_it_looked(tmp_path, capsys):
    with pytest.raises(SystemExit, match=f"{tmp_path}: no one-shot study"):
        main(["--root", str(tmp_path), "--out", str(tmp_path / "out.json")])
    assert not (tmp_path / "out.json").exists()
