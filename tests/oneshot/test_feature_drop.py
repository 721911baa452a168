"""benchmarks/feature_drop.py: each embedded feature of a path dropped in turn, on the same
validation samples, against the path as it is."""

from __future__ import annotations

import pytest

from benchmarks.feature_drop import drop_importance
from tests.studyfiles import tiny_search

SPACE = {"dim": [8], "dense_arch": [[16]], "over_arch": [[16]],
         "embedding": {"dim": [0, 4, 8], "hash": [1, 0.5]},
         "layers": {"num": [1], "kinds": ["dlrm", "dcnv2"], "dcnv2": {"rank": [0]}}}


@pytest.fixture(scope="module")
def search(tmp_path_factory):
    return tiny_search(tmp_path_factory.mktemp("supernet"), SPACE)


def test_every_embedded_feature_is_dropped_once_and_the_rest_kept(search):
    values = {name: choice.values[-1] for name, choice in search.net.arch.choices.items()}
    widths = [n for n in values if n.startswith("emb.") and not n.endswith(".hash")]
    dropped = widths[0]
    values[dropped] = 0  # already off: not dropped again
    out = drop_importance(search, values, 512)
    assert set(out) == {"path", *widths[1:]}
    base = search.rescore(values, 512)["val_auc"]
    assert out["path"]["auc"] == pytest.approx(base)
    for name in widths[1:]:
        want = search.rescore({**values, name: 0}, 512)["val_auc"]
        assert out[name]["auc"] == pytest.approx(want)
        assert out[name]["drop"] == pytest.approx(base - want)


def test_the_rerank_read_shuffles_each_feature_of_a_candidates_rerank_training(tmp_path):
    from autorec.study import TrialRunner
    from benchmarks.feature_drop import rerank_importance
    from tests.oneshot.test_run import of_stage, run_oneshot

    config, study = run_oneshot(tmp_path, {"steps": 4, "candidates": 6, "rerank": 2, "calibrate": 0})
    done = of_stage(study, "rerank")[0]
    runner = TrialRunner(config)
    out = rerank_importance(study, runner, done.user_attrs["proxy_trial"], 400)
    embedded = {t["features"][0] for t in done.user_attrs["arch"]["tables"]}
    assert set(out) == {"path", *(f"emb.{f}" for f in embedded)}
    for row in out.values():
        if "drop" in row:
            assert row["auc"] == pytest.approx(out["path"]["auc"] - row["drop"])
    assert rerank_importance(study, runner, done.user_attrs["proxy_trial"], 400) == out  # one seed, one read
    unranked = next(t.number for t in of_stage(study, "proxy") if t.number not in
                    {r.user_attrs["proxy_trial"] for r in of_stage(study, "rerank")})
    with pytest.raises(SystemExit, match=f"candidate {unranked} has no re-rank training"):
        rerank_importance(study, runner, unranked, 400)
