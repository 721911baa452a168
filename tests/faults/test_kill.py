"""kill -9 mid-search (issue 24): real ``autorec search`` / ``autorec scale`` processes killed
with SIGKILL at seeded points, rerun with the same command: every finished trial is kept once,
each cut one is retried once with its parameters, no trial number is reused, and the final table
equals an uncut run's of the same seed (:mod:`benchmarks.faults_runs`)."""

from __future__ import annotations

import optuna
import pytest
from optuna.distributions import IntDistribution
from optuna.trial import FrozenTrial, TrialState

from autorec.study import mark_interrupted
from autorec.study.seeding import TrialSeededSampler
from benchmarks.faults_kill import CHAINS, kill_strategy
from benchmarks.faults_runs import (
    KillPoint,
    finish,
    judge,
    kill_all,
    run,
    start,
    study_file,
    table,
    trials_of,
    verdict,
)


@pytest.mark.slow  # 57 s; kill -9 and rerun stay in make test (oneshot/test_run.py, and the two below)
def test_two_kills_of_a_random_search_lose_and_repeat_nothing(tmp_path):
    reference_path = study_file(tmp_path / "uncut", "random", trials=4, steps=20)
    uncut = start(reference_path)  # beside the kills: the two cores share the startups
    path = study_file(tmp_path / "cut", "random", trials=4, steps=20)
    cuts = kill_all(path, [KillPoint("random", "training", trial=1), KillPoint("random", "write", trial=0)])
    run(path)
    finish(uncut, reference_path)
    result = verdict(cuts, trials_of(path), table(trials_of(reference_path)))
    assert all(o.killed for o in result.outcomes), result.problems
    assert result.outcomes[0].cut, "the kill during training cut no trial"
    assert (result.lost, result.repeated, result.numbers_ok, result.table_equal) == (0, 0, True, True), \
        result.problems
    assert len(table(trials_of(path))) == 4


def test_the_judge_counts_a_lost_and_a_repeated_trial():
    """The matrix's judge is not blind: a finished trial whose values changed is lost, a cut
    trial without a retry is lost, and a finished trial run again is repeated."""
    def trial(number: int, state: TrialState, value: float | None = None, **attrs: object) -> FrozenTrial:
        made = optuna.trial.create_trial(
            params={"x": number}, distributions={"x": IntDistribution(0, 9)}, state=state,
            value=value if state == TrialState.COMPLETE else None, user_attrs=attrs)
        made.number = number
        return made

    before = [trial(0, TrialState.COMPLETE, 0.5), trial(1, TrialState.RUNNING)]
    after = [trial(0, TrialState.COMPLETE, 0.6), trial(1, TrialState.FAIL, interrupted=True),
             trial(2, TrialState.COMPLETE, 0.5, retry_of=0)]
    outcome = judge(KillPoint("random", "training"), before, after)
    assert (outcome.cut, outcome.lost, outcome.repeated) == ([1], 2, 1)
    fine = [trial(0, TrialState.COMPLETE, 0.5), trial(1, TrialState.FAIL, interrupted=True),
            trial(2, TrialState.COMPLETE, 0.7, retry_of=1)]
    fine[2].params = {"x": 1}
    assert (judge(KillPoint("random", "training"), before, fine).lost,
            judge(KillPoint("random", "training"), before, fine).repeated) == (0, 0)


def test_a_rerun_after_a_cut_draws_what_the_uncut_run_drew():
    """Regression: the sampler was seeded once per process (the seed plus the trials stored), so
    a rerun after a kill proposed other architectures than the uncut run from the cut on."""
    def make(seed: int) -> optuna.samplers.BaseSampler:
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=2)

    def objective(trial: optuna.Trial) -> float:
        return (trial.suggest_float("x", 0, 1) - 0.3) ** 2 + trial.suggest_int("k", 0, 9)

    uncut = optuna.create_study(sampler=TrialSeededSampler(make, 0))
    uncut.optimize(objective, n_trials=5)
    storage = optuna.storages.InMemoryStorage()
    first = optuna.create_study(study_name="c", storage=storage, sampler=TrialSeededSampler(make, 0))
    first.optimize(objective, n_trials=2)
    cut = first.ask()  # the process dies during this trial
    objective(cut)
    mark_interrupted(cut, "interrupted: killed")
    first.tell(cut, state=TrialState.FAIL)
    rerun = optuna.load_study(study_name="c", storage=storage, sampler=TrialSeededSampler(make, 0))
    rerun.optimize(objective, n_trials=3)  # the retry of the cut trial, then two new ones
    done = [t for t in rerun.trials if t.state == TrialState.COMPLETE]
    assert [t.params for t in done] == [t.params for t in uncut.trials]
    assert [t.values for t in done] == [t.values for t in uncut.trials]


def test_a_supernet_resumed_from_its_checkpoint_trains_on_as_the_uncut_one(tmp_path):
    """Regression: on resume, the Adam state of weights no path had reached kept the step count
    of init_state's dummy step, so their first real update differed and the resumed supernet
    (and every candidate's score on it) drifted from the uncut run's."""
    from autorec.data import load_dataset
    from autorec.oneshot.train import OneShotTrainConfig, SupernetTraining
    from autorec.space import SearchSpace
    from benchmarks.faults_runs import DATA, SPACE

    dataset = load_dataset(DATA["name"], seed=DATA["seed"], **DATA["options"])
    space = SearchSpace.load(SPACE)
    config = OneShotTrainConfig(steps=8, batch_size=64, checkpoint_every=2)
    uncut = SupernetTraining(space, dataset, config, tmp_path / "uncut").fit()

    class Cut(Exception):
        pass

    def cut_after_the_first_checkpoint(line: str) -> None:
        raise Cut(line)

    with pytest.raises(Cut):
        SupernetTraining(space, dataset, config, tmp_path / "cut").fit(cut_after_the_first_checkpoint)
    resumed = SupernetTraining(space, dataset, config, tmp_path / "cut").fit()
    assert resumed.resumed_from == [2]
    assert resumed.losses == uncut.losses


@pytest.mark.slow
@pytest.mark.parametrize("strategy", list(CHAINS))
def test_seeded_kills_over_the_strategies(tmp_path, strategy):
    chains, kills = CHAINS[strategy]
    results = kill_strategy(tmp_path, strategy, chains, kills)
    outcomes = [o for r in results for o in r.outcomes]
    assert all(o.killed for o in outcomes), [p for r in results for p in r.problems]
    for r in results:
        assert (r.lost, r.repeated, r.numbers_ok, r.table_equal) == (0, 0, True, True), r.problems
