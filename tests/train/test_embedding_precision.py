"""fp16 embedding tables under the trainer: stored in fp16, trained by fbgemm's fused kernel."""

import dataclasses
import itertools
import json
import math

import pytest
import torch

from autorec.arch import ArchSpec
from autorec.presets import preset
from autorec.train.distributed import FUSED_KERNELS
from autorec.train.trainer import TrainConfig, Trainer

FAST = TrainConfig(epochs=1, batch_size=64, seed=0, progress=False, embedding_lr=0.1, dense_lr=3e-3)


def tables_in(spec: ArchSpec, precision: str) -> ArchSpec:
    return dataclasses.replace(spec, tables=tuple(dataclasses.replace(t, precision=precision)
                                                  for t in spec.tables))


def local_weights(trainer: Trainer) -> dict[str, torch.Tensor]:
    """This rank's shard of every table's weight (one rank: the whole table)."""
    out = {}
    for key, value in trainer.model.state_dict().items():
        if key.startswith("sparse_arch.embedding_bags.") and key.endswith(".weight"):
            out[key.split(".")[2]] = value.local_shards()[0].tensor
    return out


def test_fp16_tables_are_stored_in_fp16_and_train_without_nan(planted_data):
    spec = tables_in(preset("dlrm", planted_data.schema, dim=8), "fp16")
    trainer = Trainer(spec, planted_data, FAST)
    # The planner would put these small tables data_parallel on the "dense" kernel, whose Python
    # row-wise Adagrad keeps its state in fp16 and turns the tables NaN at the first update.
    kernels = {name: ps.compute_kernel for name, ps in trainer.model.plan.plan["sparse_arch"].items()}
    assert set(kernels.values()) <= set(FUSED_KERNELS), kernels
    before = {name: w.clone() for name, w in local_weights(trainer).items()}
    weights = local_weights(trainer)
    assert {w.dtype for w in weights.values()} == {torch.float16}
    # Stored, not just shown, in fp16: the kernel's one buffer holds 2 bytes per table element.
    storage = {w.untyped_storage().data_ptr(): w.untyped_storage().nbytes() for w in weights.values()}
    assert sum(storage.values()) == 2 * sum(t.num_embeddings * t.dim for t in spec.tables)
    # The optimizer state stays fp32 (fbgemm's fused row-wise Adagrad).
    momenta = [v for state in trainer.model.fused_optimizer.state_dict()["state"].values()
               for v in state.values()]
    assert momenta and all(m.local_shards()[0].tensor.dtype == torch.float32 for m in momenta)

    batches = itertools.islice(trainer._batches("train", FAST.batch_size, True), 30)
    losses = [trainer.train_step(b)[0] for b in batches]
    assert all(math.isfinite(loss) for loss in losses), losses
    after = local_weights(trainer)
    assert all(torch.isfinite(w).all() and w.dtype == torch.float16 for w in after.values())
    assert all(not torch.equal(after[name], before[name]) for name in before)
    assert sum(losses[-10:]) < sum(losses[:10])


def test_a_plan_putting_an_fp16_table_on_the_dense_kernel_is_refused(planted_data, tmp_path):
    spec = tables_in(preset("dlrm", planted_data.schema, dim=8), "fp16")
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "tables": {
        t.name: {"sharding_type": "data_parallel"} for t in spec.tables}}))
    with pytest.raises(ValueError, match=r"table t_user .*fused kernel.*data_parallel/dense"):
        Trainer(spec, planted_data, dataclasses.replace(FAST, plan=str(plan)))


def fused_plan(spec: ArchSpec, path) -> str:
    """A plan file putting every table table_wise on rank 0, on the fused kernel."""
    path.write_text(json.dumps({"version": 1, "tables": {
        t.name: {"sharding_type": "table_wise", "ranks": [0]} for t in spec.tables}}))
    return str(path)


@pytest.mark.slow
def test_fp16_tables_reach_the_auc_of_fp32_over_hundreds_of_steps(planted_data, tmp_path):
    spec = preset("dlrm", planted_data.schema, dim=8)
    # Both on the fused kernel, so the runs differ only in the tables' precision (the planner
    # alone would put the fp32 tables data_parallel, on another optimizer implementation).
    config = dataclasses.replace(FAST, epochs=6, patience=6, plan=fused_plan(spec, tmp_path / "p.json"))
    results = {p: Trainer(tables_in(spec, p), planted_data, config).fit() for p in ("fp32", "fp16")}
    for result in results.values():
        assert len(result.step_losses) == 6 * 50 and all(map(math.isfinite, result.step_losses))
    fp32, fp16 = results["fp32"].test["auc"], results["fp16"].test["auc"]
    assert fp16 > 0.9, fp16
    assert abs(fp32 - fp16) < 0.01, (fp32, fp16)  # measured at 500 steps: 0.0012
