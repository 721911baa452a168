import dataclasses
import time

import numpy as np
import pytest
import torch

from autorec.data import InMemoryDataset
from autorec.presets import preset
from autorec.train.trainer import TrainConfig, Trainer, TrainingDiverged

FAST = TrainConfig(epochs=3, batch_size=256, seed=0, progress=False, embedding_lr=0.1, dense_lr=3e-3)


@pytest.mark.parametrize("name", ["dlrm", "wukong"])
def test_training_learns_a_planted_signal(planted_data, name):
    result = Trainer(preset(name, planted_data.schema, dim=8), planted_data, FAST).fit()
    assert result.test["auc"] > 0.75, result.test
    assert len(result.history) >= 2 and result.history[0].samples_per_s > 0
    assert result.val == result.history[result.best_epoch].val
    assert result.test["n"] == planted_data.num_rows("test")


def test_same_seed_same_result_other_seed_differs(planted_data):
    spec = preset("dlrm", planted_data.schema, dim=8)
    config = dataclasses.replace(FAST, epochs=1)
    a = Trainer(spec, planted_data, config).fit().test
    b = Trainer(spec, planted_data, config).fit().test
    c = Trainer(spec, planted_data, dataclasses.replace(config, seed=1)).fit().test
    assert a == b
    assert a["logloss"] != c["logloss"]


def test_checkpoint_round_trip_restores_predictions(planted_data, tmp_path):
    spec = preset("dcnv2", planted_data.schema, dim=8)
    trained = Trainer(spec, planted_data, dataclasses.replace(FAST, epochs=1))
    trained.fit()
    trained.save_checkpoint(tmp_path / "ckpt")
    expected = trained.predict("test")[1]
    fresh = Trainer(spec, planted_data, dataclasses.replace(FAST, seed=7))
    assert not np.allclose(fresh.predict("test")[1], expected)
    fresh.load_checkpoint(tmp_path / "ckpt")
    np.testing.assert_allclose(fresh.predict("test")[1], expected, rtol=0, atol=0)


def test_early_stopping_and_epoch_callback(planted_data):
    seen = []
    config = dataclasses.replace(FAST, epochs=6, patience=1, dense_lr=0.0, embedding_lr=0.0)
    result = Trainer(preset("dlrm", planted_data.schema, dim=8), planted_data, config,
                     on_epoch=seen.append).fit()
    # Nothing learns with zero learning rates: the first epoch stays best, the second stops it.
    assert [r.epoch for r in seen] == [0, 1] and result.best_epoch == 0


def test_divergence_is_reported(planted_data):
    splits = dict(planted_data.splits)
    train = splits["train"]
    splits["train"] = dataclasses.replace(train, dense=torch.full_like(train.dense, float("nan")))
    broken = InMemoryDataset("broken", splits)
    with pytest.raises(TrainingDiverged, match="loss is nan at epoch 0 step 0"):
        Trainer(preset("dlrm", broken.schema, dim=8), broken, FAST).fit()


def test_architecture_must_match_the_dataset(planted_data):
    from autorec.data import Schema, SparseFeature

    other = preset("dlrm", Schema(dense=("a", "b"), sparse=(SparseFeature("city", 5),)))
    with pytest.raises(ValueError, match=r"uses features \['city'\] that dataset 'planted' lacks"):
        Trainer(other, planted_data, FAST)
    with pytest.raises(ValueError, match="dense_optimizer: expected one of adam, adagrad"):
        TrainConfig(dense_optimizer="sgd")


def test_sharded_model_places_features_like_the_plain_model(tmp_path):
    """Under DistributedModelParallel the embeddings come back grouped by sharding type (a plan
    that mixes table-wise and data-parallel tables, as torchrec's planner makes over several
    ranks); the model must still place each feature where build_model(spec) does."""
    import json

    from autorec.data import load_dataset
    from autorec.models import build_model

    data = load_dataset("movielens100k")
    spec = preset("dlrm", data.schema, dim=8)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "tables": {
        t.name: {"sharding_type": "data_parallel"} if i % 2 else {"sharding_type": "table_wise", "ranks": [0]}
        for i, t in enumerate(spec.tables)}}))
    trainer = Trainer(spec, data, dataclasses.replace(FAST, epochs=1, plan=str(plan)))
    keys = trainer.model.module.sparse_arch(next(iter(data.batches("test", 4, shuffle=False)))
                                            .sparse_features).keys()
    assert tuple(keys) != spec.feature_names  # the case this test is about
    plain = build_model(spec)
    state = {}
    for key, value in trainer.model.state_dict().items():
        key = key.removeprefix("_dmp_wrapped_module.").removeprefix("module.")
        if hasattr(value, "local_shards"):
            value = value.local_shards()[0].tensor
        state[key] = value
    plain.load_state_dict(state)
    batch = next(iter(data.batches("test", 64, shuffle=False)))
    trainer.model.eval()
    with torch.no_grad():
        torch.testing.assert_close(trainer.model(batch.dense_features, batch.sparse_features),
                                   plain(batch.dense_features, batch.sparse_features), rtol=0, atol=1e-6)


def _tables_and_dense(trainer):
    named = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    return ({n: p for n, p in named.items() if n.startswith("sparse_arch.")},
            {n: p for n, p in named.items() if not n.startswith("sparse_arch.")})


@pytest.mark.parametrize("sharding", ["default", "data_parallel"])
@pytest.mark.parametrize("dense_lr, embedding_lr", [(0.0, 0.1), (1e-2, 0.0)])
def test_every_table_follows_embedding_lr_whatever_the_plan(planted_data, tmp_path, sharding, dense_lr,
                                                            embedding_lr):
    """Fused (one process's default) or replicated (data_parallel, as torchrec's planner puts
    small tables over several ranks), every table takes row-wise Adagrad at embedding_lr,
    never the dense optimizer's rate."""
    import json

    spec = preset("dlrm", planted_data.schema, dim=8)
    config = dataclasses.replace(FAST, dense_lr=dense_lr, embedding_lr=embedding_lr)
    if sharding == "data_parallel":
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "tables": {
            t.name: {"sharding_type": "data_parallel"} for t in spec.tables}}))
        config = dataclasses.replace(config, plan=str(plan))
    trainer = Trainer(spec, planted_data, config)
    kinds = {ps.sharding_type for ps in trainer.model.plan.plan["sparse_arch"].values()}
    assert kinds == {"table_wise" if sharding == "default" else "data_parallel"}
    tables, dense = _tables_and_dense(trainer)
    assert tables and dense
    trainer.train_step(next(iter(trainer._batches("train", 256, True))))
    tables_after, dense_after = _tables_and_dense(trainer)
    tables_moved = any(not torch.equal(tables[n], tables_after[n]) for n in tables)
    dense_moved = any(not torch.equal(dense[n], dense_after[n]) for n in dense)
    assert (tables_moved, dense_moved) == (embedding_lr > 0, dense_lr > 0)


@pytest.mark.parametrize("sharding", ["default", "data_parallel"])
def test_scaled_table_rates_freeze_the_tables_and_leave_the_dense_parts(planted_data, tmp_path, sharding):
    """``scale_table_lr(0)`` after the first epoch: the next epoch moves no table, fused or
    replicated, and every dense part still learns at its own rate."""
    import json

    spec = preset("dlrm", planted_data.schema, dim=8)
    config = dataclasses.replace(FAST, epochs=2, patience=5)
    if sharding == "data_parallel":
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "tables": {
            t.name: {"sharding_type": "data_parallel"} for t in spec.tables}}))
        config = dataclasses.replace(config, plan=str(plan))
    after: list[tuple] = []  # (tables, dense) at each epoch's end, before the best epoch is restored

    def on_epoch(record):
        after.append(_tables_and_dense(trainer))
        trainer.scale_table_lr(0.0)  # from the second epoch on

    trainer = Trainer(spec, planted_data, config, on_epoch=on_epoch)
    tables_0, _ = _tables_and_dense(trainer)
    trainer.fit()
    (tables_1, dense_1), (tables_2, dense_2) = after
    assert any(not torch.equal(tables_0[n], tables_1[n]) for n in tables_0)  # the first epoch trained them
    assert all(torch.equal(tables_1[n], tables_2[n]) for n in tables_1)
    assert any(not torch.equal(dense_1[n], dense_2[n]) for n in dense_1)
    dense_lr = [g["lr"] for g in trainer._unfused[0].param_groups]
    assert dense_lr == pytest.approx([config.dense_lr] * len(dense_lr))


@pytest.mark.parametrize("schedule, factor", [("constant", 1.0), ("cosine", 0.1)])
def test_the_schedule_reaches_every_optimizer(planted_data, schedule, factor):
    from autorec.train.records import lr_factor

    config = dataclasses.replace(FAST, epochs=2, patience=5, lr_schedule=schedule, warmup_steps=4)
    trainer = Trainer(preset("dlrm", planted_data.schema, dim=8), planted_data, config)
    bases = [g["lr"] for g in trainer.optimizer.param_groups]
    assert sorted(bases) == pytest.approx(sorted([config.dense_lr, config.embedding_lr]))  # (fbgemm: fp32)
    trainer.fit()
    # After the last planned step every rate is its base times the schedule's end value.
    assert [g["lr"] for g in trainer.optimizer.param_groups] == pytest.approx([b * factor for b in bases])
    assert lr_factor(schedule, 0, 100, warmup_steps=4) == 0.25


def test_the_time_waiting_for_batches_is_measured(planted_data):
    """Every batch here takes at least 20 ms to arrive: the epoch's data wait holds those
    seconds (and no more than the epoch), and the result's share is wait / training time."""
    config = dataclasses.replace(FAST, epochs=1, max_steps_per_epoch=5, prefetch=0)
    trainer = Trainer(preset("dlrm", planted_data.schema, dim=8), planted_data, config)
    plain = trainer._batches

    def slow(*args, **kwargs):
        for batch in plain(*args, **kwargs):
            time.sleep(0.02)
            yield batch

    trainer._batches = slow
    result = trainer.fit()
    epoch = result.history[0]
    assert 5 * 0.02 <= epoch.data_wait_s <= epoch.seconds
    assert result.data_wait_share == pytest.approx(epoch.data_wait_s / epoch.seconds)
    assert result.to_dict()["data_wait_share"] == round(result.data_wait_share, 4)
    quick = Trainer(preset("dlrm", planted_data.schema, dim=8), planted_data, config).fit()
    assert 0 <= quick.history[0].data_wait_s < epoch.data_wait_s


def _slowed(trainer: Trainer, batch_s: float, step_s: float) -> Trainer:
    """``trainer`` whose batches take ``batch_s`` to build and whose steps take ``step_s`` more."""
    plain_batches, plain_step = trainer._batches, trainer.train_step

    def batches(*args, **kwargs):
        for batch in plain_batches(*args, **kwargs):
            time.sleep(batch_s)
            yield batch

    def step(batch):
        time.sleep(step_s)
        return plain_step(batch)

    trainer._batches, trainer.train_step = batches, step
    return trainer


def test_prefetching_builds_the_next_batches_during_the_step(planted_data):
    """Batches take 40 ms to build, steps 60 ms: on the training thread the epoch waits for
    every batch; built ahead on the prefetch thread, only for the first."""
    spec = preset("dlrm", planted_data.schema, dim=8)
    waits = {}
    for depth in (0, 2):
        config = dataclasses.replace(FAST, epochs=1, max_steps_per_epoch=6, prefetch=depth)
        waits[depth] = _slowed(Trainer(spec, planted_data, config), 0.04, 0.06).fit().history[0].data_wait_s
    assert waits[0] >= 6 * 0.04
    assert waits[2] < 3 * 0.04, waits


def test_prefetching_trains_the_same_model(planted_data):
    spec = preset("dlrm", planted_data.schema, dim=8)
    results = [Trainer(spec, planted_data, dataclasses.replace(FAST, epochs=2, prefetch=depth)).fit()
               for depth in (0, 1, 3)]
    assert results[0].test == results[1].test == results[2].test
    assert results[0].step_losses == results[2].step_losses


def test_a_failed_epoch_leaves_no_prefetch_thread(planted_data):
    import threading

    splits = dict(planted_data.splits)
    train = splits["train"]
    splits["train"] = dataclasses.replace(train, dense=torch.full_like(train.dense, float("nan")))
    broken = InMemoryDataset("broken", splits)
    with pytest.raises(TrainingDiverged):
        Trainer(preset("dlrm", broken.schema, dim=8), broken, dataclasses.replace(FAST, prefetch=4)).fit()
    assert not [t for t in threading.enumerate() if t.name == "autorec-prefetch"]


def test_val_samples_validates_on_the_first_samples_only(planted_data):
    config = dataclasses.replace(FAST, epochs=1, max_steps_per_epoch=3, eval_batch_size=64, val_samples=100)
    trainer = Trainer(preset("dlrm", planted_data.schema, dim=8), planted_data, config)
    result = trainer.fit()
    assert result.val["n"] == 100 < planted_data.num_rows("val")
    whole = dataclasses.replace(config, val_samples=None)
    labels, _ = Trainer(preset("dlrm", planted_data.schema, dim=8), planted_data, whole).predict("val")
    first = trainer.predict("val")[0]
    np.testing.assert_array_equal(first, labels[:100])  # the split's first 100, in order
    assert result.test["n"] == planted_data.num_rows("test")  # the test split stays whole
    with pytest.raises(ValueError, match="val_samples: expected a positive number of samples, got 0"):
        dataclasses.replace(FAST, val_samples=0)


def test_a_paused_run_goes_on_as_if_never_stopped(planted_data, tmp_path):
    spec = preset("dcnv2", planted_data.schema, dim=8)
    config = dataclasses.replace(FAST, epochs=2, checkpoint_dir=str(tmp_path / "whole"))
    whole = Trainer(spec, planted_data, config).fit()
    steps = -(-planted_data.num_rows("train") // config.batch_size)
    for pause in (5, steps):  # inside the first epoch, and at its end
        folder = str(tmp_path / f"paused-{pause}")
        paused = Trainer(spec, planted_data, dataclasses.replace(config, checkpoint_dir=folder,
                                                                 pause_at_step=pause)).fit()
        assert paused.paused_at == pause and paused.test == {} and 0.5 < paused.val["auc"] <= 1.0
        assert paused.history[-1].samples == min(pause * config.batch_size, planted_data.num_rows("train"))
        again = Trainer(spec, planted_data, dataclasses.replace(config, checkpoint_dir=folder,
                                                                pause_at_step=pause, resume=True)).fit()
        assert again.paused_at == pause and again.val == paused.val  # cut after the pause: no step more
        rest = Trainer(spec, planted_data,
                       dataclasses.replace(config, checkpoint_dir=folder, resume=True)).fit()
        assert rest.paused_at is None and rest.resumed_from["step"] == pause % steps
        assert rest.test["auc"] == pytest.approx(whole.test["auc"], abs=1e-6)
        assert rest.val["logloss"] == pytest.approx(whole.val["logloss"], abs=1e-6)
    last = Trainer(spec, planted_data, dataclasses.replace(config, checkpoint_dir=str(tmp_path / "end"),
                                                          pause_at_step=2 * steps)).fit()
    assert last.paused_at is None and last.test  # a pause at the run's last step: the run ends
    with pytest.raises(ValueError, match="pause_at_step: expected a positive number of steps, got 0"):
        dataclasses.replace(FAST, pause_at_step=0, checkpoint_dir=str(tmp_path))
    with pytest.raises(ValueError, match="pause_at_step: needs checkpoint_dir"):
        dataclasses.replace(FAST, pause_at_step=3)
