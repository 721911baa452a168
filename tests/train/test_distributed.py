"""In-process parts of distributed training: partitioning, plan files, init, resharding."""

import dataclasses
import json

import numpy as np
import pytest
import torch

from autorec.data import InMemoryDataset, Jagged, RecDataset, Schema, SparseFeature, TabularData
from autorec.data.tabular import TabularBatches
from autorec.presets import preset
from autorec.train.partition import rank_batches, rank_slice, slice_batch
from autorec.train.plan import PlanError, load_plan, plan_from_json, plan_to_json
from autorec.train.trainer import TrainConfig, Trainer

FAST = TrainConfig(epochs=1, batch_size=256, seed=0, progress=False, embedding_lr=0.1, dense_lr=3e-3)


def indexed(n: int = 103) -> InMemoryDataset:
    """Dense column 0 holds the sample's index, so a batch tells which samples it holds."""
    g = torch.Generator().manual_seed(1)
    lengths = torch.randint(0, 4, (n,), generator=g)
    tags = torch.randint(0, 9, (int(lengths.sum()),), generator=g)
    schema = Schema(dense=("i",), sparse=(SparseFeature("user", n), SparseFeature("tags", 9, multi_hot=True)))
    data = TabularData(schema, torch.arange(n, dtype=torch.float32)[:, None],
                       (Jagged.single(torch.arange(n)), Jagged.from_lengths(tags, lengths)),
                       (torch.arange(n) % 2).float())
    return InMemoryDataset("indexed", {"train": data, "val": data.subset(torch.arange(10)),
                                       "test": data.subset(torch.arange(10))})


class Streamed(RecDataset):
    """A dataset that only streams batches (like criteo): exercises the slicing path."""

    def __init__(self, inner: InMemoryDataset) -> None:
        self.inner, self.name, self.schema = inner, "streamed", inner.schema

    def batches(self, split, batch_size, *, shuffle, seed=0, epoch=0):
        return list(self.inner.batches(split, batch_size, shuffle=shuffle, seed=seed, epoch=epoch))


def samples(batch) -> list[int]:
    return batch.dense_features[:, 0].long().tolist()


@pytest.mark.parametrize("world", [1, 2, 3, 4])
@pytest.mark.parametrize("streamed", [False, True])
def test_ranks_split_every_global_batch_without_loss_or_duplication(world, streamed):
    ds = indexed()
    source = Streamed(ds) if streamed else ds
    whole = list(TabularBatches(ds.splits["train"], 16, shuffle=True, seed=3))
    parts = [list(rank_batches(source, "train", 16, shuffle=True, seed=3, epoch=0, rank=r, world_size=world))
             for r in range(world)]
    assert all(len(p) == len(whole) for p in parts)  # every rank takes the same number of steps
    for b, batch in enumerate(whole):
        joined = [i for r in range(world) for i in samples(parts[r][b])]
        assert joined == samples(batch)  # rank r's part follows rank r - 1's: no loss, no duplicate
        for r in range(world):
            part = parts[r][b]
            for key in ("user", "tags"):  # the sparse features travel with their samples
                ids = [ds.splits["train"].batch(torch.tensor([i])).sparse_features[key].values().tolist()
                       for i in samples(part)]
                got = part.sparse_features[key]
                assert [v.tolist() for v in torch.split(got.values(), got.lengths().tolist())] == ids


def test_rank_slice_and_slice_batch_edges():
    assert [rank_slice(5, r, 4) for r in range(4)] == [(0, 2), (2, 3), (3, 4), (4, 5)]
    assert [rank_slice(2, r, 4)[1] - rank_slice(2, r, 4)[0] for r in range(4)] == [1, 1, 0, 0]
    batch = next(iter(indexed().batches("train", 8, shuffle=False)))
    assert samples(slice_batch(batch, 3, 3)) == [] and samples(slice_batch(batch, 0, 8)) == list(range(8))


def test_rank_batches_with_dataloader_workers_keep_the_order():
    ds = indexed()
    plain = [samples(b) for b in rank_batches(ds, "train", 10, shuffle=True, seed=0, epoch=1, rank=1,
                                              world_size=2)]
    workers = [samples(b) for b in rank_batches(ds, "train", 10, shuffle=True, seed=0, epoch=1, rank=1,
                                                world_size=2, num_workers=2)]
    assert plain == workers


# ---- plan files -----------------------------------------------------------------------------
def spec_of(ds):
    return preset("dlrm", ds.schema, dim=8)


def test_plan_file_round_trip(planted_data, tmp_path):
    spec = spec_of(planted_data)
    doc = {"version": 1, "world_size": 1, "tables": {
        "t_user": {"sharding_type": "table_wise", "ranks": [0]},
        "t_item": {"sharding_type": "column_wise", "ranks": [0, 0]},
        "t_tags": {"sharding_type": "data_parallel"}}}
    (tmp_path / "plan.json").write_text(json.dumps(doc))
    plan = load_plan(tmp_path / "plan.json", spec, world_size=1, device_type="cpu")
    tables = plan.plan["sparse_arch"]
    assert tables["t_item"].sharding_type == "column_wise" and len(tables["t_item"].ranks) == 2
    again = plan_to_json(plan, 1)
    assert {k: v["sharding_type"] for k, v in again["tables"].items()} == {
        "t_user": "table_wise", "t_item": "column_wise", "t_tags": "data_parallel"}
    assert str(plan_from_json(again, spec, 1, "cpu")) == str(plan)


ALL_DP = {t: {"sharding_type": "data_parallel"} for t in ("t_user", "t_item", "t_tags")}


@pytest.mark.parametrize("tables, message", [
    ({"t_user": ALL_DP["t_user"]}, r"p.json: tables: no sharding given for \['t_item', 't_tags'\]"),
    ({**ALL_DP, "t_city": {}}, r"\['t_city'\] are not tables of architecture"),
    ({**ALL_DP, "t_user": {"sharding_type": "row_wise"}}, "tables.t_user.sharding_type: row_wise needs CUDA"),
    ({**ALL_DP, "t_user": {"sharding_type": "table_wise", "ranks": [2]}},
     "tables.t_user.ranks: rank 2 does not exist in a world of 1"),
    ({**ALL_DP, "t_user": {"sharding_type": "table_wise", "ranks": [0, 0]}},
     "table_wise places a table on one rank"),
    ({**ALL_DP, "t_user": {"sharding_type": "sideways"}}, "expected one of data_parallel, table_wise"),
    ({**ALL_DP, "t_user": {"sharding_type": "column_wise", "ranks": [0, 0, 0]}},
     "torchrec rejects the plan: column dim"),
    ({**ALL_DP, "t_user": {"sharding_type": "table_wise", "rank": 0}}, r"unknown keys \['rank'\]"),
])
def test_bad_plans_name_the_key(planted_data, tables, message):
    with pytest.raises(PlanError, match=message):
        plan_from_json({"version": 1, "tables": tables}, spec_of(planted_data), 1, "cpu", source="p.json")


def test_bad_plan_files(planted_data, tmp_path):
    spec = spec_of(planted_data)
    (tmp_path / "bad.json").write_text('{"version": 1,\n "tables": }')
    with pytest.raises(PlanError, match=r"bad.json:2:12: not valid JSON"):
        load_plan(tmp_path / "bad.json", spec, 1, "cpu")
    with pytest.raises(PlanError, match="world_size: the plan is for 2 ranks, this run has 1"):
        plan_from_json({"version": 1, "world_size": 2, "tables": {}}, spec, 1, "cpu")
    with pytest.raises(PlanError, match="version: expected 1, got 3"):
        plan_from_json({"version": 3, "tables": {}}, spec, 1, "cpu")
    with pytest.raises(PlanError, match="no such plan file"):
        load_plan(tmp_path / "missing.json", spec, 1, "cpu")


# ---- init and resharding (one process, two layouts) ----------------------------------------------
def write_plan(path, tables):
    path.write_text(json.dumps({"version": 1, "tables": tables}))
    return str(path)


def test_same_seed_same_start_under_any_plan(planted_data, tmp_path):
    spec = spec_of(planted_data)
    a = write_plan(tmp_path / "a.json", {t: {"sharding_type": "table_wise", "ranks": [0]}
                                         for t in ("t_user", "t_item", "t_tags")})
    b = write_plan(tmp_path / "b.json", {"t_user": {"sharding_type": "column_wise", "ranks": [0, 0]},
                                         "t_item": {"sharding_type": "data_parallel"},
                                         "t_tags": {"sharding_type": "column_wise", "ranks": [0, 0]}})
    pa = Trainer(spec, planted_data, dataclasses.replace(FAST, plan=a)).predict("test")[1]
    pb = Trainer(spec, planted_data, dataclasses.replace(FAST, plan=b)).predict("test")[1]
    np.testing.assert_allclose(pa, pb, rtol=0, atol=1e-7)


def test_checkpoint_loads_into_another_layout(planted_data, tmp_path):
    """Column-wise halves written, whole tables read (and back): the resharding path, checked on
    the outputs."""
    spec = spec_of(planted_data)
    cw = write_plan(tmp_path / "cw.json", {t: {"sharding_type": "column_wise", "ranks": [0, 0]}
                                           for t in ("t_user", "t_item", "t_tags")})
    tw = write_plan(tmp_path / "tw.json", {t: {"sharding_type": "table_wise", "ranks": [0]}
                                           for t in ("t_user", "t_item", "t_tags")})
    trained = Trainer(spec, planted_data, dataclasses.replace(FAST, plan=cw))
    trained.fit()
    trained.save_checkpoint(tmp_path / "ck")
    expected = trained.predict("test")[1]
    fresh = Trainer(spec, planted_data, dataclasses.replace(FAST, plan=tw, seed=5))
    assert not np.allclose(fresh.predict("test")[1], expected, atol=1e-4)
    fresh.load_checkpoint(tmp_path / "ck", optimizer=False)
    np.testing.assert_allclose(fresh.predict("test")[1], expected, rtol=0, atol=1e-6)


class CrashOnce(InMemoryDataset):
    """The planted data, but reading the training split dies at batch ``at`` of epoch 1."""

    def __init__(self, inner: InMemoryDataset, at: int) -> None:
        super().__init__(inner.name, inner.splits)
        self.at = at

    def batches(self, split, batch_size, *, shuffle, seed=0, epoch=0):
        source = super().batches(split, batch_size, shuffle=shuffle, seed=seed, epoch=epoch)
        if split != "train" or epoch != 1:
            return source
        return (b if i < self.at else (_ for _ in ()).throw(RuntimeError("node lost"))
                for i, b in enumerate(source))


def test_a_crashed_run_resumes_mid_epoch_on_the_same_curve(planted_data, tmp_path):
    """Checkpoints every 5 global steps; a crash at step 6 of epoch 1 resumes from step 2 (global
    step 10) with model, both optimizers' states and the data order restored: the curve is the
    uninterrupted one."""
    spec = spec_of(planted_data)
    config = dataclasses.replace(FAST, epochs=2, patience=2, batch_size=400)  # 8 steps per epoch
    reference = Trainer(spec, planted_data, config).fit()
    resumable = dataclasses.replace(config, checkpoint_dir=str(tmp_path / "ck"), checkpoint_every=5)
    with pytest.raises(RuntimeError, match="node lost"):
        Trainer(spec, CrashOnce(planted_data, at=6), resumable).fit()
    assert (tmp_path / "ck" / "LATEST").read_text().strip() == "step-000000010"
    assert len(list((tmp_path / "ck").glob("step-*"))) == 1  # older ones are removed
    resumed = Trainer(spec, planted_data, dataclasses.replace(resumable, resume=True)).fit()
    assert resumed.resumed_from == {"epoch": 1, "step": 2, "world_size": 1}
    np.testing.assert_allclose(resumed.step_losses, reference.step_losses, rtol=0, atol=1e-6)
    assert resumed.test == pytest.approx(reference.test, abs=1e-6)
    assert [r.train_loss for r in resumed.history] == pytest.approx([r.train_loss for r in reference.history])


def test_resume_refuses_another_architecture(planted_data, tmp_path):
    config = dataclasses.replace(FAST, checkpoint_dir=str(tmp_path / "ck"))
    Trainer(spec_of(planted_data), planted_data, config).fit()
    other = preset("dcnv2", planted_data.schema, dim=8)
    with pytest.raises(ValueError, match="checkpoint of architecture 'dlrm', not 'dcnv2'"):
        Trainer(other, planted_data, dataclasses.replace(config, resume=True)).fit()


def test_train_pipeline_sparse_dist_gives_the_same_run(planted_data):
    spec = spec_of(planted_data)
    config = dataclasses.replace(FAST, epochs=2, patience=2)
    plain = Trainer(spec, planted_data, config).fit()
    pipelined = Trainer(spec, planted_data, dataclasses.replace(config, pipeline=True)).fit()
    assert len(pipelined.step_losses) == len(plain.step_losses) == 26
    np.testing.assert_allclose(pipelined.step_losses, plain.step_losses, rtol=0, atol=1e-6)
    assert pipelined.test == pytest.approx(plain.test, abs=1e-6)


def test_fsdp2_dense_parts_give_the_same_run(planted_data):
    from torch.distributed.fsdp import FSDPModule

    spec = spec_of(planted_data)
    plain = Trainer(spec, planted_data, FAST).fit()
    trainer = Trainer(spec, planted_data, dataclasses.replace(FAST, dense_parallel="fsdp"))
    assert isinstance(trainer.model.module.over_arch, FSDPModule)
    fsdp = trainer.fit()
    np.testing.assert_allclose(fsdp.step_losses, plain.step_losses, rtol=0, atol=1e-6)
    with pytest.raises(ValueError, match="dense_parallel: expected one of ddp, fsdp, got 'zero'"):
        TrainConfig(dense_parallel="zero")


def test_alone_every_table_is_fused_unless_a_resumed_checkpoint_keeps_its_type(planted_data):
    from autorec.models import build_model
    from autorec.train.distributed import FUSED_KERNELS, planner_constraints

    model = build_model(spec_of(planted_data), device=torch.device("meta"))
    names = sorted(t.name for t in spec_of(planted_data).tables)
    alone = planner_constraints(model, {names[0]: "data_parallel"}, alone=True)
    assert sorted(alone) == names
    assert alone[names[0]].sharding_types == ["data_parallel"]
    assert alone[names[0]].compute_kernels == ["dense"]
    for name in names[1:]:
        assert alone[name].sharding_types == ["table_wise"]
        assert alone[name].compute_kernels == list(FUSED_KERNELS)
    assert planner_constraints(model) == {}  # over several ranks: the planner's choice (fp32 tables)


def test_one_process_trains_without_ddp_as_ddp_did(planted_data, monkeypatch):
    """In a one-process group the dense parts are not wrapped in DDP (nothing to all-reduce),
    and training takes the same path, bit for bit, with the same checkpoint keys."""
    import functools

    from torch.nn.parallel import DistributedDataParallel
    from torchrec.distributed.model_parallel import DefaultDataParallelWrapper

    import autorec.train.trainer as trainer_module
    from autorec.models import RecModel

    spec = spec_of(planted_data)
    alone = Trainer(spec, planted_data, FAST)
    assert type(alone.model._dmp_wrapped_module) is RecModel
    monkeypatch.setattr(trainer_module, "shard", functools.partial(trainer_module.shard,
                                                                   wrapper=DefaultDataParallelWrapper()))
    wrapped = Trainer(spec, planted_data, FAST)
    assert isinstance(wrapped.model._dmp_wrapped_module, DistributedDataParallel)
    assert list(alone.model.state_dict()) == list(wrapped.model.state_dict())
    np.testing.assert_array_equal(alone.fit().step_losses, wrapped.fit().step_losses)
