"""The one-shot final's rung by successive halving (``rung_fraction``): each finalist trains a
share of the first epoch, and only the one that goes on finishes it, from the step it paused at."""

from __future__ import annotations

from pathlib import Path

import pytest

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


def test_a_rung_of_whole_epochs_keeps_the_finals_lr_schedule(tmp_path: Path) -> None:
    """Under a cosine schedule over a 2-epoch final, the rung's leader pauses at its first epoch's
    end on the final's schedule, so the final that goes on from it is the 2-epoch training run
    straight through (a rung cut to one epoch would have decayed the LR to 0 by then)."""
    import dataclasses

    from autorec.arch import ArchSpec
    from autorec.train.trainer import Trainer

    (tmp_path / "study").mkdir()
    config, study = run_oneshot(tmp_path / "study", {"steps": 6, "candidates": 10, "rerank": 2,
                                                     "calibrate": 0, "final_epochs": 2,
                                                     "final_candidates": 2},
                                train={"lr_schedule": "cosine"})
    rung, final = of_stage(study, "final_rung"), of_stage(study, "final")
    runner = TrialRunner(config)
    rows = runner.dataset.num_rows("train")
    assert len(rung) == 2 and all(t.user_attrs["metrics"]["train_samples"] == rows for t in rung)
    metrics = final[0].user_attrs["metrics"]
    assert metrics["resumed_from"] == {"epoch": 1, "step": 0, "world_size": 1}
    cfg = dataclasses.replace(runner.train_config(tmp_path / "straight"), epochs=2, max_steps_per_epoch=None,
                              patience=2, checkpoint_every=500, resume=True, progress=False,
                              seed=final[0].user_attrs["train_seed"])
    straight = Trainer(ArchSpec.from_dict(final[0].user_attrs["arch"]), runner.dataset, cfg).fit()
    assert metrics["test"]["auc"] == pytest.approx(straight.test["auc"], abs=1e-6)
    assert metrics["val"]["auc"] == pytest.approx(straight.val["auc"], abs=1e-6)


def test_a_list_of_shares_halves_the_rung_and_the_last_reads_leader_goes_on(tmp_path: Path) -> None:
    """``rung_fraction: [0.25, 0.6]`` with three finalists: all three train to the first pause,
    the better two go on from there to the second, and the best there finishes the epoch; a rerun
    trains nothing more (every leg is on record)."""
    import dataclasses

    from autorec.oneshot.rung import final_rung
    from autorec.train.records import TrainConfig

    options = {"steps": 6, "candidates": 10, "rerank": 3, "calibrate": 0, "rerank_steps": 1,
               "rerank_val_samples": 100, "final_epochs": 1, "final_candidates": 3,
               "rung_fraction": [0.25, 0.6]}
    config, study = run_oneshot(tmp_path, options)
    rung, final = of_stage(study, "final_rung"), of_stage(study, "final")
    record = study.user_attrs[ONESHOT_ATTR]
    steps = -(-TrialRunner(config).dataset.num_rows("train") // 128)
    first, second = record["rung_pause_steps"]
    assert (first, second) == (round(0.25 * steps), round(0.6 * steps)) and 1 < first < second < steps
    legs = {(t.user_attrs["proxy_trial"], t.user_attrs["pause_at_step"]): t for t in rung}
    at_first = {n: t for (n, p), t in legs.items() if p == first}
    at_second = {n: t for (n, p), t in legs.items() if p == second}
    assert len(rung) == 5 and len(at_first) == 3 and len(at_second) == 2

    def val(t: object) -> float:
        return t.user_attrs["metrics"]["val"]["auc"]  # type: ignore[attr-defined]

    # the better two at the first pause went on, each from its own pause; the best at the second won
    assert set(at_second) == set(sorted(at_first, key=lambda n: -val(at_first[n]))[:2])
    for t in at_second.values():
        metrics = t.user_attrs["metrics"]
        assert metrics["resumed_from"] == {"epoch": 0, "step": first, "world_size": 1}
        assert metrics["train_samples"] == second * 128 and metrics["val"]["n"] == 100
    winner = max(at_second, key=lambda n: val(at_second[n]))
    assert final[0].user_attrs["proxy_trial"] == winner == record["rung_winner"]
    assert final[0].user_attrs["metrics"]["resumed_from"] == {"epoch": 0, "step": second, "world_size": 1}
    losers = [n for n in at_first if n != winner]
    assert record["rung_loser_seconds"] == pytest.approx(sum(record["rung_seconds"][str(n)] for n in losers))
    for n in losers:  # a loser keeps no resumable checkpoint
        assert sorted(p.name for p in Path(at_first[n].user_attrs["checkpoint"]).parent.iterdir()) == []
    # a rerun reads every leg back: nothing trains (runner None would fail if one did)
    proxies = {t.number: t for t in study.trials}
    folder = Path(final[0].user_attrs["checkpoint"]).parents[1]
    cfg = dataclasses.replace(TrainConfig(checkpoint_dir=str(folder)), seed=final[0].user_attrs["train_seed"])
    chosen, chosen_cfg = final_rung(None, study, None, [proxies[n] for n in at_first], cfg, dict(record),
                                    lambda t: {}, lambda message: None, pauses=[first, second])
    assert chosen.number == winner and chosen_cfg.checkpoint_dir == str(folder / str(winner))


def test_a_rung_at_equal_seconds_reads_a_finalist_where_the_fastests_seconds_run_out(tmp_path: Path) -> None:
    """``rung_price: seconds`` with ``rerank_train: false``: nothing trains for the re-rank; the
    proxy's two best go to the rung, each trains to the probe step (its speed measured there),
    the fastest on to the pause and the other to the step ``priced_pauses`` gives it; the best
    read goes on from its own step, and a rerun trains nothing more."""
    import dataclasses

    from autorec.oneshot.ranking import priced_pauses
    from autorec.oneshot.rung import final_rung
    from autorec.train.records import TrainConfig

    config, study = run_oneshot(tmp_path, {"steps": 6, "candidates": 10, "rerank": 2, "calibrate": 0,
                                           "rerank_val_samples": 100, "final_epochs": 1,
                                           "final_candidates": 2, "rung_fraction": 0.6,
                                           "rung_price": "seconds", "rung_probe": 0.2, "rerank_train": False})
    record = study.user_attrs[ONESHOT_ATTR]
    assert of_stage(study, "rerank") == [] and record["rerank_numbers"] == []
    assert "rerank_seconds" not in record
    steps = -(-TrialRunner(config).dataset.num_rows("train") // 128)
    probe, pause = round(0.2 * steps), record["rung_pause_step"]
    assert pause == round(0.6 * steps) and 1 < probe < pause
    legs = {(t.user_attrs["proxy_trial"], t.user_attrs["pause_at_step"]): t
            for t in of_stage(study, "final_rung")}
    finalists = record["final_order"]
    assert len(finalists) == 2 and all((n, probe) in legs for n in finalists)
    speeds = {n: legs[n, probe].user_attrs["metrics"]["train_samples_per_s"] for n in finalists}
    priced = priced_pauses(speeds, probe, pause)
    assert record["rung_pauses"] == {str(n): step for n, step in priced.items()}
    assert max(priced.values()) == pause and len(legs) == 4
    reads = {n: legs[n, priced[n]] for n in finalists}
    for n, t in reads.items():  # each went on from its probe to its own priced step
        metrics = t.user_attrs["metrics"]
        assert metrics["resumed_from"] == {"epoch": 0, "step": probe, "world_size": 1}
        assert metrics["train_samples"] == priced[n] * 128 and metrics["val"]["n"] == 100
    winner = max(finalists, key=lambda n: reads[n].user_attrs["metrics"]["val"]["auc"])
    final = of_stage(study, "final")[0]
    assert final.user_attrs["proxy_trial"] == winner == record["rung_winner"]
    resumed = final.user_attrs["metrics"]["resumed_from"]
    assert resumed == {"epoch": 0, "step": priced[winner], "world_size": 1}
    loser = next(n for n in finalists if n != winner)
    assert record["rung_loser_seconds"] == record["rung_seconds"][str(loser)] > 0
    proxies = {t.number: t for t in study.trials}  # a rerun reads every leg back (runner None trains nothing)
    folder = Path(final.user_attrs["checkpoint"]).parents[1]
    cfg = dataclasses.replace(TrainConfig(checkpoint_dir=str(folder)), seed=final.user_attrs["train_seed"])
    chosen, _ = final_rung(None, study, None, [proxies[n] for n in finalists], cfg, dict(record),
                           lambda t: {}, lambda message: None, pauses=[pause], probe=probe)
    assert chosen.number == winner


@pytest.mark.parametrize("margin", [1e-9, 0.49])
def test_a_race_at_equal_seconds_stops_a_trailing_finalist_at_the_first_read(tmp_path: Path,
                                                                             margin: float) -> None:
    """``rung_margin`` with ``rung_fraction: [0.4, 0.7]`` at equal seconds: both finalists train to
    the probe, then to their priced first read; with a hair's margin the one behind stops there and
    the leader goes on to the final from that read (no second read); with a margin no gap reaches,
    both are read again at their priced second steps and the best there goes on. A rerun trains
    nothing more."""
    import dataclasses

    from autorec.oneshot.ranking import priced_pauses
    from autorec.oneshot.rung import final_rung
    from autorec.train.records import TrainConfig

    config, study = run_oneshot(tmp_path, {"steps": 6, "candidates": 10, "rerank": 2, "calibrate": 0,
                                           "rerank_val_samples": 100, "final_epochs": 1,
                                           "final_candidates": 2, "rung_fraction": [0.4, 0.7],
                                           "rung_price": "seconds", "rung_probe": 0.1, "rerank_train": False,
                                           "rung_margin": margin})
    record = study.user_attrs[ONESHOT_ATTR]
    steps = -(-TrialRunner(config).dataset.num_rows("train") // 128)
    probe, (first, second) = round(0.1 * steps), record["rung_pause_steps"]
    assert 1 < probe < first < second == round(0.7 * steps)
    legs = {(t.user_attrs["proxy_trial"], t.user_attrs["pause_at_step"]): t
            for t in of_stage(study, "final_rung")}
    finalists = record["final_order"]
    speeds = {n: legs[n, probe].user_attrs["metrics"]["train_samples_per_s"] for n in finalists}
    priced = [priced_pauses(speeds, probe, pause) for pause in (first, second)]
    assert record["rung_pauses"] == {str(n): [priced[0][n], priced[1][n]] for n in finalists}

    def val(n: int, read: int) -> float:
        return legs[n, priced[read][n]].user_attrs["metrics"]["val"]["auc"]

    at_first = {n: val(n, 0) for n in finalists}
    ahead = max(finalists, key=at_first.__getitem__)
    if margin < 0.01:  # the one behind (by more than 1e-9) stopped at the first read
        assert set(legs) == {(n, step) for n in finalists for step in (probe, priced[0][n])}
        assert record["rung_winner"] == ahead
        read = 0
    else:  # no gap reaches 0.49: both read again, the best at the second read won
        # (a finalist whose probe ran very slowly is priced one step past the probe at both reads:
        # its two reads are then one leg, seen once in a newcomer-check under load)
        assert set(legs) == {(n, step) for n in finalists for step in (probe, priced[0][n], priced[1][n])}
        assert record["rung_winner"] == max(finalists, key=lambda n: val(n, 1))
        read = 1
    winner = record["rung_winner"]
    final = of_stage(study, "final")[0]
    assert final.user_attrs["proxy_trial"] == winner
    assert final.user_attrs["metrics"]["resumed_from"] == {"epoch": 0, "step": priced[read][winner],
                                                          "world_size": 1}
    loser = next(n for n in finalists if n != winner)
    assert record["rung_loser_seconds"] == record["rung_seconds"][str(loser)] > 0
    proxies = {t.number: t for t in study.trials}  # a rerun reads every leg back (runner None trains nothing)
    folder = Path(final.user_attrs["checkpoint"]).parents[1]
    cfg = dataclasses.replace(TrainConfig(checkpoint_dir=str(folder)), seed=final.user_attrs["train_seed"])
    chosen, _ = final_rung(None, study, None, [proxies[n] for n in finalists], cfg, dict(record),
                           lambda t: {}, lambda message: None, pauses=[first, second], probe=probe,
                           margin=margin)
    assert chosen.number == winner
