"""The CPU tables' row-wise Adagrad on both kernels (compiled, torch's ops): the same update as
fbgemm's fused backward."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
import torch
from fbgemm_gpu.split_embedding_configs import SparseType
from fbgemm_gpu.split_table_batched_embeddings_ops_common import PoolingMode
from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
    ComputeDevice,
    EmbeddingLocation,
    OptimType,
    SplitTableBatchedEmbeddingBagsCodegen,
)

from autorec.data import load_dataset
from autorec.presets import preset
from autorec.train import cpu_lookup, native_lookup, native_update
from autorec.train.trainer import TrainConfig, Trainer

HOST = (EmbeddingLocation.HOST, ComputeDevice.CPU)


def _tbe(rows_dims: list[tuple[int, int]], pooling: PoolingMode = PoolingMode.SUM,
         feature_table_map: list[int] | None = None, **kwargs: object) -> cpu_lookup.TBE:
    tbe = SplitTableBatchedEmbeddingBagsCodegen(
        [(r, d, *HOST) for r, d in rows_dims], feature_table_map=feature_table_map,
        optimizer=kwargs.pop("optimizer", OptimType.EXACT_ROWWISE_ADAGRAD), learning_rate=0.05,
        eps=1e-8, pooling_mode=pooling, **kwargs)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        tbe.weights_host.copy_(torch.rand(tbe.weights_host.shape, generator=gen) - 0.5)
    return tbe


def _batch(rows: list[int], batch: int, gen: torch.Generator,
           multi_hot: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Feature-major bags; multi-hot bags hold 0-3 rows, repeats within a bag included."""
    indices, lengths = [], []
    for r in rows:
        for _ in range(batch):
            n = int(torch.randint(0, 4, (), generator=gen)) if multi_hot else 1
            indices.append(torch.randint(0, min(r, 6), (n,), generator=gen))  # few rows: many repeats
            lengths.append(n)
    offsets = torch.zeros(len(lengths) + 1, dtype=torch.long)
    offsets[1:] = torch.tensor(lengths).cumsum(0)
    return torch.cat(indices), offsets


CASES = {
    "one-hot, one width": ([(50, 8), (7, 8), (300, 8)], PoolingMode.SUM, None, False),
    "multi-hot, one width": ([(50, 8), (7, 8), (300, 8)], PoolingMode.SUM, None, True),
    "mean pooling, one width": ([(50, 4), (7, 4), (300, 4)], PoolingMode.MEAN, None, True),
    "two features on one table, one width": ([(50, 8), (9, 8)], PoolingMode.SUM, [0, 0, 1], True),
    "multi-hot, mixed widths": ([(50, 4), (7, 16), (300, 8)], PoolingMode.SUM, None, True),
    "mean pooling, mixed widths": ([(50, 4), (7, 12), (300, 8)], PoolingMode.MEAN, None, True),
    "two features on one table": ([(50, 8), (9, 4)], PoolingMode.SUM, [0, 0, 1], True),
}


def test_the_native_kernel_is_built_here() -> None:
    """CI and every supported machine have a C++ compiler: the default kernel must be there."""
    assert native_update.library() is not None


@pytest.mark.parametrize("kernel", cpu_lookup.KERNELS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_update_is_fbgemms(case: str, kernel: str, monkeypatch: pytest.MonkeyPatch) -> None:
    rows_dims, pooling, table_map, multi_hot = CASES[case]
    ours, theirs = _tbe(rows_dims, pooling, table_map), _tbe(rows_dims, pooling, table_map)
    assert torch.equal(ours.weights_host, theirs.weights_host)
    assert cpu_lookup.switch(ours, kernel)
    ran: list[str] = []  # which kernel really ran: the native one wherever the widths are one
    monkeypatch.setattr(native_update, "rowwise_adagrad", _recording(native_update.rowwise_adagrad, ran))
    expect_native = kernel == "native" and "mixed widths" not in case and case != "two features on one table"
    features = [rows_dims[t][0] for t in (table_map or range(len(rows_dims)))]
    gen = torch.Generator().manual_seed(1)
    for step in range(4):
        indices, offsets = _batch(features, 16, gen, multi_hot)
        out_a, out_b = ours(indices, offsets), theirs(indices, offsets)
        if step == 0:
            assert torch.equal(out_a, out_b)  # the compiled lookup or fbgemm's forward: the same bits
        torch.testing.assert_close(out_a, out_b, rtol=1e-5, atol=1e-6)
        upstream = torch.randn(out_a.shape, generator=gen)
        (out_a * upstream).sum().backward()
        (out_b * upstream).sum().backward()
        if step == 1:  # a learning-rate change (torchrec's schedulers set it between steps)
            ours.set_learning_rate(0.02)
            theirs.set_learning_rate(0.02)
    torch.testing.assert_close(ours.momentum1_host, theirs.momentum1_host, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(ours.weights_host, theirs.weights_host, rtol=1e-5, atol=1e-6)
    assert (ours.momentum1_host > 0).sum() > 0
    assert ran == (["native"] * 4 if expect_native else [])


def _recording(fn: Any, ran: list[str]) -> Any:
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        ran.append("native")
        return fn(*args, **kwargs)
    return wrapped


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_the_kernels_agree_over_many_repeated_rows(threads: int) -> None:
    """Hot rows read by hundreds of bags, split over the threads at run boundaries, and a
    gradient whose rows are a slice of a wider tensor; both kernels sum each row's gradients in
    the bags' order, so they agree to float rounding."""
    rows_dims = [(40, 16), (3, 16), (1000, 16)]
    tables = {k: _tbe(rows_dims) for k in cpu_lookup.KERNELS}
    gen = torch.Generator().manual_seed(2)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for _ in range(3):
            indices, offsets = _batch([r for r, _ in rows_dims], 512, gen, True)
            # torchrec hands the lookup's gradient as a slice of the wider [B, dense + tables]
            # one: the native kernel reads its rows in place
            upstream = torch.randn(512, 60, generator=gen)[:, 5:53]
            assert not upstream.is_contiguous()
            for kernel, tbe in tables.items():
                cpu_lookup.rowwise_adagrad_step(tbe, indices, offsets, upstream, kernel=kernel)
    finally:
        torch.set_num_threads(before)
    native, plain = tables["native"], tables["torch"]
    torch.testing.assert_close(native.momentum1_host, plain.momentum1_host, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(native.weights_host, plain.weights_host, rtol=1e-5, atol=1e-6)


def test_the_native_kernel_refuses_a_row_past_the_tables() -> None:
    tbe = _tbe([(10, 4), (10, 4)])
    before = tbe.weights_host.clone()
    with pytest.raises(RuntimeError, match=r"index 10 \(position 3\) is out of bounds.*20 rows"):
        native_update.rowwise_adagrad(tbe, torch.tensor([1, 2, 2, 10]), torch.tensor([0, 1, 2, 3, 4]),
                                      torch.ones(2, 8), mean=False)
    assert torch.equal(tbe.weights_host, before)  # refused before any row moved


def test_an_unknown_kernel_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="kernel 'cuda': expected one of native, torch"):
        cpu_lookup.switch(_tbe([(10, 4)]), "cuda")


def test_rows_nobody_looked_up_stay_as_they_were() -> None:
    tbe = _tbe([(100, 4), (100, 4)])
    cpu_lookup.switch(tbe)
    before = tbe.weights_host.clone().view(-1, 4)
    # B 2: table 0's bags read rows 3 and 3, table 1's read row 7 and nothing
    out = tbe(torch.tensor([3, 3, 7]), torch.tensor([0, 1, 2, 3, 3]))
    out.sum().backward()
    moved = (tbe.weights_host.view(-1, 4) != before).any(1).nonzero().view(-1).tolist()
    assert moved == [3, 107]
    assert tbe.momentum1_host.nonzero().view(-1).tolist() == [3, 107]


def test_weighted_lookups_and_inference_go_to_fbgemm() -> None:
    ours, theirs = _tbe([(20, 4)]), _tbe([(20, 4)])
    cpu_lookup.switch(ours)
    indices, offsets = torch.tensor([1, 2, 2]), torch.tensor([0, 2, 3])
    weights = torch.tensor([0.5, 2.0, 1.0])
    a = ours(indices, offsets, per_sample_weights=weights)
    b = theirs(indices, offsets, per_sample_weights=weights)
    a.sum().backward()
    b.sum().backward()
    assert torch.equal(ours.weights_host, theirs.weights_host)  # fbgemm's own update, both
    with torch.no_grad():
        assert torch.equal(ours(indices, offsets), theirs(indices, offsets))
    cpu_lookup.restore(ours)
    assert "forward" not in ours.__dict__


@pytest.mark.parametrize(("kwargs", "reason"), [
    ({"optimizer": OptimType.EXACT_SGD}, "optimizer"),
    ({"weights_precision": SparseType.FP16}, "fp16 weights"),
    ({"weight_decay": 1e-4}, "weight decay"),
    ({"gradient_clipping": True}, "gradient clipping"),
])
def test_other_updates_are_left_to_fbgemm_with_the_reason(kwargs: dict[str, object], reason: str) -> None:
    tbe = _tbe([(20, 4)], **kwargs)
    assert reason in (cpu_lookup.unsupported(tbe) or "")
    assert not cpu_lookup.switch(tbe)
    assert "forward" not in tbe.__dict__
    assert "not an fbgemm" in cpu_lookup.unsupported(torch.nn.Linear(2, 2))


def test_the_trainer_switches_its_fused_tables_and_trains_as_fbgemm_does() -> None:
    ds = load_dataset("synthetic", num_samples=3000, seed=0)
    spec = preset("dlrm", ds.schema)
    ours = Trainer(spec, ds, TrainConfig(batch_size=256, progress=False))
    tables = cpu_lookup.fused_tables(ours.model)
    assert tables and all("forward" in t.__dict__ for t in tables)
    theirs = Trainer(spec, ds, TrainConfig(batch_size=256, progress=False))
    for t in cpu_lookup.fused_tables(theirs.model):
        cpu_lookup.restore(t)
    batches = list(ours._batches("train", 256, True, 0))[:5]
    for batch in batches:
        assert ours.train_step(batch)[0] == pytest.approx(theirs.train_step(batch)[0], rel=1e-4)
    for a, b in zip(tables, cpu_lookup.fused_tables(theirs.model), strict=True):
        torch.testing.assert_close(a.weights_host, b.weights_host, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("forward", ["native", "fbgemm"])
def test_a_row_past_its_table_is_an_error_not_row_zero(forward: str) -> None:
    """fbgemm's own path (bounds check WARNING) logs and reads row 0 instead; here it raises, on
    the compiled lookup (naming the feature) as on fbgemm's forward."""
    tbe = _tbe([(10, 4), (10, 4)])
    cpu_lookup.switch(tbe)
    named = "feature 0: the index at position 1 is " if forward == "native" else ""
    with pytest.raises(RuntimeError, match=f"{named}out of bounds: 12"), (
            native_lookup.disabled() if forward == "fbgemm" else contextlib.nullcontext()):
        tbe(torch.tensor([1, 12, 2, 5]), torch.tensor([0, 1, 2, 3, 4]))
