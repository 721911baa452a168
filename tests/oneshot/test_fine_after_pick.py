"""``fine_after_pick``: the finalists are picked on the supernet's coarse steps, then its fine phase
trains, and the finalists' drops and tau's draws are read on the fine weights."""

from __future__ import annotations

import shutil
from pathlib import Path

import optuna
import pytest

from autorec.data import load_dataset
from autorec.oneshot.drops import DROPPED_ATTR, DROPPED_NAMES_ATTR, DROPS_ATTR, zero_width
from autorec.oneshot.heads import KindHeads
from autorec.oneshot.run import ONESHOT_ATTR, proxy_trials
from autorec.oneshot.search import CandidateSearch
from autorec.oneshot.train import OneShotTrainConfig, SupernetTraining
from autorec.space import SearchSpace
from autorec.strategies import make_strategy
from autorec.study import StudyConfig, TrialRunner, run_study
from autorec.train.checkpoints import latest
from tests.oneshot.test_drops import PLANTED
from tests.oneshot.test_run import micro_space, of_stage, quiet, run_oneshot
from tests.oneshot.test_train import SPACE, weights


def test_fit_until_stops_there_and_goes_on_to_the_straight_runs_weights(tmp_path: Path) -> None:
    data = load_dataset("synthetic", preset="tiny", num_samples=3000)
    space = SearchSpace.from_dict({**SPACE, "embedding": {"dim": [0, 4, 8]}})
    config = OneShotTrainConfig(steps=6, batch_size=64, checkpoint_every=4, seed=2, shared_paths=0.5,
                                shared_until=3, fine_embedding_lr=0.3)
    straight = SupernetTraining(space, data, config, tmp_path / "straight")
    straight.fit()
    split = SupernetTraining(space, data, config, tmp_path / "split")
    coarse = split.fit(until=3)
    assert coarse.step == 3 and latest(tmp_path / "split").name == "step-000000003"  # checkpointed there
    assert split.fit(until=2).step == 3  # past it already: nothing trains
    resumed = SupernetTraining(space, data, config, tmp_path / "split")
    again = resumed.fit()
    assert again.step == 6 and again.resumed_from == [3]
    a, b = weights(straight), weights(resumed)
    assert a.keys() == b.keys() and all(a[k].equal(b[k]) for k in a)  # the same schedule, cut or not
    with pytest.raises(ValueError, match=r"until: expected a step in \[0, steps \(6\)\], got 7"):
        split.fit(until=7)


@pytest.mark.parametrize(("options", "message"), [
    ({"fine_after_pick": "yes"}, "fine_after_pick: expected true or false, got 'yes'"),
    ({"fine_after_pick": True, "drop_tolerance": 0.0},
     r"fine_after_pick: true needs a fine phase, shared_until in \(0, steps \(2000\)\), got shared_until 0"),
    ({"fine_after_pick": True, "drop_tolerance": 0.0, "steps": 10, "shared_until": 10},
     r"shared_until in \(0, steps \(10\)\), got shared_until 10"),
    ({"fine_after_pick": True, "shared_until": 5},
     "fine_after_pick: true without drop_tolerance and drop_read 'supernet'"),
    ({"fine_after_pick": True, "shared_until": 5, "drop_tolerance": 0.0, "drop_read": "rerank"},
     "fine_after_pick: true without drop_tolerance and drop_read 'supernet'"),
])
def test_bad_fine_after_pick_options(options: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make_strategy("oneshot", **options)


def test_the_pick_is_the_coarse_supernets_and_the_drops_and_tau_the_fine_ones(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    options = {"steps": 8, "shared_until": 4, "shared_paths": 0.5, "fine_embedding_lr": 0.3,
               "fine_after_pick": True, "candidates": 10, "rerank": 3, "calibrate": 2, "rerank_steps": 1,
               "final_epochs": 1, "final_candidates": 2, "drop_tolerance": 0.002, "kind_heads": 2,
               "checkpoint_every": 4}
    space = micro_space(tmp_path, "{dim: [0, 4, 8]}")
    config, study = run_oneshot(tmp_path, options, space=str(space), data=PLANTED)
    record = study.user_attrs[ONESHOT_ATTR]
    assert record["supernet"]["steps"] == 4  # the candidates were scored on the coarse steps
    fine = record["fine_phase"]
    assert (fine["from"], fine["to"]) == (4, 8) and fine["seconds"] > 0
    assert record["search_seconds"] >= fine["seconds"]  # the fine phase is the method's time
    assert record["heads"]["steps"] == 2
    # every finalist's drop read is the fine supernet's, through its shared over-arch (no head)
    runner = TrialRunner(config)
    training = SupernetTraining(runner.space, runner.dataset,
                                OneShotTrainConfig(**runner.strategy.train_options),
                                config.directory / "oneshot" / "supernet")
    assert training.fit().step == 8  # (trained: it loads)
    search = CandidateSearch(training, 400, config.objectives)
    drops = record[DROPS_ATTR]
    assert len(drops) == 2
    def score(t, samples: int = 400) -> float:  # ``t``'s path on the fine weights, its drops dropped
        values = search.values_of({n: str(t.params[n]) for n in search.names})
        values |= {n: zero_width(search, n) for n in t.user_attrs.get(DROPPED_NAMES_ATTR, [])}
        return search.rescore(values, samples)["val_auc"]
    for number, entry in drops.items():
        assert score(study.trials[int(number)]) == pytest.approx(entry["path_auc"], abs=1e-9)
    thinned = [t for t in study.trials if DROPPED_ATTR in t.user_attrs]
    assert thinned and all(score(t) == pytest.approx(t.user_attrs["proxy"]["val_auc"], abs=1e-9)
                           for t in thinned)
    # the screen's candidates were scored on the coarse weights (trained again to step 4 here: the
    # same weights, as a cut run's), each through its kind's head
    coarse = SupernetTraining(runner.space, runner.dataset,
                              OneShotTrainConfig(**runner.strategy.train_options), tmp_path / "coarse")
    assert coarse.fit(until=4).step == 4
    heads = KindHeads(coarse, 2, config.directory / "oneshot" / "heads")
    heads.fit()
    picked = CandidateSearch(coarse, 400, config.objectives, heads=heads)
    screened = [t for t in proxy_trials(study) if DROPPED_ATTR not in t.user_attrs]
    assert screened and all(picked.evaluate(picked.values_of({n: str(t.params[n]) for n in picked.names}))[1][
        "val_auc"] == pytest.approx(t.user_attrs["proxy"]["val_auc"], abs=1e-9) for t in screened)
    samples = of_stage(study, "sample")  # tau's draws: scored on the fine weights too
    assert len(samples) == 2 and record["tau_pairs"] == 2  # the re-ranked ones (coarse scores) left out
    for t in samples:
        values = search.values_of({n: str(t.params[n]) for n in search.names})
        scores = search.evaluate(values)[1]
        assert scores["val_auc"] == pytest.approx(t.user_attrs["proxy"]["val_auc"], abs=1e-9)
    before = (len(study.trials), dict(fine), record["search_seconds"])
    loads = []  # checkpoints the rerun loads into its supernet
    resume = SupernetTraining.resume
    monkeypatch.setattr(SupernetTraining, "resume",
                        lambda self, checkpoint=None: loads.append(checkpoint) or resume(self, checkpoint))
    run_study(StudyConfig.load(tmp_path / "study.yaml"), log=quiet)  # done: nothing trained or added
    after = study.user_attrs[ONESHOT_ATTR]
    assert (len(study.trials), after["fine_phase"], after["search_seconds"]) == before
    assert loads == [None]  # the fine weights, loaded once (the coarse fit finds them latest)
    # A new study started from this finished supernet (--supernet-from) has no coarse weights to
    # pick on: refused by name before anything is written
    adopted = tmp_path / "adopted"
    shutil.copytree(config.directory / "oneshot" / "supernet", adopted / "t" / "oneshot" / "supernet")
    refusal = (r"fine_after_pick: the supernet in .*adopted/t/oneshot/supernet is at step 8, past "
               r"shared_until \(4\), and this study has not picked")
    with pytest.raises(ValueError, match=refusal):
        run_oneshot(adopted, options, space=str(space), data=PLANTED)
    assert ONESHOT_ATTR not in optuna.load_study(
        study_name="t", storage=f"sqlite:///{adopted / 't' / 'study.db'}").user_attrs
