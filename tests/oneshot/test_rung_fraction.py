"""The one-shot final's rung by successive halving (``rung_fraction``): each finalist trains a
share of the first epoch, and only the one that goes on finishes it, from the step it paused at."""

from __future__ import annotations

from pathlib import Path

from autorec.oneshot.run import ONESHOT_ATTR
from autorec.study import TrialRunner
from tests.oneshot.test_run import of_stage, run_oneshot


def test_the_rung_trains_a_share_of_the_epoch_and_the_winner_goes_on_from_there(tmp_path: Path) -> None:
    config, study = run_oneshot(tmp_path, {"steps": 6, "candidates": 10, "rerank": 3, "calibrate": 0,
                                           "rerank_steps": 1, "rerank_val_samples": 100, "final_epochs": 1,
                                           "final_candidates": 2, "rung_fraction": 0.5})
    rung, final = of_stage(study, "final_rung"), of_stage(study, "final")
    record = study.user_attrs[ONESHOT_ATTR]
    steps = -(-TrialRunner(config).dataset.num_rows("train") // 128)  # the final's epoch, batch 128
    pause = record["rung_pause_step"]
    assert len(rung) == 2 and len(final) == 1 and pause == round(0.5 * steps) > 1
    for t in rung:  # paused there, validated on the re-rank's samples, not tested
        metrics = t.user_attrs["metrics"]
        assert metrics["val"]["n"] == 100 and not metrics["test"]
        assert metrics["train_samples"] == pause * 128
    best = max(rung, key=lambda t: t.user_attrs["metrics"]["val"]["auc"])
    loser = next(t for t in rung if t is not best)
    metrics = final[0].user_attrs["metrics"]
    assert final[0].user_attrs["proxy_trial"] == best.user_attrs["proxy_trial"] == record["rung_winner"]
    assert metrics["resumed_from"] == {"epoch": 0, "step": pause, "world_size": 1}  # the rest of its epoch
    assert metrics["train_samples"] == TrialRunner(config).dataset.num_rows("train")  # the whole epoch
    assert metrics["val"]["n"] > 100 and 0 < metrics["test"]["auc"] < 1
    assert sorted(p.name for p in Path(loser.user_attrs["checkpoint"]).parent.iterdir()) == []  # not resumed
    assert record["rung_loser_seconds"] == record["rung_seconds"][str(loser.user_attrs["proxy_trial"])] > 0
