"""benchmarks/oneshot_tpe_proxy.py scores a multi-trial study's trained trials on a one-shot
study's supernet: the parameters map to the supernet's choices and derive the trial's own model."""

import json
from pathlib import Path

import optuna
import pytest
from scipy.stats import kendalltau

from autorec.study import StudyConfig, run_study
from benchmarks.oneshot_tpe_proxy import main, score_tpe, swaps
from tests.studyfiles import write_study

BUDGET = {"trials": 5, "epochs": 1, "batch_size": 128, "max_steps_per_epoch": 4}

def test_crossings_swap_the_embedding_choices_and_keep_every_row():
    theirs = {"emb.a": "0", "emb.a.hash": "0.25", "layer0.kind": "dcnv2", "over_arch": "16"}
    ours = {"emb.a": "8", "emb.a.hash": "1", "layer0.kind": "dlrm", "over_arch": "32-16"}
    names = {"emb.a": ["0", "8"], "emb.a.hash": ["0.25", "1"], "layer0.kind": ["dlrm", "dcnv2"],
             "over_arch": ["32-16", "16"]}
    crossed = swaps(theirs, ours, names)
    assert crossed["their_embeddings"] == {"emb.a": "0", "emb.a.hash": "0.25", "layer0.kind": "dlrm",
                                           "over_arch": "32-16"}
    assert crossed["their_layers"] == {"emb.a": "8", "emb.a.hash": "1", "layer0.kind": "dcnv2",
                                       "over_arch": "16"}
    assert crossed["theirs_full_hash"] == {**theirs, "emb.a.hash": "1"}


def _study(root: Path, name: str, space: Path, strategy: object) -> StudyConfig:
    (root / name).mkdir(parents=True)
    config = StudyConfig.load(write_study(root / name, name=name, space=str(space), budget=BUDGET,
                                          strategy=strategy))
    run_study(config, log=lambda *_: None)
    return config


def test_a_multi_trial_studys_trials_are_scored_on_the_supernet(tmp_path):
    space = tmp_path / "micro.yaml"
    space.write_text("dim: [8]\nembedding: {dim: [0, 4, 8], hash: [1, 0.5]}\nover_arch: [[16]]\n"
                     "layers: {num: [1, 2], kinds: [dlrm, dcnv2]}\n")
    oneshot = {"name": "oneshot", "options": {"steps": 6, "batch_size": 64, "checkpoint_every": 3,
                                              "candidates": 6, "selection_samples": 256, "rerank": 1,
                                              "calibrate": 0, "rescore": 3, "rescore_samples": 512,
                                              "final_epochs": 1}}
    _study(tmp_path, "oneshot_r3k_seed0", space, oneshot)
    tpe = _study(tmp_path, "tpe", space, "random")
    figures = score_tpe("_r3k", 0, "tpe", 512, tmp_path)
    trials = optuna.load_study(study_name="tpe", storage=tpe.storage_url).trials
    assert figures["tpe_trials"] == len(figures["rows"]) == len(trials) == 5
    proxy = [r["proxy"] for r in figures["rows"]]
    trained = [r["trained"] for r in figures["rows"]]
    assert trained == [t.user_attrs["metrics"]["val"]["auc"] for t in trials]
    assert len(set(proxy)) > 1 and all(0.0 < p < 1.0 for p in proxy)  # the models differ, so do their scores
    assert figures["kendall_tau"] == pytest.approx(kendalltau(proxy, trained).statistic)
    assert figures["oneshot_compared"] == 3 and 1 <= figures["tpe_best_rank"] <= 4  # the 3 rescored
    crossings = {k: v for k, v in figures.items() if k.startswith("swap_")}
    assert sorted(crossings) == ["swap_their_embeddings", "swap_their_layers", "swap_theirs_full_hash"]
    assert all(0.0 < v < 1.0 for v in crossings.values())
    # scored again: the same forward pass on the same samples gives the same scores
    assert score_tpe("_r3k", 0, "tpe", 512, tmp_path)["rows"] == figures["rows"]
    # fine-tuned: each path trains alone from the same reloaded weights on the same batches, so
    # the scores move, and a second run gives the same ones; compared with the 1 re-ranked
    tuned = score_tpe("_r3k", 0, "tpe", 512, tmp_path, finetune=3)
    assert [r["proxy"] for r in tuned["rows"]] != proxy and tuned["oneshot_compared"] == 1
    assert score_tpe("_r3k", 0, "tpe", 512, tmp_path, finetune=3)["rows"] == tuned["rows"]
    # the command line: a sample count other than the rescore's is named in the keys, so it
    # cannot overwrite the default run's figures in the same results file
    out = tmp_path / "out.json"
    for extra in ([], ["--samples", "512"]):
        main(["--root", str(tmp_path), "--tag", "_r3k", "--out", str(out), *extra])
    record = json.loads(out.read_text())
    assert record["tpe_on_r3k_seed0_samples"] == 32768 and record["tpe_on_r3k_seed0_s512_samples"] == 512
    assert record["tpe_on_r3k_seed0_s512_kendall_tau"] == pytest.approx(figures["kendall_tau"])


def test_no_supernet_says_which_study(tmp_path):
    folder = tmp_path / "oneshot_r3k_seed0"
    folder.mkdir()
    write_study(folder, name="oneshot_r3k_seed0")
    with pytest.raises(SystemExit, match="oneshot_r3k_seed0: no trained supernet"):
        main(["--root", str(tmp_path), "--out", str(tmp_path / "out.json")])
    assert not (tmp_path / "out.json").exists()
