"""Embedding weight decay: one meaning on every kernel, or a clear refusal where it cannot apply."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from fbgemm_gpu.split_embedding_configs import EmbOptimType
from fbgemm_gpu.split_table_batched_embeddings_ops_common import EmbeddingLocation
from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
    ComputeDevice,
    SplitTableBatchedEmbeddingBagsCodegen,
)
from fbgemm_gpu.tbe.config.optimizer_config import WeightDecayMode
from torchrec.optim.rowwise_adagrad import RowWiseAdagrad

from autorec.data import load_dataset
from autorec.presets import preset
from autorec.train import embedding_optim
from autorec.train.embedding_optim import EPS, RowSparseAdagrad
from autorec.train.trainer import TrainConfig, Trainer

FAST = TrainConfig(epochs=1, batch_size=256, progress=False)


def _grads(rows: int, dim: int, looked_up: list[int], seed: int) -> torch.Tensor:
    g = torch.zeros(rows, dim)
    g[looked_up] = torch.randn(len(looked_up), dim, generator=torch.Generator().manual_seed(seed))
    return g


def test_without_weight_decay_it_is_torchrecs_rowwise_adagrad():
    start = torch.randn(6, 4, generator=torch.Generator().manual_seed(0))
    ours, theirs = torch.nn.Parameter(start.clone()), torch.nn.Parameter(start.clone())
    opt_ours, opt_theirs = RowSparseAdagrad([ours], lr=0.1), RowWiseAdagrad([theirs], lr=0.1, eps=EPS)
    for step, rows in enumerate(([0, 2], [2, 3, 5], [0])):
        ours.grad = theirs.grad = _grads(6, 4, rows, step)
        opt_ours.step()
        opt_theirs.step()
    assert torch.allclose(ours, theirs, atol=1e-7)
    assert torch.allclose(opt_ours.state[ours]["sum"], opt_theirs.state[theirs]["sum"])


def test_weight_decay_touches_only_the_rows_a_batch_looked_up():
    start = torch.randn(6, 4, generator=torch.Generator().manual_seed(1))
    table = torch.nn.Parameter(start.clone())
    opt = RowSparseAdagrad([table], lr=0.1, weight_decay=0.5)
    grad = _grads(6, 4, [1, 4], 2)
    table.grad = grad
    opt.step()
    untouched = [0, 2, 3, 5]
    assert torch.equal(table[untouched], start[untouched])  # torchrec's version moves these every step
    assert torch.equal(opt.state[table]["sum"][untouched], torch.zeros(4, 1))
    g = grad[[1, 4]] + 0.5 * start[[1, 4]]  # L2: the decay joins the gradient, then row-wise Adagrad
    expected = start[[1, 4]] - 0.1 * g / (g.pow(2).mean(dim=1, keepdim=True).sqrt() + EPS)
    assert torch.allclose(table[[1, 4]], expected, atol=1e-6)


@pytest.mark.parametrize("scale", [1.0, 1e-9])
def test_a_replicated_table_steps_as_fbgemms_fused_kernel(scale):
    """The same lookups and gradient, on fbgemm's CPU TBE and on RowSparseAdagrad (a table the
    planner replicates): the same update, also where the gradient is small enough for eps to
    count (at 1e-9, torchrec's default eps of 1e-10 gives steps several times the TBE's)."""
    start = torch.arange(80, dtype=torch.float32).view(10, 8) / 80
    tbe = SplitTableBatchedEmbeddingBagsCodegen(
        [(10, 8, EmbeddingLocation.HOST, ComputeDevice.CPU)],
        optimizer=EmbOptimType.EXACT_ROWWISE_ADAGRAD, learning_rate=0.1)  # fbgemm's own eps
    table = torch.nn.Parameter(start.clone())
    opt = RowSparseAdagrad([table], lr=0.1)
    with torch.no_grad():
        tbe.split_embedding_weights()[0].copy_(start)
    indices, offsets = torch.tensor([1, 2, 2, 7]), torch.tensor([0, 1, 4])
    weight = torch.linspace(1, 2, 8) * scale
    for _ in range(3):
        (tbe(indices, offsets) * weight).sum().backward()
        pooled = torch.stack([table[1], table[[2, 2, 7]].sum(0)])
        opt.zero_grad()
        (pooled * weight).sum().backward()
        opt.step()
    moved = (table - start).abs().max()
    assert moved > 0.05  # row-wise Adagrad steps by about lr whatever the gradient's size
    torch.testing.assert_close(tbe.split_embedding_weights()[0], table.detach(), rtol=1e-5, atol=1e-6)


def test_the_trainers_fused_tables_get_the_one_eps(monkeypatch):
    """torchrec hands the fused kwargs' eps on to fbgemm's TBE (a value other than fbgemm's default
    shows it is not the default that arrives)."""
    monkeypatch.setattr(embedding_optim, "EPS", 1e-6)
    data = load_dataset("synthetic", seed=0, preset="order3", num_samples=3000)
    trainer = Trainer(preset("dlrm", data.schema, dim=32), data, FAST)  # fused kernels (see below)
    tbes = [module._emb_module for lookup in trainer.model.module.sparse_arch._lookups
            for module in getattr(lookup, "_emb_modules", [])]
    assert tbes and all(tbe.optimizer_args.eps == 1e-6 for tbe in tbes)


def test_fbgemms_cpu_kernel_applies_no_weight_decay():
    """The premise of the refusal below: on the CPU a TBE's row-wise Adagrad step is the same with
    weight decay (L2 or decoupled) as without. If fbgemm starts applying it, lift the refusal."""
    results = []
    for wd, mode in ((0.0, WeightDecayMode.NONE), (0.5, WeightDecayMode.L2), (0.5, WeightDecayMode.DECOUPLE)):
        tbe = SplitTableBatchedEmbeddingBagsCodegen(
            [(10, 8, EmbeddingLocation.HOST, ComputeDevice.CPU)],
            optimizer=EmbOptimType.EXACT_ROWWISE_ADAGRAD, learning_rate=0.1,
            weight_decay=wd, weight_decay_mode=mode)
        with torch.no_grad():
            weights = tbe.split_embedding_weights()[0]
            weights.copy_(torch.arange(80, dtype=torch.float32).view(10, 8) / 80)
        tbe(torch.tensor([1, 2]), torch.tensor([0, 1, 2])).sum().backward()
        results.append(tbe.split_embedding_weights()[0].clone())
    assert torch.equal(results[0], results[1]) and torch.equal(results[0], results[2])


def test_a_weight_decay_fused_cpu_tables_would_ignore_is_refused():
    data = load_dataset("synthetic", seed=0, preset="order3", num_samples=3000)
    spec = preset("dlrm", data.schema, dim=32)  # the planner puts these tables on fused kernels
    refused = (r"embedding_weight_decay=1e-05: fbgemm's CPU kernels apply no weight decay, and the plan "
               r"trains \d+ table\(s\) on them \(t_cat_")
    with pytest.raises(ValueError, match=refused):
        Trainer(spec, data, dataclasses.replace(FAST, embedding_weight_decay=1e-5))
    Trainer(spec, data, FAST)  # without weight decay: trains as before


def test_replicated_tables_decay_only_the_rows_looked_up(planted_data):
    """The planner replicates these small tables; with weight decay a step leaves every row that
    its batch did not look up as it was."""
    trainer = Trainer(preset("dlrm", planted_data.schema, dim=8), planted_data,
                      dataclasses.replace(FAST, embedding_weight_decay=0.1, dense_lr=0.0))
    batch = next(iter(trainer._batches("train", 8, True)))
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if "embedding_bags" in n}
    assert before
    trainer.train_step(batch)
    after = dict(trainer.model.named_parameters())
    features = batch.sparse_features.to_dict()
    for name, weights in before.items():
        feature = name.split("embedding_bags.t_")[1].removesuffix(".weight")
        ids = features[feature].values().unique()
        unseen = torch.ones(len(weights), dtype=torch.bool)
        unseen[ids] = False
        assert unseen.any() and (~unseen).any()
        assert torch.equal(after[name][unseen], weights[unseen]), name
        assert not torch.equal(after[name][~unseen], weights[~unseen]), name
