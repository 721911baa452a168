"""Planted per-table importance and width (table_weight, table_rank) and the scale preset."""

from __future__ import annotations

import pytest
import torch
from sklearn.metrics import roc_auc_score

from autorec.data import DataError
from autorec.data.synthetic import PRESETS, SyntheticConfig, load_synthetic

COMMON = {"num_samples": 6000, "num_dense": 2, "num_tables": 4, "rows": 200, "teacher_dim": 8,
          "teacher_order": 2}


def test_a_zero_weight_table_is_pure_noise_and_a_rank_bounds_its_width() -> None:
    ds = load_synthetic(seed=1, table_weight=(2.0, 1.0, 0.0, 1.0), table_rank=(8, 2, 8, 0), **COMMON)
    e, _ = ds.teacher.fields(ds.splits["train"])  # [N, F, D], the dense field first
    assert torch.count_nonzero(e[:, 3]) == 0  # table 2: no hidden vector, so no pair with it
    assert torch.count_nonzero(e[:, 2, 2:]) == 0 and torch.count_nonzero(e[:, 2, :2]) > 0
    # Variance per table: the weight squared (the rank keeps it).
    variance = e.pow(2).sum(2).mean(0)
    assert variance[1] / variance[4] == pytest.approx(4.0, rel=0.15)
    assert variance[2] / variance[4] == pytest.approx(1.0, rel=0.15)


def test_the_labels_do_not_depend_on_a_noise_table() -> None:
    ds = load_synthetic(seed=2, table_weight=(1.0, 0.0, 1.0, 1.0), **COMMON)
    data = ds.splits["train"]
    shuffled = list(data.sparse)
    shuffled[1] = type(data.sparse[1]).single(data.sparse[1].values.flip(0))
    other = type(data)(data.schema, data.dense, tuple(shuffled), data.labels)
    torch.testing.assert_close(ds.probability(other), ds.probability(data))
    # ... while an important table does move them.
    shuffled[0] = type(data.sparse[0]).single(data.sparse[0].values.flip(0))
    moved = type(data)(data.schema, data.dense, tuple(shuffled), data.labels)
    assert not torch.allclose(ds.probability(moved), ds.probability(data))


def test_defaults_leave_the_teacher_unchanged() -> None:
    plain = load_synthetic(seed=3, **COMMON)
    explicit = load_synthetic(seed=3, table_weight=1.0, table_rank=8, **COMMON)
    assert torch.equal(plain.splits["test"].labels, explicit.splits["test"].labels)
    assert torch.equal(plain.probs["test"], explicit.probs["test"])
    # ... and the defaults are no scaling at all: each table's field is its ids' raw hidden vectors.
    from autorec.data.synthetic.sampling import id_uniforms

    data = plain.splits["test"]
    e, _ = plain.teacher.fields(data)
    for table, column in enumerate(data.sparse):
        raw = id_uniforms(column.values, plain.teacher.seed, table, 9)[:, 1:]
        assert torch.equal(e[:, 1 + table], raw)


def test_scale_preset_shape_and_planted_structure() -> None:
    config = SyntheticConfig.from_options(preset="scale")
    assert config.num_samples >= 5_000_000 and config.num_dense == 13 and config.num_tables == 26
    assert max(config.table_rows) == 1_000_000 and min(config.table_rows) == 3
    assert sum(w == 0 for w in config.table_weights) >= 4  # pure-noise tables
    assert len(set(config.table_ranks)) >= 3  # wide and narrow tables
    assert any(p > 1 for p in config.table_pooling)  # some multi-hot
    small = load_synthetic(preset="scale", num_samples=20_000)
    probs, labels = small.probs["test"], small.splits["test"].labels
    assert small.bayes_auc("test") == pytest.approx(roc_auc_score(labels.numpy(), probs.numpy()))
    assert 0.7 < small.bayes_auc("test") < 0.95


@pytest.mark.parametrize("options, message", [
    ({"table_weight": -1.0}, "table_weight must be >= 0"),
    ({"table_weight": (1.0, 2.0)}, "table_weight has 2 entries for 4 tables"),
    ({"table_rank": 9}, "table_rank must lie in \\[0, teacher_dim=8\\]"),
    ({"table_weight": 0.0, "num_dense": 0}, "some table .* must carry signal"),
])
def test_bad_importance_options(options, message) -> None:
    with pytest.raises(DataError, match=message):
        SyntheticConfig(**{**COMMON, **options})


def test_presets_named() -> None:
    assert "scale" in PRESETS
