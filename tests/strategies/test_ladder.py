import optuna
from optuna.trial import TrialState

from autorec.strategies.ladder import LadderStrategy


def _run(study: optuna.Study, strategy: LadderStrategy) -> dict[str, object]:
    """One trial through study.optimize (the grid sampler stops the study from its callback)."""
    def objective(trial: optuna.Trial) -> float:
        trial.suggest_categorical("family", strategy.families)
        trial.suggest_categorical("rung", list(range(strategy.rungs)))
        return 0.5

    study.optimize(objective, n_trials=1)
    return study.trials[-1].params


def test_a_grid_point_cut_before_its_trial_suggested_it_is_queued_again():
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    strategy = LadderStrategy(families=["dcnv2", "wukong"], rungs=2)
    study = optuna.create_study(sampler=strategy.sampler(1))
    cut = study.ask()  # the grid sampler gave it a point; it was killed before suggesting it
    study.tell(cut, state=TrialState.FAIL)
    done = [_run(study, strategy) for _ in range(3)]  # the sampler walks the three other points
    lost = [p for p in ({"family": f, "rung": r} for f in ("dcnv2", "wukong") for r in (0, 1))
            if p not in done]
    assert len(lost) == 1
    assert strategy.requeue_lost(study) == lost
    # queued once: a second recovery finds it waiting and queues nothing
    assert strategy.requeue_lost(study) == []
    assert _run(study, strategy) == lost[0]
    finished = [(t.params["family"], t.params["rung"])
                for t in study.get_trials(states=(TrialState.COMPLETE,))]
    assert sorted(finished) == [(f, r) for f in ("dcnv2", "wukong") for r in (0, 1)]


def test_nothing_is_queued_when_no_point_can_be_lost():
    strategy = LadderStrategy(families=["dlrm"], rungs=2)
    study = optuna.create_study(sampler=strategy.sampler(1))
    assert strategy.requeue_lost(study) == []  # a fresh study: the sampler walks the grid
    cut = study.ask()
    study.tell(cut, state=TrialState.FAIL)
    ran = _run(study, strategy)
    study.enqueue_trial({"family": "dlrm", "rung": 1 - ran["rung"]})
    assert strategy.requeue_lost(study) == []


def test_a_rung_that_failed_on_its_own_is_not_queued_again():
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    strategy = LadderStrategy(families=["dlrm"], rungs=3)
    study = optuna.create_study(sampler=strategy.sampler(1))
    cut = study.ask()  # lost: killed before it suggested its grid point
    study.tell(cut, state=TrialState.FAIL)

    def diverges(trial: optuna.Trial) -> float:
        trial.suggest_categorical("family", strategy.families)
        trial.suggest_categorical("rung", list(range(strategy.rungs)))
        raise FloatingPointError("loss is nan")

    study.optimize(diverges, n_trials=1, catch=(FloatingPointError,))
    failed = study.trials[-1].params
    ran = _run(study, strategy)
    lost = strategy.requeue_lost(study)
    assert failed not in lost and ran not in lost
    assert lost == [{"family": "dlrm", "rung": r} for r in range(3)
                    if r not in (failed["rung"], ran["rung"])]
