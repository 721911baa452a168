"""The quality tier of `make test`: on a small planted order-2 teacher (90% of the logit variance in
the pairwise term, so a linear model misses most of it), every block family's preset,
trained for real for a few epochs, beats a logistic regression on the same features by a stated
margin of test AUC, and its selected epoch's test logloss is within 0.005 of its best epoch's.
(The full-size versions are in the slow tier: tests/test_quality.py.)"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score

from autorec.data import load_dataset
from autorec.presets import PRESETS, preset
from autorec.train.trainer import TrainConfig, Trainer

# Measured at these seeds: linear 0.592; dcnv2 0.664, dlrm 0.681, dhen 0.684, wukong 0.659 (4 epochs;
# Bayes 0.849). The margin leaves room for platform noise, not for a family that stops learning.
MARGIN = 0.05  # test AUC over the linear model
DATA = {"preset": "tiny", "num_samples": 30_000, "teacher_dim": 8, "interaction_share": 0.9,
        "num_tables": 6, "rows": [50, 100, 200, 300, 500, 1000], "pooling": 1.0}
CONFIG = TrainConfig(epochs=4, batch_size=256, seed=0, progress=False, patience=4, track_test=True)


@pytest.fixture(scope="module")
def data():
    return load_dataset("synthetic", seed=0, **DATA)


def features(data, split: str) -> tuple[scipy.sparse.csr_matrix, np.ndarray]:
    """One-hot ids of every table next to the dense columns, and the labels, of ``split``."""
    part = data.splits[split]
    blocks = [scipy.sparse.csr_matrix(part.dense.numpy())]
    for feature, column in zip(data.schema.sparse, part.sparse, strict=True):
        rows = np.repeat(np.arange(len(part)), np.diff(column.offsets.numpy()))
        ones = np.ones(len(rows))
        blocks.append(scipy.sparse.csr_matrix((ones, (rows, column.values.numpy())),
                                              shape=(len(part), feature.num_embeddings)))
    return scipy.sparse.hstack(blocks).tocsr(), part.labels.numpy()


@pytest.fixture(scope="module")
def linear_auc(data) -> float:
    x, y = features(data, "train")
    model = LogisticRegression(C=1.0, max_iter=500).fit(x, y)
    x_test, y_test = features(data, "test")
    return float(roc_auc_score(y_test, model.predict_proba(x_test)[:, 1]))


@pytest.mark.parametrize("family", sorted(PRESETS))
def test_every_family_beats_a_linear_model_and_selects_a_calibrated_epoch(data, linear_auc, family):
    result = Trainer(preset(family, data.schema, dim=8), data, CONFIG).fit()
    assert result.test["auc"] >= linear_auc + MARGIN, (family, result.test["auc"], linear_auc)
    best_logloss = min(r.test["logloss"] for r in result.history)
    assert result.test["logloss"] - best_logloss <= 0.005, (family, [r.test for r in result.history])
