"""The one-shot study: train once, search many, re-rank, train the winner; Kendall's tau; resume
after kill -9 from the supernet's checkpoint and the trials already recorded."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from autorec.oneshot.ranking import (
    crossing_bases,
    distinct_best,
    family,
    in_family_turns,
    kind_neighbours,
    layer_setting,
)
from autorec.oneshot.run import ONESHOT_ATTR, rank_correlation
from autorec.oneshot.rung import final_rung
from autorec.oneshot.search import PROXY_ATTR, STAGE_ATTR
from autorec.report import data as report_data
from autorec.report.data import proxy_data
from autorec.report.figures import study_figures
from autorec.space import SearchSpace
from autorec.strategies import make_strategy
from autorec.study import StudyConfig, open_storage, run_study, select_trials, trial_arch
from autorec.train.checkpoints import latest
from autorec.train.records import TrainConfig
from tests.studyfiles import write_study

ONESHOT = {"name": "oneshot", "options": {"steps": 30, "batch_size": 64, "checkpoint_every": 3,
                                          "candidates": 12, "selection_samples": 400, "rerank": 2,
                                          "calibrate": 2, "final_epochs": 1}}
BUDGET = {"trials": 1, "epochs": 1, "batch_size": 128, "max_steps_per_epoch": 4}


def quiet(*_: object) -> None:
    pass


def micro_space(tmp_path: Path, embedding: str) -> Path:
    """A space file of one DLRM or DCNv2 layer over 8-wide dense features, with the embedding
    choices ``embedding`` (a YAML mapping, e.g. ``{dim: [0, 4, 8]}``)."""
    path = tmp_path / "micro.yaml"
    path.write_text(f"dim: [8]\nembedding: {embedding}\nover_arch: [[16]]\n"
                    "layers: {num: [1], kinds: [dlrm, dcnv2]}\n")
    return path


def run_oneshot(tmp_path: Path, options: dict, **study: object) -> tuple[StudyConfig, optuna.Study]:
    """Run a one-shot study of ``options`` (over ``ONESHOT``'s) on the small budget; the study as stored."""
    strategy = {"name": "oneshot", "options": {**ONESHOT["options"], **options}}
    config = StudyConfig.load(write_study(tmp_path, budget=BUDGET, strategy=strategy, **study))
    run_study(config, log=quiet)
    return config, optuna.load_study(study_name="t", storage=open_storage(config.storage_url))


def of_stage(study: optuna.Study, stage: str) -> list:
    """The trials of one stage (proxy, sample, rerank, calibrate, final), in trial order."""
    return [t for t in study.trials if t.user_attrs["stage"] == stage]


def test_the_report_spells_the_oneshot_attributes_as_oneshot_does():
    assert (report_data.STAGE_ATTR, report_data.PROXY_ATTR, report_data.ONESHOT_ATTR) == (
        STAGE_ATTR, PROXY_ATTR, ONESHOT_ATTR)


def test_rank_correlation():
    assert rank_correlation([0.1, 0.2, 0.3, 0.4], [0.5, 0.6, 0.7, 0.8]) == pytest.approx(1.0)
    assert rank_correlation([0.1, 0.2, 0.3, 0.4], [0.8, 0.7, 0.6, 0.5]) == pytest.approx(-1.0)
    assert rank_correlation([0.1, 0.2, 0.3], [0.1, 0.3, 0.2]) == pytest.approx(1 / 3)
    assert rank_correlation([0.1, 0.2], [0.1, 0.2]) is None  # too few pairs to mean anything
    assert rank_correlation([0.1, 0.2, 0.3], [0.5, 0.5, 0.5]) is None  # one side constant


@pytest.mark.parametrize("options, message", [
    ({"candidates": -1}, "candidates: expected an integer >= 0, got -1"),
    ({"candidates": 0}, r"candidates: 0 \(no screen\) needs crossing_from: 'grid' and rerank_from"),
    ({"candidates": 0, "shared_crossings": 2, "crossing_from": "grid"}, r"candidates: 0 \(no screen\)"),
    ({"search": "cmaes"}, "search: expected one of tpe, nsga2, random, got 'cmaes'"),
    ({"sampling": "strict"}, "sampling: expected one of fair, sandwich, uniform"),
    ({"rerank": "two"}, "rerank: expected an integer, got 'two'"),
    ({"rerank": 3, "rescore": 2, "rescore_samples": 9000}, r"rescore: expected 0 or at least rerank \(3\)"),
    ({"rescore": 5}, r"rescore_samples: expected more than selection_samples \(20000\) when rescore"),
    ({"rescore": 5, "selection_samples": 500, "rescore_samples": 500}, "more than selection_samples"),
    ({"rescore_samples": 9000}, "rescore_samples: set without rescore"),
    ({"rescore": -1}, "rescore: expected an integer >= 0, got -1"),
    ({"rerank_val_samples": 1000}, "rerank_val_samples: set without rerank_steps"),
    ({"rerank_val_samples": 0, "rerank_steps": 5}, "rerank_val_samples: expected an integer >= 1, got 0"),
    ({"capacity_tie": -0.001}, r"capacity_tie: expected an AUC margin in \[0, 0.5\), got -0.001"),
    ({"capacity_tie": "small"}, "capacity_tie: expected a number, got 'small'"),
    ({"shared_crossings": -1}, "shared_crossings: expected an integer >= 0, got -1"),
    ({"shared_crossings": "two"}, "shared_crossings: expected an integer, got 'two'"),
    ({"shared_paths": 2}, r"shared_paths: expected a share of steps in \[0, 1\], got 2"),
    ({"rerank_tie": 0.5}, r"rerank_tie: expected an AUC margin in \[0, 0.5\), got 0.5"),
    ({"rerank_tie": 0.001, "capacity_tie": 0.002}, "capacity_tie and rerank_tie: set one"),
    ({"rerank_speed_tie": -0.01}, r"rerank_speed_tie: expected an AUC margin in \[0, 0.5\), got -0.01"),
    ({"rerank_speed_tie": "fast"}, "rerank_speed_tie: expected a number, got 'fast'"),
    ({"rerank_speed_tie": 0.01, "rerank_tie": 0.001}, "rerank_tie and rerank_speed_tie: set one"),
    ({"rerank_speed_tie": 0.01, "capacity_tie": 0.001}, "capacity_tie and rerank_speed_tie: set one"),
    ({"family": "lead", "diverse": True}, "family: expected one of layers, kind, got 'lead'"),
    ({"family": "kind"}, "family: 'kind' is set without diverse"),
    ({"final_candidates": 5, "rerank": 4}, r"final_candidates: expected at most rerank \(4\) re-ranked"),
    ({"final_candidates": 0}, "final_candidates: expected an integer >= 1, got 0"),
    ({"rung_seeds": 0}, "rung_seeds: expected an integer >= 1, got 0"),
    ({"rung_seeds": 1.5}, "rung_seeds: expected an integer, got 1.5"),
    ({"rung_winner_seeds": 0}, "rung_winner_seeds: expected an integer >= 1, got 0"),
    ({"rung_fraction": 0, "final_candidates": 2},
     r"rung_fraction: expected a share of an epoch in \(0, 1\], or a list of them, got 0"),
    ({"rung_fraction": 1.5, "final_candidates": 2}, r"rung_fraction: expected a share .* got 1.5"),
    ({"rung_fraction": 0.25}, r"rung_fraction: 0.25 is set without a rung \(final_candidates, rung_seeds"),
    ({"rung_fraction": [], "final_candidates": 2},
     r"rung_fraction: expected a share .* or a list of them, got \[\]"),
    ({"rung_fraction": [0.2, "half"], "final_candidates": 4},
     r"rung_fraction.list\[float\]\[1\]: expected a number, got 'half'"),
    ({"rung_fraction": [0.5, 0.3], "final_candidates": 4},
     r"rung_fraction: expected increasing shares .* \[0.5, 0.3\]"),
    ({"rung_fraction": [0.2, 0.5], "final_candidates": 2},
     r"rung_fraction: 2 reads of a rung of 2 finalists: halving leaves one after 1"),
    ({"rung_fraction": [0.2, 0.5, 0.8], "final_candidates": 4, "rerank": 4},
     r"rung_fraction: 3 reads of a rung of 4 finalists: halving leaves one after 2"),
    ({"rung_fraction": [0.2, 0.5], "final_candidates": 4, "rerank": 4, "rung_winner_seeds": 2},
     r"rung_fraction: a list \(\[0.2, 0.5\]\) reads the finalists at several steps, one training seed each"),
    ({"rung_margin": 0.005, "final_candidates": 2, "rung_fraction": 0.85},
     r"rung_margin: 0.005 is set with one rung read \(rung_fraction \[0.85\]\); give rung_fraction a list"),
    ({"rung_margin": 0.5, "final_candidates": 2, "rung_fraction": [0.6, 0.85]},
     r"rung_margin: expected 0 \(off\) or an AUC margin in \(0, 0.5\), got 0.5"),
    ({"rung_margin": -0.01, "final_candidates": 2, "rung_fraction": [0.6, 0.85]},
     r"rung_margin: expected 0 \(off\) or an AUC margin in \(0, 0.5\), got -0.01"),
    ({"rung_margin": "wide", "final_candidates": 2, "rung_fraction": [0.6, 0.85]},
     "rung_margin: expected a number, got 'wide'"),
    ({"rung_price": "seconds", "final_candidates": 4, "rerank": 4, "rung_fraction": [0.6, 0.85]},
     r"rung_price: 'seconds' reads .* \(or, with rung_margin, a list of them\) .* \[0.6, 0.85\]"),
    ({"rung_price": "seconds", "final_candidates": 2, "rung_fraction": [0.6, 1.0], "rung_margin": 0.01},
     r"rung_price: 'seconds' reads a rung of finalists inside the epoch: .* \[0.6, 1.0\]"),
    ({"rung_price": "seconds", "final_candidates": 2, "rung_fraction": [0.1, 0.85], "rung_margin": 0.01,
      "rung_probe": 0.1}, r"rung_probe: expected a share of the epoch in \(0, 0.1\), got 0.1"),
    ({"drop_tolerance": 0.7},
     r"drop_tolerance: expected an AUC margin in \[0, 0.5\) or null \(off\), got 0.7"),
    ({"drop_tolerance": -0.001}, r"drop_tolerance: expected an AUC margin .* got -0.001"),
    ({"drop_read": "trained", "drop_tolerance": 0.0},
     "drop_read: expected one of supernet, rerank, got 'trained'"),
    ({"drop_read": "rerank"}, r"drop_read: set without drop_tolerance \(the margin"),
    ({"drop_samples": 1000}, r"drop_samples: set without drop_tolerance"),
    ({"drop_samples": 0, "drop_tolerance": 0.0}, "drop_samples: expected an integer >= 1, got 0"),
    ({"drop_screen": 3000, "drop_tolerance": 0.0}, "drop_screen: set without drop_read 'rerank'"),
    ({"drop_screen": 0, "drop_tolerance": 0.0, "drop_read": "rerank"},
     "drop_screen: expected an integer >= 1"),
    ({"drop_clear": 0.0}, r"drop_clear: expected an AUC cost in \(0, 0.5\), got 0.0"),
    ({"screen_drops": False}, r"screen_drops: false without drop_tolerance would drop no feature"),
    ({"rerank_from": "crossing", "shared_crossings": 2}, "rerank_from: expected one of all, crossings, "
                                                          "got 'crossing'"),
    ({"rerank_from": "crossings"}, "rerank_from: 'crossings' is set without shared_crossings"),
    ({"crossing_layers": "last", "shared_crossings": 2},
     "crossing_layers: expected one of screen, first, got 'last'"),
    ({"crossing_layers": "first"}, r"crossing_layers: 'first' is set without shared_crossings"),
    ({"drop_from": "all", "drop_tolerance": 0.0}, "drop_from: expected one of each, first, got 'all'"),
    ({"drop_from": "first"}, r"drop_from: set without drop_tolerance \(no finalist's drops"),
    ({"screen_drops": "no", "drop_tolerance": 0.0}, "screen_drops: expected true or false, got 'no'"),
    ({"crossing_from": "all", "shared_crossings": 2},
     "crossing_from: expected one of screen, grid, got 'all'"),
    ({"crossing_from": "grid"}, r"crossing_from: 'grid' is set without shared_crossings \(how many"),
    ({"calibrate_from": "crossings", "calibrate": 2},
     "calibrate_from: expected one of space, shared, got 'crossings'"),
    ({"rung_price": "time"}, "rung_price: expected one of steps, seconds, got 'time'"),
    ({"rung_probe": 0.1}, r"rung_probe: set without rung_price 'seconds' \(only a read at equal seconds"),
    ({"rung_price": "seconds", "final_candidates": 2},
     r"rung_price: 'seconds' reads a rung of finalists inside the epoch: .* got rung_fraction \[1.0\]"),
    ({"rung_price": "seconds", "final_candidates": 2, "rung_fraction": 0.5, "rung_winner_seeds": 2},
     r"rung_price: 'seconds' reads .* seeds \[1, 2\]"),
    ({"rung_price": "seconds", "final_candidates": 2, "rung_fraction": 0.5, "rung_probe": 0.5},
     r"rung_probe: expected a share of the epoch in \(0, 0.5\), got 0.5"),
    ({"rung_price": "seconds", "final_candidates": 2, "rung_fraction": 0.5, "rung_probe": True},
     r"rung_probe: expected a number, got True"),
    ({"rerank_train": False, "rerank_steps": 10},
     "rerank_train: false with rerank_steps, which read the re-rank's trainings"),
    ({"rerank_train": False, "drop_tolerance": 0.0, "drop_read": "rerank", "rerank_speed_tie": 0.01},
     "rerank_train: false with drop_read 'rerank', rerank_speed_tie, which read"),
    ({"rerank_train": "no"}, "rerank_train: expected true or false, got 'no'"),
    ({"kind_neighbours": -2}, "kind_neighbours: expected an integer >= 0, got -2"),
    ({"kind_neighbours": True}, "kind_neighbours: expected an integer, got True"),
    ({"rescale": "dlrm"}, "'oneshot': rescale: expected true, false or a list of layer kinds, got 'dlrm'"),
    ({"rescale": [2]}, r"'oneshot': rescale: expected true, false or a list of layer kinds, got \[2\]"),
    ({"hash_rows": "mine"}, "strategy 'oneshot': hash_rows: expected one of shared, own, got 'mine'"),
    ({"hash_choice": "some"}, "strategy 'oneshot': hash_choice: expected one of search, full, got 'some'"),
    ({"width_columns": "own-ish"},
     "strategy 'oneshot': width_columns: expected one of shared, own, got 'own-ish'"),
    ({"fine_embedding_lr": 0.1},
     "strategy 'oneshot': fine_embedding_lr: the fine phase starts at shared_until, which is 0"),
    ({"shared_until": 10, "fine_embedding_lr": "x"}, "fine_embedding_lr: expected a number, got 'x'"),
    ({"shared_until": 10, "fine_embedding_lr": 0},
     "strategy 'oneshot': fine_embedding_lr: expected a learning rate > 0 or null, got 0"),
])
def test_bad_strategy_options(options, message):
    with pytest.raises(ValueError, match=message):
        make_strategy("oneshot", **options)


def test_rescale_takes_a_list_of_kinds_and_hash_rows_reaches_the_training():
    assert make_strategy("oneshot", rescale=["dlrm"]).train_options["rescale"] == ["dlrm"]
    assert make_strategy("oneshot", hash_rows="own").train_options["hash_rows"] == "own"
    fine = make_strategy("oneshot", shared_until=10, fine_embedding_lr=0.15).train_options
    assert fine["fine_embedding_lr"] == 0.15
    assert make_strategy("oneshot").train_options["fine_embedding_lr"] is None


def test_latency_cannot_be_a_proxy_objective(tmp_path):
    config = StudyConfig.load(write_study(tmp_path, strategy=ONESHOT, budget=BUDGET,
                                          objectives=["val_auc", "latency_ms"]))
    with pytest.raises(ValueError, match=r"\['latency_ms'\] cannot be scored without training"):
        run_study(config, log=quiet)


def test_kill_minus_nine_during_the_supernet_then_the_rerun_finishes_every_stage(tmp_path):
    path = write_study(tmp_path, strategy=ONESHOT, budget=BUDGET)
    config = StudyConfig.load(path)
    checkpoints = config.directory / "oneshot" / "supernet"
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    proc = subprocess.Popen([sys.executable, "-m", "autorec.cli", "search", str(path), "--json"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while latest(checkpoints) is None:  # kill once the supernet has a checkpoint to resume from
        assert proc.poll() is None, "the search ended before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.1)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()

    run_study(config, log=quiet)
    study = optuna.load_study(study_name="t", storage=open_storage(config.storage_url))
    record = study.user_attrs[ONESHOT_ATTR]
    assert record["supernet"]["steps"] == 30 and record["supernet"]["resumed_from"]
    assert "rescored" not in record  # this study does not rescore
    trials = study.get_trials(deepcopy=False)
    stages = [t.user_attrs.get("stage") for t in trials if t.state == TrialState.COMPLETE]
    # the re-rank, then the winner in full, then tau's calibration trainings (stage rerank too)
    assert stages == ["proxy"] * 12 + ["sample"] * 2 + ["rerank"] * 2 + ["final"] + ["rerank"] * 2
    for t in trials:  # each finished training keeps its best checkpoint, not its resumable one
        if t.user_attrs.get("stage") in ("rerank", "final"):
            assert sorted(p.name for p in Path(t.user_attrs["checkpoint"]).parent.iterdir()) == ["best"]
    samples = [t for t in trials if t.user_attrs.get("stage") == "sample"]
    assert [t.user_attrs["sample_index"] for t in samples] == [0, 1]
    assert record["calibration_numbers"] == [t.number for t in samples]  # drawn from the space
    space = SearchSpace.load(config.space)
    for t in trials:
        assert space.contains(trial_arch(t))
    rerank = [t for t in trials if t.user_attrs.get("stage") == "rerank"]
    assert record["tau_pairs"] == 4 and (record["kendall_tau"] is None or -1 <= record["kendall_tau"] <= 1)
    final = trials[-3]
    assert final.user_attrs["stage"] == "final"
    assert final.user_attrs["proxy_trial"] in {t.user_attrs["proxy_trial"] for t in rerank[:2]}
    assert 0 < final.user_attrs["metrics"]["test"]["auc"] < 1
    assert select_trials(study, trial=final.number)[0].number == final.number  # exportable

    figures = study_figures(study)  # the report draws the proxy against the trainings, with tau
    data = proxy_data(study)
    assert "proxy" in figures and len(data.trials) == 4 and data.tau == record["kendall_tau"]
    assert "Kendall's tau" in figures["proxy"].layout.title.text

    run_study(config, log=quiet)  # a finished one-shot study does nothing more
    again = optuna.load_study(study_name="t", storage=open_storage(config.storage_url))
    assert len(again.trials) == len(trials)


def test_a_space_of_per_feature_drops_and_hash_sizes_runs_every_stage(tmp_path):
    space = micro_space(tmp_path, "{dim: [0, 4, 8], hash: [1, 0.5]}")
    _, study = run_oneshot(tmp_path, {"steps": 6, "candidates": 10, "rerank": 2, "calibrate": 1},
                           space=str(space))
    specs = [trial_arch(t) for t in study.trials]
    assert any(s.dropped for s in specs) and any(t.hash_from for s in specs for t in s.tables)
    assert all(SearchSpace.load(space).contains(s) for s in specs)
    assert [t.user_attrs["stage"] for t in study.trials][-2:] == ["final", "rerank"]  # tau's last


def test_short_reranks_keep_tau_on_trainings_of_the_trial_budget(tmp_path):
    _, study = run_oneshot(tmp_path, {"steps": 6, "candidates": 10, "rerank": 2, "calibrate": 2,
                                      "rerank_steps": 1, "rerank_val_samples": 100})
    by_stage = {stage: of_stage(study, stage) for stage in ("sample", "rerank", "calibrate", "final")}
    assert [len(by_stage[s]) for s in ("sample", "rerank", "calibrate", "final")] == [2, 2, 4, 1]
    assert study.trials[-5].user_attrs["stage"] == "final"  # the answer before tau's trainings
    # batch 128: a re-rank trains 1 step, a calibration training the trial budget's 4
    assert {t.user_attrs["metrics"]["train_samples"] for t in by_stage["rerank"]} == {128}
    assert {t.user_attrs["metrics"]["train_samples"] for t in by_stage["calibrate"]} == {4 * 128}
    # a re-rank validates on the split's first 100 samples, tau's trainings on all of it
    assert {t.user_attrs["metrics"]["val"]["n"] for t in by_stage["rerank"]} == {100}
    assert min(t.user_attrs["metrics"]["val"]["n"] for t in by_stage["calibrate"]) > 100
    rerank_proxies = {t.user_attrs["proxy_trial"] for t in by_stage["rerank"]}
    calibrated = {t.user_attrs["proxy_trial"] for t in by_stage["calibrate"]}
    assert rerank_proxies < calibrated  # the re-ranked ones trained again on the trial budget
    record = study.user_attrs["oneshot"]
    assert record["tau_pairs"] == 4 and record["rerank_seconds"] > 0 and record["calibration_seconds"] > 0
    data = proxy_data(study)
    assert sorted(data.trials) == sorted(t.number for t in by_stage["calibrate"])
    # The winner is the re-ranked candidate of best short-training validation AUC.
    best = max(by_stage["rerank"], key=lambda t: t.user_attrs["metrics"]["val"]["auc"])
    assert by_stage["final"][0].user_attrs["proxy_trial"] == best.user_attrs["proxy_trial"]


def test_the_ray_backend_refuses_a_oneshot_study(tmp_path):
    from autorec.study import StudyConfigError
    from autorec.study.ray_runner import run_study_ray

    config = StudyConfig.load(write_study(tmp_path, strategy=ONESHOT, budget=BUDGET))
    with pytest.raises(StudyConfigError, match="a oneshot study runs on the local backend"):
        run_study_ray(config)


def test_a_rescore_ranks_the_screens_best_again_on_more_samples(tmp_path):
    config, study = run_oneshot(tmp_path, {"steps": 6, "candidates": 10, "rerank": 2, "calibrate": 2,
                                           "selection_samples": 128, "rescore": 4, "rescore_samples": 1000})
    record = study.user_attrs["oneshot"]
    proxies = {t.number: t for t in of_stage(study, "proxy")}
    samples = [t.number for t in of_stage(study, "sample")]
    rescored = {int(k): v for k, v in record["rescored"].items()}
    # the screen's 4 best distinct candidates and the 2 calibration samples, scored again
    screen = sorted(proxies.values(), key=lambda t: -t.user_attrs[PROXY_ATTR]["val_auc"])
    assert set(rescored) - set(samples) <= set(proxies) and set(samples) <= set(rescored)
    assert len(set(rescored) - set(samples)) == 4 and screen[0].number in rescored
    assert record["rescore_seconds"] > 0
    # a second look on 1000 samples, not the screen's 128: the scores differ
    assert any(rescored[n]["val_auc"] != proxies[n].user_attrs[PROXY_ATTR]["val_auc"]
               for n in set(rescored) & set(proxies))
    # the re-ranked ones are the rescore's best two, and their trials carry the rescore
    rerank = of_stage(study, "rerank")  # the chosen ones, then the calibration samples
    assert sorted(t.user_attrs["proxy_trial"] for t in rerank[2:]) == samples
    rerank = rerank[:2]
    best_two = sorted((n for n in rescored if n in proxies), key=lambda n: -rescored[n]["val_auc"])[:2]
    assert sorted(t.user_attrs["proxy_trial"] for t in rerank) == sorted(best_two)
    for t in rerank:
        assert t.user_attrs[PROXY_ATTR] == rescored[t.user_attrs["proxy_trial"]]
        assert t.user_attrs["screen"] == proxies[t.user_attrs["proxy_trial"]].user_attrs[PROXY_ATTR]
    run_study(config, log=quiet)  # a rerun scores nothing again
    assert optuna.load_study(study_name="t", storage=open_storage(config.storage_url)).user_attrs[
        "oneshot"]["rescored"] == record["rescored"]


def test_a_speed_tie_trains_the_fastest_reranked_candidate_in_full(tmp_path):
    # a margin no two scores exceed: every re-ranked candidate ties, so throughput alone picks
    _, study = run_oneshot(tmp_path, {"steps": 6, "candidates": 10, "rerank": 3, "calibrate": 0,
                                      "selection_samples": 128, "rerank_speed_tie": 0.49})
    speed = {t.user_attrs["proxy_trial"]: t.user_attrs["metrics"]["train_samples_per_s"]
             for t in of_stage(study, "rerank")}
    assert len(speed) == 3 and len(set(speed.values())) == 3  # measured, and distinct
    final = of_stage(study, "final")[0]
    assert final.user_attrs["proxy_trial"] == max(speed, key=speed.get)
    record = study.user_attrs[ONESHOT_ATTR]
    assert record["final_order"] == sorted(speed, key=lambda n: -speed[n])


def test_a_capacity_tie_reranks_and_trains_the_largest_of_the_near_best(tmp_path):
    # a margin no two scores exceed: every candidate ties, so capacity alone picks
    _, study = run_oneshot(tmp_path, {"steps": 6, "candidates": 10, "rerank": 2, "calibrate": 0,
                                      "selection_samples": 128, "capacity_tie": 0.49})
    proxies = distinct_best(of_stage(study, "proxy"), 99)
    flops = {t.number: t.user_attrs["costs"]["flops"] for t in proxies}
    assert len(set(flops.values())) >= 3  # the candidates differ in size (the test means something)
    rerank = {t.user_attrs["proxy_trial"] for t in of_stage(study, "rerank")}
    largest = sorted(flops, key=lambda n: -flops[n])[:2]
    assert sorted(flops[n] for n in rerank) == sorted(flops[n] for n in largest)
    final = of_stage(study, "final")[0]
    assert flops[final.user_attrs["proxy_trial"]] == max(flops.values())


def test_shared_crossings_score_every_all_alike_setting_on_the_screens_best_layers(tmp_path):
    space = micro_space(tmp_path, "{dim: [0, 4, 8], hash: [1, 0.5]}")
    _, study = run_oneshot(tmp_path, {"steps": 6, "candidates": 8, "rerank": 2, "calibrate": 0,
                                      "shared_crossings": 2, "shared_paths": 0.5}, space=str(space))
    proxies = of_stage(study, "proxy")
    screen = [t for t in proxies if "crossing" not in t.user_attrs]
    crossings = [t for t in proxies if "crossing" in t.user_attrs]
    assert len(screen) == 8 and [t.number for t in screen] == list(range(8))  # the screen first

    def setting(t) -> tuple[set[str], set[str]]:
        emb = {k: str(v) for k, v in t.params.items() if k.startswith("emb.")}
        return ({v for k, v in emb.items() if not k.endswith(".hash")},
                {v for k, v in emb.items() if k.endswith(".hash")})

    # the best layer setting of each of the two families (dlrm, dcnv2), each with width 0 once
    # and widths 4 and 8 at both hash sizes (a crossing the screen had scored is not scored twice)
    ranked = sorted(screen, key=lambda t: -t.user_attrs[PROXY_ATTR]["val_auc"])
    bests = [next(t for t in ranked if family(t) == kinds) for kinds in {family(t) for t in ranked}]
    assert len(bests) == 2
    assert {t.user_attrs["crossing"] for t in crossings} == {t.number for t in bests}
    assert 8 <= len(crossings) <= 10
    for t in crossings:
        widths, hashes = setting(t)
        assert len(widths) == 1 and len(hashes) == 1
        base = study.trials[t.user_attrs["crossing"]]
        assert layer_setting(t) == layer_setting(base)
    alike = {(w.pop(), h.pop()) for w, h in map(setting, crossings)}
    assert alike == {("0", "1"), ("4", "0.5"), ("4", "1"), ("8", "0.5"), ("8", "1")}
    specs = [trial_arch(t) for t in crossings]
    assert min(len(s.tables) for s in specs) == 1  # width 0: every feature dropped but the one kept
    assert all(SearchSpace.load(space).contains(s) for s in specs)


def test_hash_choice_full_proposes_and_draws_every_row(tmp_path):
    space = micro_space(tmp_path, "{dim: [0, 4, 8], hash: [1, 0.5]}")
    _, study = run_oneshot(tmp_path, {"steps": 6, "candidates": 8, "rerank": 2, "calibrate": 4,
                                      "shared_crossings": 2, "hash_choice": "full"}, space=str(space))
    proxies = of_stage(study, "proxy")
    assert len(proxies) > 8  # the screen and its crossings
    hashes = {str(v) for t in proxies for k, v in t.params.items() if k.endswith(".hash")}
    assert hashes == {"1"}
    assert not any(t.hash_from for p in proxies for t in trial_arch(p).tables)
    # the crossings: each width once (width 0 drops all but one feature), at every row
    widths = {str(v) for t in proxies if "crossing" in t.user_attrs
              for k, v in t.params.items() if k.startswith("emb.") and not k.endswith(".hash")}
    assert widths == {"0", "4", "8"}
    drawn = {str(v) for t in of_stage(study, "sample") for k, v in t.params.items() if k.endswith(".hash")}
    assert drawn == {"1"}  # tau's draws: from the space searched (one study, one value space per choice)
    assert {str(v) for t in of_stage(study, "sample") for k, v in t.params.items()
            if k.startswith("emb.") and not k.endswith(".hash")} == {"0", "4", "8"}
    for stage in ("rerank", "final"):
        assert not any(t.hash_from for p in of_stage(study, stage) for t in trial_arch(p).tables)


def test_rerank_from_crossings_reranks_only_the_all_alike_settings(tmp_path):
    space = micro_space(tmp_path, "{dim: [4, 8, 16]}")
    _, study = run_oneshot(tmp_path, {"steps": 6, "candidates": 8, "rerank": 3, "calibrate": 0,
                                      "shared_crossings": 2, "rerank_from": "crossings"}, space=str(space))
    by_number = {t.number: t for t in study.trials}
    reranked = [by_number[t.user_attrs["proxy_trial"]] for t in of_stage(study, "rerank")]
    assert len(reranked) == 3 and all("crossing" in t.user_attrs for t in reranked)
    for t in reranked:  # one width for every feature
        assert len({v for k, v in t.params.items() if k.startswith("emb.") and not k.endswith(".hash")}) == 1
    assert of_stage(study, "final")[0].user_attrs["proxy_trial"] in {t.number for t in reranked}


@pytest.mark.parametrize("objective", ["embedding_bytes", "params_bytes"])
def test_hash_choice_full_is_refused_beside_a_bytes_objective(tmp_path, objective):
    strategy = {"name": "oneshot", "options": {**ONESHOT["options"], "hash_choice": "full"}}
    config = StudyConfig.load(write_study(tmp_path, strategy=strategy, budget=BUDGET,
                                          objectives=["val_auc", objective]))
    with pytest.raises(ValueError, match=f"hash_choice: 'full' keeps every table's rows, so the objective "
                                         f"{objective} could not trade rows for bytes"):
        run_study(config, log=quiet)
    assert not (config.directory / "oneshot").exists()  # refused before the supernet trained


def run_by_kind(tmp_path: Path, options: dict) -> tuple[Path, optuna.Study]:
    """A short diverse study of families by kind (``options`` over it) on a space of 1-2 layers of
    two kinds: the space file and the study as stored."""
    space = tmp_path / "two_kinds.yaml"
    space.write_text("dim: [8]\nembedding: {dim: [4, 8], hash: [1]}\nover_arch: [[16]]\n"
                     "layers: {num: {low: 1, high: 2}, kinds: [dlrm, dcnv2]}\n")
    _, study = run_oneshot(tmp_path, {"steps": 6, "rerank": 2, "calibrate": 0, "diverse": True,
                                      "family": "kind", **options}, space=str(space))
    return space, study


def test_the_study_crosses_the_layers_its_family_option_names(tmp_path):
    _, study = run_by_kind(tmp_path, {"candidates": 16, "shared_crossings": 3})
    proxies = of_stage(study, "proxy")
    screen = [t for t in proxies if "crossing" not in t.user_attrs]
    crossed = {t.user_attrs["crossing"] for t in proxies if "crossing" in t.user_attrs}
    by_kind = {t.number for t in crossing_bases(screen, 3, "kind")}
    by_layers = {t.number for t in crossing_bases(screen, 3)}
    # (a base whose every all-alike setting the screen had already scored adds no trial)
    assert crossed and crossed <= by_kind
    # the test means something: by layer sequence the study would have crossed other layers
    assert crossed - by_layers, (crossed, by_kind, by_layers)


def test_kind_neighbours_score_the_best_candidates_with_one_layer_kind_changed(tmp_path):
    space, study = run_by_kind(tmp_path, {"candidates": 10, "kind_neighbours": 2})
    proxies = of_stage(study, "proxy")
    screen = [t for t in proxies if "neighbour_of" not in t.user_attrs]
    neighbours = [t for t in proxies if "neighbour_of" in t.user_attrs]
    assert len(screen) == 10 and [t.number for t in screen] == list(range(10))  # the screen first
    bases = in_family_turns(distinct_best(screen, len(screen)), "kind")[:2]
    assert neighbours and {t.user_attrs["neighbour_of"] for t in neighbours} <= {t.number for t in bases}
    for t in neighbours:
        base = study.trials[t.user_attrs["neighbour_of"]]
        changed = {k for k in t.params if str(t.params[k]) != str(base.params[k])}
        assert len(changed) == 1 and changed.pop() in ("layer0.kind", "layer1.kind")
        assert SearchSpace.load(space).contains(trial_arch(t))
    # every neighbour of both bases was scored (or the screen had scored it already)
    scored = {tuple(sorted((k, str(v)) for k, v in t.params.items())) for t in proxies}
    names = {k: [str(c) for c in d.choices] for k, d in bases[0].distributions.items()}
    for base in bases:
        for params in kind_neighbours({k: str(v) for k, v in base.params.items()}, names):
            assert tuple(sorted(params.items())) in scored


def test_a_diverse_screen_rescores_and_reranks_across_families(tmp_path):
    _, study = run_oneshot(tmp_path, {"steps": 6, "candidates": 16, "rerank": 2, "calibrate": 0,
                                      "selection_samples": 128, "rescore": 4, "rescore_samples": 1000,
                                      "diverse": True})
    proxies = of_stage(study, "proxy")
    rescored = {int(k) for k in study.user_attrs["oneshot"]["rescored"]}
    # the rescore took the screen's best in turns over its families
    expected = in_family_turns(distinct_best(proxies, len(proxies)))[:4]
    assert rescored == {t.number for t in expected}
    assert len({family(t) for t in proxies}) >= 2  # the space offers several (the test means something)
    rerank = of_stage(study, "rerank")
    kinds = [tuple(layer["kind"] for layer in t.user_attrs["arch"]["layers"]) for t in rerank]
    assert len(rerank) == 2 and kinds[0] != kinds[1]  # two families re-ranked


def test_final_candidates_each_train_the_first_epoch_and_the_best_goes_on(tmp_path):
    _, study = run_oneshot(tmp_path, {"steps": 6, "candidates": 10, "rerank": 3, "calibrate": 0,
                                      "rerank_steps": 1, "rerank_val_samples": 100, "final_epochs": 2,
                                      "final_candidates": 2})
    rerank, rung, final = (of_stage(study, s) for s in ("rerank", "final_rung", "final"))
    assert len(rerank) == 3 and len(rung) == 2 and len(final) == 1
    by_rerank = sorted(rerank, key=lambda t: -t.user_attrs["metrics"]["val"]["auc"])
    # the re-rank's two best train one epoch each; the better by validation AUC goes on
    assert {t.user_attrs["proxy_trial"] for t in rung} == {t.user_attrs["proxy_trial"] for t in by_rerank[:2]}
    best = max(rung, key=lambda t: t.user_attrs["metrics"]["val"]["auc"])
    record = study.user_attrs[ONESHOT_ATTR]
    assert final[0].user_attrs["proxy_trial"] == best.user_attrs["proxy_trial"] == record["rung_winner"]
    assert final[0].user_attrs["metrics"]["resumed_from"]["epoch"] == 1  # its first epoch is the rung's
    assert all(len(t.user_attrs["metrics"]["val"]) and not t.user_attrs["metrics"]["test"] for t in rung)
    loser = next(t for t in rung if t is not best)
    assert sorted(p.name for p in Path(loser.user_attrs["checkpoint"]).parent.iterdir()) == ["best"]
    assert sorted(p.name for p in Path(final[0].user_attrs["checkpoint"]).parent.iterdir()) == ["best"]
    seconds = record["rung_seconds"]
    assert record["rung_loser_seconds"] == seconds[str(loser.user_attrs["proxy_trial"])] > 0
    # the final's seconds: its first epoch (in the rung) and the rest
    assert record["final_seconds"] > seconds[str(best.user_attrs["proxy_trial"])]
    assert 0 < final[0].user_attrs["metrics"]["test"]["auc"] < 1
    # the rung goes by validation AUC, not by the re-rank's order: given the finalists the other way
    # round too (their rung trainings are recorded, so nothing trains), the same one goes on
    proxies = {t.number: t for t in study.trials}
    finalists = [proxies[t.user_attrs["proxy_trial"]] for t in by_rerank[:2]]
    folder = Path(loser.user_attrs["checkpoint"]).parents[1]
    cfg = TrainConfig(checkpoint_dir=str(folder))
    for order in (finalists, finalists[::-1]):
        chosen, chosen_cfg = final_rung(None, study, None, order, cfg, dict(record), lambda t: {}, quiet)
        assert chosen.number == record["rung_winner"]
        assert chosen_cfg.checkpoint_dir == str(folder / str(chosen.number))


def test_a_one_epoch_final_is_the_rung_winners_training_and_trains_no_more(tmp_path):
    _, study = run_oneshot(tmp_path, {"steps": 6, "candidates": 10, "rerank": 3, "calibrate": 0,
                                      "rerank_steps": 1, "rerank_val_samples": 100, "final_epochs": 1,
                                      "final_candidates": 2})
    rung, final = of_stage(study, "final_rung"), of_stage(study, "final")
    best = max(rung, key=lambda t: t.user_attrs["metrics"]["val"]["auc"])
    metrics = final[0].user_attrs["metrics"]
    # the final resumes after the rung's epoch, the last of its budget: the same model, tested
    assert metrics["resumed_from"]["epoch"] == 1 and metrics["best_epoch"] == 0
    assert metrics["val"] == best.user_attrs["metrics"]["val"]
    assert metrics["train_samples"] == best.user_attrs["metrics"]["train_samples"]
    assert 0 < metrics["test"]["auc"] < 1 and not best.user_attrs["metrics"]["test"]
    record = study.user_attrs[ONESHOT_ATTR]
    rung_s = record["rung_seconds"][str(best.user_attrs["proxy_trial"])]
    assert rung_s < record["final_seconds"] < rung_s + metrics["seconds"] + 1


def test_rung_seeds_restart_the_first_epoch_and_the_best_seed_goes_on(tmp_path):
    config, study = run_oneshot(tmp_path, {"steps": 6, "candidates": 10, "rerank": 2, "calibrate": 0,
                                           "rerank_steps": 1, "rerank_val_samples": 100, "final_epochs": 2,
                                           "rung_seeds": 2})
    rung, final = of_stage(study, "final_rung"), of_stage(study, "final")
    record = study.user_attrs[ONESHOT_ATTR]
    # one finalist (final_candidates 1), its first epoch under the study's seed and the next one
    assert len({t.user_attrs["proxy_trial"] for t in rung}) == 1 and len(final) == 1
    assert sorted(t.user_attrs["train_seed"] for t in rung) == [config.seed, config.seed + 1]
    aucs = [t.user_attrs["metrics"]["val"]["auc"] for t in rung]
    assert aucs[0] != aucs[1]  # another seed, another training (the test means something)
    best = max(rung, key=lambda t: t.user_attrs["metrics"]["val"]["auc"])
    loser = next(t for t in rung if t is not best)
    assert final[0].user_attrs["train_seed"] == best.user_attrs["train_seed"] == record["rung_winner_seed"]
    assert final[0].user_attrs["proxy_trial"] == record["rung_winner"]
    assert final[0].user_attrs["metrics"]["resumed_from"]["epoch"] == 1  # from the winning seed's epoch
    assert Path(final[0].user_attrs["checkpoint"]).parent == Path(best.user_attrs["checkpoint"]).parent
    assert sorted(p.name for p in Path(loser.user_attrs["checkpoint"]).parent.iterdir()) == ["best"]
    number = record["rung_winner"]
    name = {config.seed: str(number), config.seed + 1: f"{number}-seed{config.seed + 1}"}
    assert sorted(record["rung_seconds"]) == sorted(name.values())
    assert record["rung_loser_seconds"] == record["rung_seconds"][name[loser.user_attrs["train_seed"]]] > 0
    assert record["final_seconds"] > record["rung_seconds"][name[best.user_attrs["train_seed"]]]
    # a rerun reads the rung back (its trainings are recorded): the same (candidate, seed) goes on
    folder = Path(best.user_attrs["checkpoint"]).parents[1]
    proxies = {t.number: t for t in study.trials}
    cfg = TrainConfig(checkpoint_dir=str(folder), seed=config.seed)
    chosen, chosen_cfg = final_rung(None, study, None, [proxies[number]], cfg, dict(record), lambda t: {},
                                     quiet, seeds=2)
    assert (chosen.number, chosen_cfg.seed) == (number, record["rung_winner_seed"])
    assert chosen_cfg.checkpoint_dir == str(Path(best.user_attrs["checkpoint"]).parent)


def test_rung_winner_seeds_restart_only_the_finalist_that_led(tmp_path):
    config, study = run_oneshot(tmp_path, {"steps": 6, "candidates": 10, "rerank": 3, "calibrate": 0,
                                           "rerank_steps": 1, "rerank_val_samples": 100, "final_epochs": 2,
                                           "final_candidates": 2, "rung_winner_seeds": 2})
    rung, final = of_stage(study, "final_rung"), of_stage(study, "final")
    record = study.user_attrs[ONESHOT_ATTR]
    first = [t for t in rung if t.user_attrs["train_seed"] == config.seed]
    again = [t for t in rung if t.user_attrs["train_seed"] == config.seed + 1]
    assert len(first) == 2 and len(again) == 1 and len(rung) == 3  # two finalists, one restart
    leader = max(first, key=lambda t: t.user_attrs["metrics"]["val"]["auc"])
    assert again[0].user_attrs["proxy_trial"] == leader.user_attrs["proxy_trial"]  # the leader's restart
    best = max(rung, key=lambda t: t.user_attrs["metrics"]["val"]["auc"])  # the best of all three goes on
    assert (final[0].user_attrs["proxy_trial"], final[0].user_attrs["train_seed"]) == (
        record["rung_winner"], record["rung_winner_seed"]) == (
        best.user_attrs["proxy_trial"], best.user_attrs["train_seed"])
    assert len(record["rung_seconds"]) == 3
    number, seed = record["rung_winner"], record["rung_winner_seed"]
    went_on = str(number) if seed == config.seed else f"{number}-seed{seed}"
    losers = sum(record["rung_seconds"].values()) - record["rung_seconds"][went_on]
    assert record["rung_loser_seconds"] == pytest.approx(losers) and losers > 0
