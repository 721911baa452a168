"""Total training FLOPs: dense, lookups and optimizer updates (autorec.costs.training)."""

import pytest

from autorec.arch import ArchSpec, TableSpec
from autorec.costs import arch_cost
from autorec.costs.training import (
    ADAM_FLOPS_PER_PARAM,
    ROWWISE_ADAGRAD_FLOPS_PER_ELEMENT,
    training_flops,
)
from autorec.data import Schema, SparseFeature
from autorec.growth.cost import TrainingCostModel
from autorec.growth.schedule import GrowthSchedule, Phase
from autorec.models import build_model
from autorec.presets import preset

SCHEMA = Schema(dense=("x", "y"), sparse=(SparseFeature("u", 5000), SparseFeature("i", 300),
                                           SparseFeature("g", 10, multi_hot=True)))


def test_the_optimizer_terms_count_the_parameters_the_built_model_has() -> None:
    spec = preset("dcnv2", SCHEMA)
    model = build_model(spec)
    tables = sum(p.numel() for n, p in model.named_parameters() if n.startswith("sparse_arch."))
    dense = sum(p.numel() for n, p in model.named_parameters() if not n.startswith("sparse_arch."))
    flops = training_flops(spec, batch_size=256)
    assert flops.dense_optimizer == pytest.approx(ADAM_FLOPS_PER_PARAM * dense / 256)
    assert flops.embedding_optimizer == pytest.approx(ROWWISE_ADAGRAD_FLOPS_PER_ELEMENT * tables / 256)
    assert flops.dense == arch_cost(spec).train_flops
    assert flops.total > flops.dense


def test_lookups_follow_the_pooling_factors_and_looked_up_rows_bound_the_update() -> None:
    spec = preset("dlrm", SCHEMA)
    one = training_flops(spec, 512)
    multi = training_flops(spec, 512, pooling_factors={"g": 4.0})
    assert multi.lookup - one.lookup == pytest.approx(2 * 3 * spec.dim)  # 3 more ids of feature g
    looked = training_flops(spec, 512, pooling_factors={"g": 4.0}, touched_rows="looked_up")
    assert looked.embedding_optimizer == pytest.approx(ROWWISE_ADAGRAD_FLOPS_PER_ELEMENT * multi.lookup / 2)
    assert looked.embedding_optimizer < multi.embedding_optimizer  # 5k rows each step cost more


def test_a_growth_schedule_saves_less_of_the_total_than_of_the_dense_part() -> None:
    """Lookups and table updates do not shrink with the dense widths: counting them moves a
    schedule's FLOPs ratio toward 1, by exactly their share."""
    big = ArchSpec(dim=16, tables=(TableSpec(name="t", features=("f",), num_embeddings=200_000, dim=16),),
                   dense_arch=(64,), over_arch=(256, 128))
    schedule = GrowthSchedule((Phase(50, {"over_arch": 0.25}), Phase(50)))
    model = TrainingCostModel(big, batch_size=128, measure=False)
    total = model.flops_ratio(schedule)
    small = schedule.phase_specs(big)[0]
    full = arch_cost(big).train_flops
    dense_only = (arch_cost(small).train_flops + full) / (2 * full)
    assert dense_only < total < 1.0
    flops_big, flops_small = training_flops(big, 128), training_flops(small, 128)
    assert total == pytest.approx((flops_small.total + flops_big.total) / (2 * flops_big.total), rel=1e-6)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"batch_size": 0}, "batch_size: expected a positive integer, got 0"),
    ({"batch_size": 8, "touched_rows": "some"}, "touched_rows: expected 'all' or 'looked_up', got 'some'"),
    ({"batch_size": 8, "dense_optimizer": "lamb"}, "dense_optimizer: expected one of"),
])
def test_bad_arguments_name_themselves(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        training_flops(preset("dlrm", SCHEMA), **kwargs)
