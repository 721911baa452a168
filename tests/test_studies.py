"""The shipped studies: each runs end to end on a tiny budget, and together they cover every
strategy and space dimension, each named in the README.

The files under studies/ are a newcomer's front door to each capability, so a smoke run per
file keeps them runnable while the code under them moves. A run keeps the file's data, space,
strategy and objectives and shrinks only what costs time: the trials, epochs and steps per epoch,
the baselines (the first one is kept, so the comparison still runs) and the strategy's own
inner budgets (supernet steps, schedule searches).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml
from optuna.trial import TrialState

from autorec.space import SearchSpace
from autorec.strategies import STRATEGIES
from autorec.study import StudyConfig, run_study, trial_arch

ROOT = Path(__file__).resolve().parents[1]
STUDIES = sorted((ROOT / "studies").glob("*.yaml"))
SMOKE_BUDGET = {"trials": 2, "epochs": 1, "batch_size": 256, "max_steps_per_epoch": 2, "patience": 1}
SMOKE_SAMPLES = 5000  # for generated data: enough for a split, far below any shipped size
SUPERNET_STEPS = 4
GROWTH_OPTIONS = {"steps": 8, "budget": 2, "batch_size": 128, "rl_batch_size": 2}
ONESHOT_OPTIONS = {"steps": SUPERNET_STEPS, "batch_size": 128, "checkpoint_every": 2, "candidates": 6,
                   "selection_samples": 500, "rerank": 2, "calibrate": 1, "final_epochs": 1}


def quiet(*_: object) -> None:
    pass


def shrunk(path: Path) -> dict[str, Any]:
    """The study file's contents with a smoke budget (module docstring); nothing else changes."""
    raw = yaml.safe_load(path.read_text())
    if "space" in raw:  # a ladder has none
        raw["space"] = str((path.parent / raw["space"]).resolve())
    raw["budget"] = dict(SMOKE_BUDGET)
    raw["baselines"] = raw.get("baselines", [])[:1]
    options = raw["data"].get("options") or {}
    if "num_samples" in options:
        raw["data"]["options"] = {**options, "num_samples": SMOKE_SAMPLES}
    strategy = raw.get("strategy")
    if isinstance(strategy, dict):
        opts = dict(strategy.get("options") or {})
        if strategy["name"] == "dnas":
            # Keep the file's share of warm-up steps (all of them in the one-shot form).
            steps, warmup = opts.get("steps", SUPERNET_STEPS), opts.get("warmup_steps", 0)
            opts.update(steps=SUPERNET_STEPS, warmup_steps=round(SUPERNET_STEPS * warmup / steps),
                        batch_size=128, selection_samples=500)
        elif strategy["name"] == "growth":
            opts.update(GROWTH_OPTIONS)
        elif strategy["name"] == "oneshot":
            steps_given = opts.get("steps", SUPERNET_STEPS)
            opts.update(ONESHOT_OPTIONS)
            if opts.get("kind_heads"):  # the over-arch of each last layer kind: a few steps too
                opts["kind_heads"] = SUPERNET_STEPS
            if opts.get("shared_until"):  # the coarse steps: the file's share of them
                opts["shared_until"] = max(1, round(opts["steps"] * opts["shared_until"] / steps_given))
        elif strategy["name"] == "ladder" and "samples" in opts:  # a growing data budget, kept small
            opts["samples"] = [SMOKE_BUDGET["batch_size"], 2 * SMOKE_BUDGET["batch_size"]]
        raw["strategy"] = {**strategy, "options": opts}
    return raw


def test_every_strategy_and_space_dimension_has_a_study():
    configs = [StudyConfig.load(path) for path in STUDIES]
    assert {c.strategy.name for c in configs} >= set(STRATEGIES)
    spaces = [yaml.safe_load(c.space.read_text()) for c in configs if c.space]  # the format, not the model
    assert any(len(s.get("towers", {}).get("num", [])) > 1 for s in spaces), "no study searches towers"
    assert any(len(s["layers"].get("precision", [])) > 1 for s in spaces), "no study searches precision"
    dnas = [c.strategy.options for c in configs if c.strategy.name == "dnas"]
    assert any(o.get("warmup_steps") == o.get("steps") for o in dnas), "no single-path one-shot study"


def test_the_readme_names_every_study_and_space():
    readme = (ROOT / "README.md").read_text()
    for path in [*STUDIES, *(ROOT / "search_spaces").glob("*.yaml")]:
        name = f"{path.parent.name}/{path.name}"
        assert name in readme, f"README.md does not name {name}"


# studies whose smoke run takes minutes even shrunk (the scale workload's layer grid scores every
# layer setting of its space): run by `make test-all`
SLOW_STUDIES = {"scale_oneshot"}


@pytest.mark.parametrize("path", [pytest.param(p, marks=pytest.mark.slow) if p.stem in SLOW_STUDIES else p
                                  for p in STUDIES], ids=[p.stem for p in STUDIES])
def test_the_study_runs_on_a_tiny_budget(path, tmp_path):
    shipped = StudyConfig.load(path)
    assert shipped.name == path.stem
    small = tmp_path / path.name
    small.write_text(yaml.safe_dump(shrunk(path)))
    config = StudyConfig.load(small)
    summary = run_study(config, log=quiet)

    study = optuna.load_study(study_name=config.name, storage=config.storage_url)
    trials = study.get_trials(deepcopy=False)
    expected = SMOKE_BUDGET["trials"]
    if shipped.strategy.name == "oneshot":  # candidates, the space samples, the re-ranked ones'
        options = ONESHOT_OPTIONS              # trainings, the final, then the samples' trainings
        stages = [t.user_attrs["stage"] for t in trials]
        assert stages[-1 - options["calibrate"]:] == ["final"] + ["rerank"] * options["calibrate"]
        assert stages.count("sample") == options["calibrate"] and stages.count("final") == 1
        # the proxy's candidates (crossings, a grid or a rung add to the screen's) and its trainings
        proxies = stages.count("proxy")
        assert proxies >= options["candidates"]
        expected = len(trials)
        if not shipped.strategy.options.get("shared_crossings") and "final_rung" not in stages:
            assert expected == options["candidates"] + 2 * options["calibrate"] + options["rerank"] + 1
    assert [t.state for t in trials] == [TrialState.COMPLETE] * expected, \
        [t.user_attrs.get("fail_reason") for t in trials]
    space = SearchSpace.load(config.space) if config.space else None
    for t in trials:
        assert space is None or space.contains(trial_arch(t))
        if shipped.strategy.name == "ladder":
            assert t.user_attrs["scale"]["family"] in shipped.strategy.options["families"]
        assert len(t.values) == len(shipped.objectives)
        if shipped.strategy.name == "dnas":
            assert "arch_probs" in t.user_attrs
        if shipped.strategy.name == "growth":
            assert t.user_attrs["growth"]["best"]["schedule"]
    assert set(summary.baselines) == set(shipped.baselines[:1])
