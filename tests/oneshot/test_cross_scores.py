"""benchmarks/oneshot_cross_scores.py scores each seed's one-shot winner on every seed's supernet."""

from __future__ import annotations

import json
import weakref
from pathlib import Path

import optuna
import pytest

from benchmarks import oneshot_cross_scores as cross_module
from benchmarks.oneshot_cross_scores import (
    borrowed_tau,
    calibration_pairs,
    cross_scores,
    main,
    one_at_a_time,
    pooled_pairs,
    tau_trainings,
    training_key,
    winners,
)
from benchmarks.oneshot_tau_ceiling import retrain, tau_trials
from benchmarks.oneshot_tpe_proxy import load_supernet
from benchmarks.study_archive import archive_trained, open_oneshot, trained_archive_path
from tests.studyfiles import run_micro_oneshot


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return run_micro_oneshot(tmp_path_factory.mktemp("cross"), "_x", (0, 1), calibrate=2)


def test_each_winner_is_scored_on_each_supernet(root):
    won = winners("_x", [0, 1], root)
    for seed in (0, 1):
        name = f"oneshot_x_seed{seed}"
        study = optuna.load_study(study_name=name, storage=f"sqlite:///{root / name / name / 'study.db'}")
        final = next(t for t in study.trials if t.user_attrs.get("stage") == "final")
        assert won[seed]["trial"] == final.user_attrs["proxy_trial"]
        assert won[seed]["val_aucs"] == [final.user_attrs["metrics"]["val"]["auc"]]  # one training seed
    figures = cross_scores("_x", "_x", [0, 1], 512, root)
    for i in (0, 1):
        rescored = json.loads(json.dumps(optuna.load_study(
            study_name=f"oneshot_x_seed{i}",
            storage=f"sqlite:///{root / f'oneshot_x_seed{i}' / f'oneshot_x_seed{i}' / 'study.db'}",
        ).user_attrs["oneshot"]["rescored"]))
        scores = sorted(v["val_auc"] for v in rescored.values())
        assert figures[f"x_seed{i}_rescored_best"] == scores[-1]
        for j in (0, 1):
            score = figures[f"x_seed{i}_scores_x_seed{j}"]
            assert 0.0 < score < 1.0
            assert figures[f"x_seed{i}_scores_x_seed{j}_rank"] == 1 + sum(v > score for v in scores)
        # a study's own winner was among its rescored candidates, scored on the same samples
        own = rescored[str(won[i]["trial"])]["val_auc"]
        assert figures[f"x_seed{i}_scores_x_seed{i}"] == pytest.approx(own, abs=1e-6)
    assert figures["x_seed0_draws"] == figures["x_seed1_draws"] == 1
    assert not any(k.endswith("_full_hash") for k in figures)


def test_full_hash_scores_each_winner_with_every_row_kept(root):
    won = winners("_x", [0, 1], root)
    figures = cross_scores("_x", "_x", [0, 1], 512, root, with_full_hash=True)
    for i in (0, 1):
        for j in (0, 1):
            hashed = {k: v for k, v in won[j]["params"].items() if k.endswith(".hash")}
            kept = figures[f"x_seed{i}_scores_x_seed{j}_full_hash"]
            assert 0.0 < kept < 1.0
            if all(float(v) == 1 for v in hashed.values()):  # nothing hashed: the same path
                assert kept == figures[f"x_seed{i}_scores_x_seed{j}"]


def test_the_command_line_refuses_bad_input_and_names_a_missing_study(root, tmp_path, capsys):
    out = tmp_path / "out.json"
    with pytest.raises(SystemExit):
        main(["--tag", "x", "--winners", "_x", "--root", str(root), "--out", str(out)])
    assert "--tag: expected a run's tag, which starts with '_'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--tag", "_x", "--winners", "_x", "--seeds", "0;1", "--root", str(root), "--out", str(out)])
    assert "--seeds: expected integers separated by commas, got '0;1'" in capsys.readouterr().err
    with pytest.raises(SystemExit, match=r"oneshot_x_seed5/study.db: no study, and no archive of its trai"):
        main(["--tag", "_x", "--winners", "_x", "--seeds", "5", "--root", str(root), "--out", str(out)])
    assert not out.exists()
    main(["--tag", "_x", "--winners", "_x", "--seeds", "0,1", "--samples", "512", "--root", str(root),
          "--out", str(out)])
    record = json.loads(out.read_text())
    assert record["samples"] == 512 and "x_by_x_commit" in record and "x_seed1_scores_x_seed0" in record
    with pytest.raises(SystemExit):
        main(["--tag", "_x", "--winners", "_x", "--tau-from", "x", "--root", str(root), "--out", str(out)])
    assert "--tau-from: expected a run's tag" in capsys.readouterr().err


def test_a_tau_borrowed_from_a_runs_own_calibration_on_its_own_supernet_is_its_own_tau(root):
    name = "oneshot_x_seed1"
    study = optuna.load_study(study_name=name, storage=f"sqlite:///{root / name / name / 'study.db'}")
    record = study.user_attrs["oneshot"]
    pairs = calibration_pairs("_x", 1, root)
    assert len(pairs) == record["tau_pairs"] == 4  # the 2 re-ranked and the 2 draws, on the trial budget
    figures = borrowed_tau("_x", ["_x"], [1], 512, root)
    assert figures["x_seed1_kendall_tau_on_x_pairs"] == 4
    assert figures["x_seed1_kendall_tau_on_x"] == pytest.approx(record["kendall_tau"])


def test_a_pooled_tau_scores_every_seeds_trainings_once_on_each_supernet(root):
    pool = pooled_pairs(["_x", "_x"], [0, 1], root)  # a run named twice adds nothing
    own = calibration_pairs("_x", 0, root) + calibration_pairs("_x", 1, root)
    distinct = {json.dumps(p, sort_keys=True) for p, _ in own}
    assert len(pool) == len(distinct) >= 5
    figures = borrowed_tau("_x", ["_x"], [0, 1], 512, root, pool=True)
    assert figures["x_seed0_kendall_tau_on_x_pooled01_pairs"] == len(pool)  # the key names the pool
    assert figures["x_seed1_kendall_tau_on_x_pooled01_pairs"] == len(pool)
    assert -1 <= figures["x_seed0_kendall_tau_on_x_pooled01"] <= 1
    one = borrowed_tau("_x", ["_x"], [0], 512, root, pool=True, pool_seeds=[1])  # seed 1's trainings
    assert one["x_seed0_kendall_tau_on_x_pooled1_pairs"] == len(calibration_pairs("_x", 1, root))
    with pytest.raises(SystemExit, match=r"oneshot_x_seed0: its search trained no kind heads"):
        borrowed_tau("_x", ["_x"], [0], 512, root, heads=True)


def test_a_runs_trainings_are_read_from_their_archive_once_its_study_is_gone(root, tmp_path):
    """A new machine without ``~/.cache``: the winners and tau's pairs come from the archive."""
    archive_dir = tmp_path / "studies"
    for seed in (0, 1):
        name = f"oneshot_x_seed{seed}"
        study = optuna.load_study(study_name=name, storage=f"sqlite:///{root / name / name / 'study.db'}")
        trained = [t for t in study.trials if t.user_attrs.get("stage") in ("rerank", "calibrate", "final")]
        count = archive_trained(name, f"sqlite:///{root / name / name / 'study.db'}",
                                trained_archive_path(archive_dir, name))
        assert count == len(trained) < len(study.trials)  # the screen's proxy trials stay behind
    gone = tmp_path / "new-machine"
    assert winners("_x", [0, 1], gone, archive_dir) == winners("_x", [0, 1], root)
    assert calibration_pairs("_x", 1, gone, archive_dir) == calibration_pairs("_x", 1, root)
    with pytest.raises(SystemExit, match=r"oneshot_x_seed2/study.db: no study, and no archive"):
        calibration_pairs("_x", 2, gone, archive_dir)
    trained_archive_path(archive_dir, "oneshot_x_seed2").write_text("")
    with pytest.raises(SystemExit, match=r"oneshot_x_seed2.jsonl holds no study 'oneshot_x_seed2'"):
        calibration_pairs("_x", 2, gone, archive_dir)


def test_tau_pairs_are_the_draws_rerank_trainings_where_reranks_train_on_the_trial_budget(tmp_path):
    """Re-ranks on the trial budget train the draws as stage ``rerank``: those named in
    ``calibration_numbers`` are tau's pairs, the method's own re-ranks are not."""
    name = "oneshot_y_seed0"
    (tmp_path / name / name).mkdir(parents=True)
    study = optuna.create_study(study_name=name, storage=f"sqlite:///{tmp_path / name / name / 'study.db'}")
    dist = {"w": optuna.distributions.CategoricalDistribution(["4", "8", "16"])}
    for number, (stage, proxy, auc) in enumerate([("rerank", 10, 0.61), ("rerank", 11, 0.62),
                                                  ("rerank", 12, 0.63), ("calibrate", 13, 0.64)]):
        study.add_trial(optuna.trial.create_trial(
            params={"w": ["4", "8", "16", "8"][number]}, distributions=dist, value=auc,
            user_attrs={"stage": stage, "proxy_trial": proxy, "metrics": {"val": {"auc": auc}}}))
    study.set_user_attr("oneshot", {"calibration_numbers": [11, 12]})
    pairs = [({"w": "8"}, 0.62), ({"w": "16"}, 0.63), ({"w": "8"}, 0.64)]
    assert calibration_pairs("_y", 0, tmp_path) == pairs


def test_the_tau_ceiling_trains_taus_architectures_again_under_another_seed(root, tmp_path):
    name = "oneshot_x_seed1"
    study = optuna.load_study(study_name=name, storage=f"sqlite:///{root / name / name / 'study.db'}")
    record = study.user_attrs["oneshot"]
    own_seed = {t.user_attrs["train_seed"] for t, _ in tau_trials(study)}
    assert len(tau_trials(study)) == record["tau_pairs"] == 4 and len(own_seed) == 1
    with pytest.raises(SystemExit, match=r"--train-seed .*: the study trained trial \d+ under that seed"):
        retrain("_x", 1, own_seed.pop(), root, tmp_path)
    figures = retrain("_x", 1, 99, root, tmp_path)
    assert figures["pairs"] == 4
    assert figures["proxy_tau"] == pytest.approx(record["kendall_tau"])  # the study's own tau
    assert -1 <= figures["retest_tau"] <= 1 and figures["mean_abs_retest_diff"] > 0  # another seed
    kinds = [t.user_attrs["arch"]["layers"][0]["kind"] for t, _ in tau_trials(study)]
    same_kind = sum(a == b for i, a in enumerate(kinds) for b in kinds[i + 1:])
    assert (figures["proxy_tau_within_kind"] is None) == (same_kind == 0)  # over pairs of one kind only
    kept = json.loads((tmp_path / f"{name}_train_seed99.json").read_text())
    assert len(kept) == 4
    assert retrain("_x", 1, 99, root, tmp_path) == figures  # a rerun trains nothing again
    with pytest.raises(SystemExit, match=r"oneshot_x_seed7/study.db: no study"):
        retrain("_x", 7, 99, root, tmp_path)


def test_the_tau_ceiling_on_the_finals_budget_trains_every_step_of_whole_epochs(root, tmp_path, monkeypatch):
    from autorec.train import trainer as trainer_module

    configs = []

    class Recorded(trainer_module.Trainer):  # the real trainer, its configs kept
        def __init__(self, spec, dataset, config, *args, **kwargs):
            configs.append(config)
            super().__init__(spec, dataset, config, *args, **kwargs)
    monkeypatch.setattr(trainer_module, "Trainer", Recorded)
    name = "oneshot_x_seed1"
    study = optuna.load_study(study_name=name, storage=f"sqlite:///{root / name / name / 'study.db'}")
    (own,) = {t.user_attrs["train_seed"] for t, _ in tau_trials(study)}
    with pytest.raises(SystemExit, match=r"--epochs: expected a whole number of epochs >= 1, got 0"):
        retrain("_x", 1, None, root, tmp_path, epochs=0)
    figures = retrain("_x", 1, None, root, tmp_path, epochs=2)
    assert figures["pairs"] == 4 and figures["train_seed"] == own  # only the budget differs
    assert len(configs) == 4
    assert all(c.epochs == 2 and c.max_steps_per_epoch is None and c.resume and c.seed == own
               for c in configs)
    assert figures["mean_abs_retest_diff"] > 0  # longer trainings: other AUCs
    assert len(json.loads((tmp_path / f"{name}_train_seed{own}_epochs2.json").read_text())) == 4
    assert retrain("_x", 1, None, root, tmp_path, epochs=2) == figures and len(configs) == 4  # kept
    # a supernet's tau against those full trainings, borrowed as from the trial budget's
    kept = json.loads((tmp_path / f"{name}_train_seed{own}_epochs2.json").read_text())
    pairs = calibration_pairs("_x", 1, root, epochs=2, out_dir=tmp_path)
    assert [auc for _, auc in pairs] == [kept[training_key(t)] for t, _ in tau_trials(study)]
    # on a machine without the study, from its archive (replayed under other trial numbers)
    archive_dir = tmp_path / "studies"
    storage = f"sqlite:///{root / name / name / 'study.db'}"
    archive_trained(name, storage, trained_archive_path(archive_dir, name))
    archived = open_oneshot(tmp_path / "gone", name, archive_dir)
    renumbered = [t.number for t in tau_trainings(archived)]
    assert renumbered != [t.number for t, _ in tau_trials(study)]
    assert calibration_pairs("_x", 1, tmp_path / "gone", archive_dir, epochs=2, out_dir=tmp_path) == pairs
    borrowed = borrowed_tau("_x", ["_x"], [1], 512, root, epochs=2, out_dir=tmp_path)
    assert borrowed["x_seed1_kendall_tau_on_x_epochs2_pairs"] == 4
    assert borrowed["x_seed1_kendall_tau_on_x_epochs2"] == pytest.approx(figures["proxy_tau_second"])
    out = tmp_path / "cross.json"  # the command line reads them from --tau-dir
    main(["--tag", "_x", "--winners", "_x", "--seeds", "1", "--samples", "512", "--tau-from", "_x",
          "--tau-epochs", "2", "--tau-dir", str(tmp_path), "--root", str(root), "--out", str(out)])
    tau = "x_seed1_kendall_tau_on_x_epochs2"
    assert json.loads(out.read_text())[tau] == pytest.approx(borrowed[tau])
    with pytest.raises(SystemExit, match=r"_epochs3.json: no full-budget trainings \(run python -m"):
        calibration_pairs("_x", 1, root, epochs=3, out_dir=tmp_path)


def test_the_command_line_loads_each_supernet_once_and_holds_one_at_a_time(root, tmp_path, monkeypatch):
    loads: list[int] = []

    def counted(tag, seed, samples, where):
        assert len(loads) == len(set(loads))  # a seed is never loaded again
        loads.append(seed)
        return load_supernet(tag, seed, samples, where)
    monkeypatch.setattr(cross_module, "load_supernet", counted)
    out = tmp_path / "out.json"
    main(["--tag", "_x", "--winners", "_x", "--seeds", "0,1", "--samples", "512", "--tau-from", "_x",
          "--tau-pool", "--root", str(root), "--out", str(out)])
    assert loads == [0, 1]  # cross scores and tau from one load each
    record = json.loads(out.read_text())
    alone = borrowed_tau("_x", ["_x"], [0, 1], 512, root, pool=True)  # the same figures as before
    tau = "x_seed1_kendall_tau_on_x_pooled01"
    assert record[tau] == pytest.approx(alone[tau])
    scores = cross_scores("_x", "_x", [0, 1], 512, root)
    assert record["x_seed1_scores_x_seed0"] == pytest.approx(scores["x_seed1_scores_x_seed0"])


def test_one_at_a_time_gives_the_held_supernet_again_and_frees_it_for_another():
    class Supernet:  # a stand-in for the loaded supernet: only its identity and lifetime matter here
        pass
    made: list[tuple[str, int]] = []

    def load(tag, seed, samples, where):
        made.append((tag, seed))
        return Supernet()
    get = one_at_a_time(load)
    first = get("_x", 0, 512, Path("r"))
    assert get("_x", 0, 512, Path("r")) is first and made == [("_x", 0)]
    alive = weakref.ref(first)
    del first
    second = get("_x", 1, 512, Path("r"))
    assert alive() is None  # freed before the next was loaded
    assert get("_x", 1, 512, Path("r")) is second and made == [("_x", 0), ("_x", 1)]
