"""autorec/oneshot/labels.py: another study's trained trials as the supernet's paths."""

import optuna
import pytest

from autorec.oneshot.labels import same_model, supernet_values, trained_pairs
from autorec.study import StudyConfig, run_study
from benchmarks.oneshot_tpe_proxy import load_supernet
from tests.studyfiles import MICRO_BUDGET, write_study

NAMES = {"layer0.kind": ["dlrm", "dcnv2"], "layer1.kind": ["dlrm", "skip"], "emb.a": ["0", "8"],
         "emb.a.hash": ["1", "0.25"], "over_arch": ["32-16", "16"]}


def test_parameters_map_to_the_supernets_choices():
    params = {"num_layers": 1, "layer0.kind": "dcnv2", "emb.a": 8, "emb.a.hash": 0.25, "over_arch": "16"}
    assert supernet_values(params, NAMES) == {"layer0.kind": "dcnv2", "layer1.kind": "skip", "emb.a": "8",
                                              "emb.a.hash": "0.25", "over_arch": "16"}
    # a list value (an over-arch as the space lists it) joins as the supernet names it
    assert supernet_values({**params, "over_arch": [32, 16]}, NAMES)["over_arch"] == "32-16"
    # a space of one shared width and hash (group ``all``): every feature's
    shared = supernet_values({"num_layers": 1, "layer0.kind": "dlrm", "emb.all": 8, "emb.all.hash": 1,
                              "over_arch": "16"}, NAMES)
    assert shared["emb.a"] == "8" and shared["emb.a.hash"] == "1"
    with pytest.raises(ValueError, match=r"emb\.a: 4 is not among the supernet's choices \['0', '8'\]"):
        supernet_values({**params, "emb.a": 4}, NAMES)


def test_another_studys_trials_are_read_as_paths_of_their_own_models(micro_runs, tmp_path):
    space = (micro_runs / "micro.yaml").read_text()
    search = load_supernet("_m", 0, 256, micro_runs).search
    for name, text in (("rnd", space), ("wide", space.replace("[[16]]", "[[32]]"))):
        (tmp_path / name).mkdir()
        file = tmp_path / f"{name}.yaml"
        file.write_text(text)
        config = StudyConfig.load(write_study(tmp_path / name, name=name, space=str(file),
                                              budget={**MICRO_BUDGET, "trials": 4}))
        run_study(config, log=lambda *_: None)
        study = optuna.load_study(study_name=name, storage=config.storage_url)
        if name == "rnd":
            pairs = trained_pairs(study, search, "rnd.db")
            complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
            assert [auc for _, auc in pairs] == [t.user_attrs["metrics"]["val"]["auc"] for t in complete]
            for (values, _), t in zip(pairs, complete, strict=True):  # each derives its trial's own model
                spec = search.net.derive(search.values_of(values)).to_dict()
                assert same_model(spec, t.user_attrs["arch"]) and set(values) == set(search.names)
        else:  # a model the supernet does not hold is named by its study's file and trial
            with pytest.raises(ValueError, match=r"wide\.db: trial 0's architecture does not derive back"):
                trained_pairs(study, search, "wide.db")
