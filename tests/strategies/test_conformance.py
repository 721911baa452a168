"""One conformance suite that every search strategy passes (in the manner of Optuna's sampler tests).

The objective here is analytic (no training), so the suite is fast and exact.
"""

from pathlib import Path

import optuna
import pytest

from autorec.arch import ArchSpec
from autorec.costs import arch_cost
from autorec.data import load_dataset
from autorec.space import SearchSpace
from autorec.strategies import STRATEGIES, Strategy, make_strategy

SPACE = SearchSpace.load(Path(__file__).resolve().parents[2] / "search_spaces" / "zoo.yaml")
# Strategies that learn from data (dnas) get this; its schema has 2 dense and 3 sparse features,
# one multi-hot.
DATA = load_dataset("synthetic", preset="tiny", num_samples=600, num_dense=2, num_tables=3,
                    rows=[100, 50, 20], pooling=[1.0, 1.0, 2.0])
SCHEMA = DATA.schema
# Options that keep a strategy's proposal fast here (dnas: a supernet run of two steps).
FAST = {"dnas": {"steps": 2, "warmup_steps": 1, "batch_size": 64, "record_every": 1},
        # growth: per proposal, a dense baseline and one searched schedule of four steps each.
        "growth": {"steps": 4, "budget": 1, "batch_size": 64, "rl_batch_size": 1, "early_stopping": False},
        # oneshot: one supernet of two steps per strategy object, then candidates on its weights.
        "oneshot": {"steps": 2, "batch_size": 64, "checkpoint_every": 2, "selection_samples": 64},
        # ladder: a grid of every family's rungs (wider than the 12 proposals a test asks for).
        "ladder": {"families": ["dcnv2", "dhen", "dlrm", "mlp", "wukong"], "rungs": 4, "dim": 8}}


def strategy(name: str, seed: int) -> Strategy:
    made = make_strategy(name, seed=seed, **FAST.get(name, {}))
    made.bind(DATA)
    return made


# dnas trains a supernet per proposal (seconds each on the zoo space): its 46 proposals here run
# with the slow tests; tests/strategies/test_dnas.py runs a short dnas study by default. growth
# trains schedules per proposal (about 1 s each): the same, with tests/strategies/test_growth.py.
@pytest.fixture(params=[pytest.param(n, marks=pytest.mark.slow) if n in ("dnas", "growth") else n
                        for n in sorted(STRATEGIES)])
def name(request) -> str:
    return request.param


def run(strategy: Strategy, n: int, objectives: int = 1) -> tuple[optuna.Study, list[ArchSpec]]:
    study = optuna.create_study(directions=["minimize"] * objectives,
                                sampler=strategy.sampler(objectives))
    specs: list[ArchSpec] = []

    def objective(trial: optuna.Trial):
        spec = strategy.propose(trial, SPACE, SCHEMA)
        specs.append(spec)
        cost = arch_cost(spec)
        values = [float(cost.forward_flops), float(cost.dense_params)]
        return values[0] if objectives == 1 else values[:objectives]

    study.optimize(objective, n_trials=n)
    return study, specs


def test_proposals_are_valid_specs_of_the_space(name):
    made = strategy(name, seed=0)
    _, specs = run(made, 12)
    for spec in specs:
        assert SPACE.contains(spec) or not made.uses_space  # a ladder builds its rungs without one
        spec.validate()
        assert ArchSpec.from_json(spec.to_json()) == spec
        assert spec.feature_names == SCHEMA.sparse_names and spec.n_dense == 2


def test_same_seed_same_proposals_other_seed_differs(name):
    _, a = run(strategy(name, seed=3), 8)
    _, b = run(strategy(name, seed=3), 8)
    _, c = run(strategy(name, seed=4), 8)
    assert a == b
    assert a != c


def test_multi_objective(name):
    study, specs = run(strategy(name, seed=0), 10, objectives=2)
    assert len(specs) == 10 and study.best_trials
    for t in study.best_trials:  # the front is non-dominated
        for other in study.trials:
            assert not (other.values[0] < t.values[0] and other.values[1] < t.values[1])


def test_unknown_options_are_rejected(name):
    with pytest.raises(ValueError, match=f"strategy '{name}': unknown options"):
        make_strategy(name, seed=0, temperature=2.0)


def test_unknown_strategy():
    with pytest.raises(ValueError, match="unknown strategy 'bayes'; expected one of"):
        make_strategy("bayes")



def test_proposals_leave_no_scratch_files_behind(name, tmp_path, monkeypatch):
    """What a strategy writes to train its proposals (a supernet's checkpoints) is deleted once
    it is no longer needed: a long search must not fill the disk's temporary folder."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    run(strategy(name, seed=0), 4)
    assert sorted(p.name for p in tmp_path.iterdir()) == []
