"""benchmarks/learning_curves.py (issue 20's curves): a candidate's interaction layers and
training settings replaced as asked, bad ``--layers`` refused by name, and the curve trainer's
points on its grid."""

import math

import pytest

from autorec.data import load_dataset
from autorec.presets import preset
from autorec.train.trainer import TrainConfig
from benchmarks.learning_curves import CurveTrainer, candidate

DATA = load_dataset("synthetic", preset="tiny", num_samples=1200)
ARCH = preset("dlrm", DATA.schema).to_dict()
BASE = TrainConfig(epochs=5, batch_size=64, seed=3, dense_lr=1e-3, progress=False)


def test_the_layers_are_replaced_and_the_rest_kept():
    layers = [{"kind": "dcnv2", "num_layers": 2, "rank": 0}]
    spec, cfg = candidate(ARCH, BASE, layers=layers, steps=7, val_samples=100, train_seed=11)
    assert [layer.kind for layer in spec.layers] == ["dcnv2"] and spec.layers[0].num_layers == 2
    assert spec.tables == preset("dlrm", DATA.schema).tables
    assert spec.over_arch == preset("dlrm", DATA.schema).over_arch
    assert (cfg.epochs, cfg.max_steps_per_epoch, cfg.val_samples, cfg.seed) == (1, 7, 100, 11)
    assert cfg.dense_lr == BASE.dense_lr and not cfg.evaluate_test


def test_without_changes_the_trial_is_trained_as_recorded():
    spec, cfg = candidate(ARCH, BASE, dense_lr=3e-3)
    assert spec.to_dict() == ARCH
    assert (cfg.dense_lr, cfg.embedding_lr, cfg.seed) == (3e-3, BASE.embedding_lr, BASE.seed)


def test_dropped_features_leave_their_tables_and_are_listed():
    read = [f for t in ARCH["tables"] for f in t["features"]]
    spec, _ = candidate(ARCH, BASE, drop=read[:2])
    assert set(spec.dropped) == set(read[:2]) and spec.feature_names == tuple(read[2:])
    with pytest.raises(SystemExit, match=r"--drop: \['nope'\] are not features the architecture reads"):
        candidate(ARCH, BASE, drop=["nope"])
    with pytest.raises(SystemExit, match=r"--drop: \[.*\] are not features"):  # dropped already
        candidate(spec.to_dict(), BASE, drop=read[:1])


def test_every_table_reshaped_to_one_width_and_its_full_rows():
    hashed = {**ARCH, "tables": [{**ARCH["tables"][0], "num_embeddings": 3,
                                  "hash_from": ARCH["tables"][0]["num_embeddings"]}, *ARCH["tables"][1:]]}
    spec, _ = candidate(hashed, BASE, width=4)
    assert {t.dim for t in spec.tables} == {4} and spec.tables[0].num_embeddings == 3  # hash kept
    spec, _ = candidate(hashed, BASE, full_hash=True)
    assert [t.num_embeddings for t in spec.tables] == [t["num_embeddings"] for t in ARCH["tables"]]
    assert all(t.hash_from is None for t in spec.tables)
    assert [t.dim for t in spec.tables] == [t["dim"] for t in ARCH["tables"]]  # widths kept
    with pytest.raises(SystemExit, match="--width 0: expected a positive embedding width"):
        candidate(ARCH, BASE, width=0)


@pytest.mark.parametrize("layers, named", [
    ([{"kind": "nope"}], "layers[0].kind"),
    ([{"kind": "dcnv2", "bogus": 1}], "layers[0].bogus"),
    ("dcnv2", "layers"),
])
def test_bad_layers_are_refused_by_name(layers, named):
    with pytest.raises(SystemExit, match=r"--layers .*" + named.replace("[", r"\[").replace("]", r"\]")):
        candidate(ARCH, BASE, layers=layers)


def test_the_curve_has_a_point_every_n_steps_and_one_at_the_end():
    spec, cfg = candidate(ARCH, BASE, steps=7, val_samples=200)
    trainer = CurveTrainer(spec, DATA, cfg, every=3)
    trainer.fit()
    trainer.score()
    trainer.score()  # idempotent at the same step
    assert [p["step"] for p in trainer.points] == [3, 6, 7]
    seconds = [p["seconds"] for p in trainer.points]
    assert seconds == sorted(seconds) and seconds[0] > 0
    for p in trainer.points:
        assert 0.0 <= p["val_auc"] <= 1.0 and p["val_logloss"] > 0 and math.isfinite(p["train_loss"])
