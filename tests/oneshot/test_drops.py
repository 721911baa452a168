"""Dropping the tables a finalist does not use (``drop_tolerance``): each embedded feature's drop
scored on inherited weights (``drop_read: supernet``) or on the finalist's re-rank training
(``rerank``), the free ones dropped before the rung trains it."""

from __future__ import annotations

from pathlib import Path

import pytest

from autorec.oneshot.drops import DROPPED_ATTR, DROPS_ATTR, free_drops, joint_holds
from autorec.oneshot.run import ONESHOT_ATTR, proxy_trials
from autorec.study import StudyConfig, run_study
from tests.oneshot.test_run import micro_space, of_stage, quiet, run_oneshot


def test_free_drops_are_those_within_the_tolerance() -> None:
    costs = {"emb.b": 0.0, "emb.a": -0.001, "emb.c": 0.003}
    assert free_drops(costs, 0.0) == ["emb.a", "emb.b"]
    assert free_drops(costs, 0.003) == ["emb.a", "emb.b", "emb.c"]
    assert free_drops({}, 0.1) == []


def test_the_joint_drop_may_cost_the_margin_of_each_feature_dropped() -> None:
    assert joint_holds(0.62, 0.62 - 0.00027, 0.0001, 7)  # seven features, each free at 0.0001
    assert not joint_holds(0.62, 0.62 - 0.00027, 0.0001, 2)
    assert joint_holds(0.62, 0.6201, 0.0, 8) and not joint_holds(0.62, 0.6199, 0.0, 8)  # k22's margin 0
    assert not joint_holds(0.62, 0.63, 0.001, 0)  # nothing to drop


# tables 2 and 3 pure noise: the re-rank read (trained 30 steps) must drop only them
PLANTED = {"name": "synthetic", "options": {"preset": "tiny", "num_samples": 8000,
                                            "table_weight": [3.0, 3.0, 0.0, 0.0]}, "seed": 0}


@pytest.mark.parametrize("read", ["supernet", "rerank"])
def test_the_finalists_train_without_their_free_tables_and_a_rerun_scores_nothing_twice(tmp_path: Path,
                                                                                          read: str):
    tolerance = 0.002 if read == "supernet" else 0.02  # (the re-rank read: on 800 validation samples)
    options = {"steps": 6, "candidates": 10, "rerank": 3, "calibrate": 0, "rerank_steps": 1,
               "final_epochs": 1, "final_candidates": 2, "drop_tolerance": tolerance, "drop_read": read}
    space = micro_space(tmp_path, "{dim: [0, 4, 8]}")  # every feature 0 (dropped), 4 or 8 wide
    data = {}
    if read == "rerank":
        options["rerank_steps"], data = 30, {"data": PLANTED}
    _, study = run_oneshot(tmp_path, options, space=str(space), **data)
    record = study.user_attrs[ONESHOT_ATTR]
    drops = record[DROPS_ATTR]
    assert len(drops) == 2 and any(e["dropped"] for e in drops.values())  # each finalist; one thinned
    rung = {t.user_attrs["proxy_trial"]: t for t in of_stage(study, "final_rung")}
    for number, entry in drops.items():
        assert entry["read"] == read
        original = study.trials[int(number)]
        embedded = {t["features"][0] for t in original.user_attrs["arch"]["tables"]}
        assert {name.removeprefix("emb.") for name in entry["costs"]} == embedded  # each one scored
        assert entry["dropped"] == free_drops(entry["costs"], tolerance) or entry["dropped"] == []
        if read == "rerank":
            assert set(entry["dropped"]) <= {"emb.cat_2", "emb.cat_3"}, entry["costs"]
        thinned = [t for t in study.trials if t.user_attrs.get(DROPPED_ATTR) == int(number)]
        if not entry["dropped"]:  # none free, or the joint drop cost too much: the original trains
            assert not thinned and int(number) in rung
            continue
        assert entry["joint_auc"] >= entry["path_auc"] - tolerance * len(entry["dropped"])
        assert len(thinned) == 1 and thinned[0].number in rung and int(number) not in rung
        kept = {t["features"][0] for t in rung[thinned[0].number].user_attrs["arch"]["tables"]}
        assert kept == embedded - {name.removeprefix("emb.") for name in entry["dropped"]}
    assert all(DROPPED_ATTR not in t.user_attrs for t in proxy_trials(study))  # the ranking never reads them
    before = len(study.trials)
    run_study(StudyConfig.load(tmp_path / "study.yaml"), log=quiet)  # done: nothing scored or trained again
    assert len(study.trials) == before


def test_without_screen_drops_every_candidate_embeds_every_feature_and_the_read_drops_the_noise(
        tmp_path: Path) -> None:
    options = {"steps": 6, "candidates": 10, "rerank": 3, "calibrate": 2, "rerank_steps": 30,
               "final_epochs": 1, "shared_crossings": 2, "drop_tolerance": 0.02, "drop_read": "rerank",
               "screen_drops": False}
    space = micro_space(tmp_path, "{dim: [0, 4, 8]}")  # every feature 0 (dropped), 4 or 8 wide
    _, study = run_oneshot(tmp_path, options, space=str(space), data=PLANTED)

    def widths(t) -> set[str]:
        return {str(v) for k, v in t.params.items() if k.startswith("emb.") and not k.endswith(".hash")}
    proxies = [t for t in proxy_trials(study) if DROPPED_ATTR not in t.user_attrs]
    assert len(proxies) > 10 and any("crossing" in t.user_attrs for t in proxies)  # screen and crossings
    assert set().union(*map(widths, proxies)) == {"4", "8"}  # no candidate drops a feature
    assert set().union(*map(widths, of_stage(study, "sample"))) <= {"4", "8"}  # nor do tau's draws
    assert all(len(t.user_attrs["arch"]["tables"]) == 4 for t in [*proxies, *of_stage(study, "rerank")])
    (entry,) = study.user_attrs[ONESHOT_ATTR][DROPS_ATTR].values()  # the one finalist, read whole
    assert set(entry["costs"]) == {f"emb.cat_{i}" for i in range(4)}
    assert entry["dropped"] and set(entry["dropped"]) <= {"emb.cat_2", "emb.cat_3"}, entry["costs"]
    (thinned,) = [t for t in study.trials if DROPPED_ATTR in t.user_attrs]
    assert thinned.user_attrs["dropped_choices"] == entry["dropped"]  # (its parameters: the space's)
    assert len(thinned.user_attrs["arch"]["tables"]) == 4 - len(entry["dropped"])
    (final,) = of_stage(study, "final")
    assert final.user_attrs["proxy_trial"] == thinned.number
    kept = {t["features"][0] for t in final.user_attrs["arch"]["tables"]}
    assert kept == {f"cat_{i}" for i in range(4)} - {n.removeprefix("emb.") for n in entry["dropped"]}


def test_drop_from_first_reads_one_finalist_and_offers_its_drops_to_the_others(tmp_path: Path) -> None:
    options = {"steps": 6, "candidates": 10, "rerank": 3, "calibrate": 0, "rerank_steps": 30,
               "final_epochs": 1, "final_candidates": 3, "rung_fraction": 0.5, "shared_crossings": 3,
               "drop_tolerance": 0.02, "drop_read": "rerank", "screen_drops": False, "drop_from": "first"}
    space = micro_space(tmp_path, "{dim: [0, 4, 8]}")
    _, study = run_oneshot(tmp_path, options, space=str(space), data=PLANTED)
    record = study.user_attrs[ONESHOT_ATTR]
    order = record["final_order"][:3]
    entries = [record[DROPS_ATTR][str(n)] for n in order]  # in the finalists' order
    first, others = entries[0], entries[1:]
    assert first["read"] == "rerank" and set(first["costs"]) == {f"emb.cat_{i}" for i in range(4)}
    assert first["free"] == free_drops(first["costs"], 0.02) and first["free"]
    for entry in others:  # no read of their own: the first's free drops, checked jointly on each path
        assert entry["read"] == "first" and entry["costs"] is None and entry["free"] == first["free"]
        held = joint_holds(entry["path_auc"], entry["joint_auc"], 0.02, len(entry["free"]))
        assert entry["dropped"] == (entry["free"] if held else [])
    for number, entry in zip(order, entries, strict=True):
        thinned = [t for t in study.trials if t.user_attrs.get(DROPPED_ATTR) == number]
        assert len(thinned) == (1 if entry["dropped"] else 0)
    before = len(study.trials)
    run_study(StudyConfig.load(tmp_path / "study.yaml"), log=quiet)  # done: nothing read or trained again
    assert len(study.trials) == before
