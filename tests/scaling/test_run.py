"""``autorec scale``: a ladder study trains every rung once (also after kill -9), writes the fits
and the page, scales a searched export beside the presets, and refuses bad requests clearly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import optuna
import pytest
import yaml
from optuna.trial import TrialState

from autorec.cli import main
from autorec.data import load_dataset
from autorec.export import export_trained
from autorec.presets import preset
from autorec.study import StudyConfig, open_storage
from autorec.train.trainer import TrainConfig, Trainer
from benchmarks.localhost_nodes import trial_states

DATA = {"name": "synthetic", "options": {"preset": "tiny", "num_samples": 6000}, "seed": 0}


def ladder_file(tmp_path: Path, **changes) -> Path:
    config = {"name": "lad", "data": DATA,
              "strategy": {"name": "ladder",
                           "options": {"families": ["dcnv2", "wukong"], "rungs": 4, "dim": 4}},
              "budget": {"epochs": 1, "batch_size": 64}, "pruner": "none", "seed": 0}
    config.update(changes)
    path = tmp_path / "scaling.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def rungs_of(path: Path) -> Counter:
    config = StudyConfig.load(path)
    study = optuna.load_study(study_name=config.name, storage=open_storage(config.storage_url))
    return Counter((t.user_attrs["scale"]["family"], t.user_attrs["scale"]["rung"])
                   for t in study.get_trials(states=(TrialState.COMPLETE,)))


def completed_trials(db: Path) -> int:
    """COMPLETE trials in the SQLite study at ``db``, read without opening an Optuna storage on
    it (which would race the run under test to create its tables)."""
    return trial_states(db)["COMPLETE"]


@pytest.mark.slow  # 65 s; kill -9 and resume stay in make test (faults/test_kill.py, oneshot/test_run.py)
def test_kill_minus_nine_then_the_rerun_trains_each_remaining_rung_once(tmp_path):
    # Rungs of some seconds each (40k samples), so the kill lands while rungs remain.
    path = ladder_file(tmp_path, data={**DATA, "options": {"preset": "tiny", "num_samples": 40000}})
    command = [sys.executable, "-m", "autorec.cli", "scale", str(path), "--json", "--bootstrap", "20"]
    proc = subprocess.Popen(command,
                            env={**os.environ, "PYTHONWARNINGS": "ignore"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    db = tmp_path / "lad" / "study.db"
    deadline = time.monotonic() + 300
    try:
        while completed_trials(db) < 1:
            assert proc.poll() is None, "the ladder ended before it could be killed"
            assert time.monotonic() < deadline
            time.sleep(0.2)
    finally:  # (a failed wait must not leave the ladder running)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    done_before = completed_trials(db)
    assert 1 <= done_before < 8

    assert main(["scale", str(path), "--bootstrap", "20"]) == 0
    assert rungs_of(path) == Counter({(f, r): 1 for f in ("dcnv2", "wukong") for r in range(4)})
    record = json.loads((tmp_path / "lad" / "scaling.json").read_text())
    for family in ("dcnv2", "wukong"):
        assert record[f"{family}_rungs"] == 4 and record[f"{family}_flops_span_decades"] > 1.0
        assert isinstance(record[f"{family}_alpha"], float)
        assert record[f"{family}_holdout_rel_err"] >= 0
        assert [r["rung"] for r in record["rungs"][family]] == [0, 1, 2, 3]
    data = load_dataset("synthetic", seed=0, preset="tiny", num_samples=40000)
    assert record["bayes_logloss"] == pytest.approx(data.bayes_logloss("test"))
    page = (tmp_path / "lad" / "scaling.html").read_text()
    assert 'id="figure-scaling"' in page and "gains most per tenfold compute" in page


def test_a_growing_data_budget_trains_each_rung_on_its_samples(tmp_path):
    # 6000 samples: 4800 training rows, 75 steps of 64 per pass; rung 2 wants 9600 samples (150
    # steps): two passes of 75 steps, never stopped early.
    strategy = {"name": "ladder", "options": {"families": ["dlrm"], "rungs": 3, "dim": 4,
                                              "samples": [600, 9600]}}
    path = ladder_file(tmp_path, strategy=strategy, budget={"epochs": 1, "batch_size": 64, "patience": 1})
    assert main(["scale", str(path), "--bootstrap", "10"]) == 0
    config = StudyConfig.load(path)
    study = optuna.load_study(study_name=config.name, storage=open_storage(config.storage_url))
    trials = sorted(study.get_trials(states=(TrialState.COMPLETE,)),
                    key=lambda t: t.user_attrs["scale"]["rung"])
    assert [t.user_attrs["scale"]["samples"] for t in trials] == [600, 2400, 9600]
    assert [t.user_attrs["train_overrides"] for t in trials] == [
        {"epochs": 1, "max_steps_per_epoch": 10, "patience": 1},
        {"epochs": 1, "max_steps_per_epoch": 38, "patience": 1},
        {"epochs": 2, "max_steps_per_epoch": 75, "patience": 2}]
    assert [t.user_attrs["metrics"]["train_samples"] for t in trials] == [640, 2432, 9600]
    record = json.loads((tmp_path / "lad" / "scaling.json").read_text())
    computes = [r["compute"] for r in record["rungs"]["dlrm"]]
    assert computes == [t.user_attrs["costs"]["train_flops"] * t.user_attrs["metrics"]["train_samples"]
                        for t in trials]


def test_a_searched_export_is_scaled_beside_the_presets(tmp_path):
    data = load_dataset("synthetic", seed=0, **DATA["options"])
    winner = preset("dlrm", data.schema, dim=4).replace(name="winner")
    train = TrainConfig(epochs=1, batch_size=64, max_steps_per_epoch=2, progress=False)
    trainer = Trainer(winner, data, train)
    export_trained(trainer, tmp_path / "winner", metrics=trainer.fit().to_dict(), retrain_command="-")
    strategy = {"name": "ladder", "options": {"families": ["dlrm"], "rungs": 3, "dim": 4}}
    path = ladder_file(tmp_path, strategy=strategy, budget={"epochs": 1, "batch_size": 256,
                                                            "max_steps_per_epoch": 2})
    assert main(["scale", str(path), "--from-export", str(tmp_path / "winner"), "--bootstrap", "20",
                 "--out", str(tmp_path / "out")]) == 0
    assert rungs_of(path) == Counter({(f, r): 1 for f in ("dlrm", "searched") for r in range(3)})
    config = StudyConfig.load(path)
    study = optuna.load_study(study_name=config.name, storage=open_storage(config.storage_url))
    searched = [t for t in study.trials if t.user_attrs["scale"]["family"] == "searched"]
    grown = {t.user_attrs["scale"]["rung"]: tuple(t.user_attrs["arch"]["over_arch"]) for t in searched}
    assert grown == {0: (256, 128), 1: (640, 320), 2: (1600, 800)}  # the winner's, x2.5 per rung
    assert json.loads((tmp_path / "out" / "scaling.json").read_text())["searched_rungs"] == 3


@pytest.mark.slow  # 85 s; the Ray backend stays in make test through study/test_ray_runner.py
def test_the_rungs_run_as_ray_trials_in_parallel(tmp_path):
    pytest.importorskip("ray")
    strategy = {"name": "ladder", "options": {"families": ["dlrm", "wukong"], "rungs": 3, "dim": 4,
                                              "samples": [256, 1024]}}  # 1, 2 and 4 steps of 256
    path = ladder_file(tmp_path, strategy=strategy, budget={"epochs": 1, "batch_size": 256,
                                                            "max_steps_per_epoch": 2})
    assert main(["scale", str(path), "--backend", "ray", "--workers", "2", "--bootstrap", "10"]) == 0
    assert rungs_of(path) == Counter({(f, r): 1 for f in ("dlrm", "wukong") for r in range(3)})
    record = json.loads((tmp_path / "lad" / "scaling.json").read_text())
    assert record["wukong_rungs"] == 3
    # each Ray trial trained on its rung's samples (the overrides travel with the trial)
    assert [r["compute"] / r["flops"] / 3 for r in record["rungs"]["dlrm"]] == pytest.approx([256, 512, 1024],
                                                                                           rel=0.05)


@pytest.mark.parametrize("changes, message", [
    ({"strategy": "tpe", "space": "../search_spaces/zoo.yaml"}, "autorec scale runs a ladder study"),
    ({"strategy": "tpe"}, "space: required by strategy 'tpe'"),
    ({"pruner": "median"}, "pruner: a ladder trains every rung to its budget"),
    ({"strategy": {"name": "ladder", "options": {"families": ["transformer"]}}},
     "no scaling rule for 'transformer'; the kinds with one: dcnv2, dhen, dlrm, mlp, wukong"),
    ({"strategy": {"name": "ladder", "options": {"families": ["searched"]}}}, "'searched' needs export"),
    ({"strategy": {"name": "ladder", "options": {"families": ["dlrm", "dlrm"]}}}, "expected distinct names"),
    ({"strategy": {"name": "ladder", "options": {"rungs": 0}}}, "rungs and dim: expected integers >= 1"),
    ({"strategy": {"name": "ladder", "options": {"rungs": "five"}}}, "rungs: expected an integer"),
    ({"strategy": {"name": "ladder", "options": {"samples": [4000, 1000]}}},
     "samples: expected a number of samples >= 1, or [first, last] with 1 <= first <= last"),
    ({"strategy": {"name": "ladder", "options": {"samples": 0}}}, "got 0"),
    ({"strategy": {"name": "ladder", "options": {"samples": [1, 2, 3]}}}, "got [1, 2, 3]"),
    ({"strategy": {"name": "ladder", "options": {"samples": "many"}}}, "samples"),
])
def test_bad_ladder_files(tmp_path, capsys, changes, message):
    if changes.get("space"):
        changes["space"] = str(Path(__file__).resolve().parents[2] / "search_spaces" / "zoo.yaml")
    path = ladder_file(tmp_path, **changes)
    assert main(["scale", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and str(path) in err
    assert not (tmp_path / "lad").exists()  # nothing was started


def test_bad_exports(tmp_path, capsys):
    path = ladder_file(tmp_path)
    assert main(["scale", str(path), "--from-export", str(tmp_path / "nowhere")]) == 2
    assert "--from-export" in capsys.readouterr().err
    other = load_dataset("synthetic", preset="tiny", num_samples=500, num_tables=3, rows=[10, 20, 30],
                         pooling=[1.0, 1.0, 1.0])
    (tmp_path / "x").mkdir()
    preset("dlrm", other.schema, dim=4).save(tmp_path / "x" / "arch.json")
    assert main(["scale", str(path), "--from-export", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert (f"export {tmp_path / 'x'}: its architecture reads 3 dense and ['cat_0', 'cat_1', 'cat_2'], "
            "the study's data") in err
    assert not rungs_of(path)  # no rung trained
