"""Tau's draws (``calibrate_from``): from the whole space, or from the sub-space of all-alike
embedding settings a search that ends on the crossings decides in."""

from __future__ import annotations

import optuna
import pytest

from autorec.oneshot.run import space_samples
from autorec.oneshot.search import CandidateSearch
from tests.oneshot.test_run import micro_space, of_stage, run_oneshot
from tests.studyfiles import tiny_search

LAYERS = {"num": {"low": 1, "high": 2}, "kinds": ["dlrm", "dcnv2", "wukong"]}
SPACE = {"dim": [8], "dense_arch": [[16]], "over_arch": [[16], [32]],
         "embedding": {"dim": [0, 4, 8], "hash": [1, 0.5]}, "layers": LAYERS}


@pytest.fixture(scope="module")
def search(tmp_path_factory: pytest.TempPathFactory) -> CandidateSearch:
    return tiny_search(tmp_path_factory.mktemp("supernet"), SPACE)


def _embedding(t: optuna.trial.FrozenTrial) -> tuple[set[str], set[str]]:
    """The widths and the hash sizes a trial gives its features."""
    emb = {k: str(v) for k, v in t.params.items() if k.startswith("emb.")}
    return ({v for k, v in emb.items() if not k.endswith(".hash")},
            {v for k, v in emb.items() if k.endswith(".hash")})


def _layers(t: optuna.trial.FrozenTrial) -> dict[str, str]:
    return {k: str(v) for k, v in t.params.items() if not k.startswith("emb.")}


def test_shared_draws_give_every_feature_one_setting_and_keep_the_layer_draws(search):
    shared = space_samples(optuna.create_study(), search, 12, 3, ("val_auc",), "shared")
    whole = space_samples(optuna.create_study(), search, 12, 3, ("val_auc",), "space")
    assert [t.user_attrs["sample_index"] for t in shared] == list(range(12))
    settings = {(frozenset(w), frozenset(h)) for w, h in map(_embedding, shared)}
    assert all(len(w) == 1 and len(h) <= 1 for w, h in settings)  # one width (and hash) for all
    assert len(settings) > 1  # and not always the same one
    assert any(len(_embedding(t)[0]) > 1 for t in whole)  # where the whole space's draws mix widths
    # the same seed draws the same layers and over-arch: only the embedding choices differ
    assert [_layers(t) for t in shared] == [_layers(t) for t in whole]
    assert len({t.params["layer0.kind"] for t in shared}) > 1
    for t in shared:  # each scored on inherited weights like a candidate, its arch all-alike
        assert 0 <= t.user_attrs["proxy"]["val_auc"] <= 1
        tables = t.user_attrs["arch"]["tables"]
        assert len({table["dim"] for table in tables}) <= 1
    again = space_samples(optuna.create_study(), search, 12, 3, ("val_auc",), "shared")
    assert [t.params for t in again] == [t.params for t in shared]  # seeded


def test_shared_draws_need_embedding_choices_and_a_known_where(search, tmp_path_factory):
    with pytest.raises(ValueError, match="calibrate_from: expected one of space, shared, got 'all'"):
        space_samples(optuna.create_study(), search, 2, 0, ("val_auc",), "all")
    unembedded = {k: v for k, v in SPACE.items() if k != "embedding"}
    plain = tiny_search(tmp_path_factory.mktemp("plain"), unembedded)
    with pytest.raises(ValueError, match=r"calibrate_from: 'shared' on a space without embedding width"):
        space_samples(optuna.create_study(), plain, 2, 0, ("val_auc",), "shared")
    assert len(space_samples(optuna.create_study(), plain, 2, 0, ("val_auc",), "space")) == 2


def test_a_study_draws_taus_architectures_from_the_all_alike_settings(tmp_path):
    space = micro_space(tmp_path, "{dim: [0, 4, 8], hash: [1, 0.5]}")
    _, study = run_oneshot(tmp_path, {"steps": 6, "candidates": 8, "rerank": 2, "calibrate": 4,
                                      "calibrate_from": "shared"}, space=str(space))
    samples = of_stage(study, "sample")
    assert len(samples) == 4
    assert all(len(w) == 1 and len(h) == 1 for w, h in map(_embedding, samples))
    assert study.user_attrs["oneshot"]["tau_pairs"] == 6  # the 2 re-ranked and the 4 draws, trained
