"""The GPU scaling ladder (benchmarks/scaling_gpu.py), run on the CPU at a tiny size: its batches
are the dataset's own, its data budget continues the CPU ladder's, and a run writes every rung
and the fits."""

import json
import sys

import pytest
import torch

from autorec.data.synthetic.config import SyntheticConfig
from autorec.data.synthetic.dataset import generate
from autorec.strategies.ladder import LadderStrategy
from benchmarks import scaling_gpu
from benchmarks.scaling_gpu import DeviceSplit, rung_samples


def test_a_slice_is_the_batch_of_those_rows():
    data = generate(SyntheticConfig.from_options(preset="tiny", num_samples=300), seed=0).splits["train"]
    order = torch.randperm(len(data), generator=torch.Generator().manual_seed(1))
    split = DeviceSplit.of(data, torch.device("cpu"), order)
    dense, kjt, labels = split.batch(17, 81)
    expected = data.batch(order[17:81])
    assert torch.equal(dense, expected.dense_features) and torch.equal(labels, expected.labels)
    assert kjt.keys() == expected.sparse_features.keys()
    for key in kjt.keys():  # multi-hot features too (the tiny preset pools 2 and 3 ids)
        got, want = kjt[key], expected.sparse_features[key]
        assert torch.equal(got.values(), want.values()) and torch.equal(got.lengths(), want.lengths())


def test_the_budget_continues_the_cpu_ladders():
    cpu = LadderStrategy(rungs=5, samples=[250_000, 2_000_000])
    ours = [rung_samples(r, 250_000, 2_000_000, 5) for r in range(5)]
    assert ours == [cpu.rung_samples(r) for r in range(5)]
    ratio = 2_000_000 / rung_samples(3, 250_000, 2_000_000, 5)
    assert rung_samples(6, 250_000, 2_000_000, 5) == pytest.approx(2_000_000 * ratio**2, rel=1e-6)


def test_a_run_writes_every_rung_and_the_fits(tmp_path, monkeypatch):
    out = tmp_path / "ladder.json"
    monkeypatch.setattr(sys, "argv", [
        "scaling_gpu", "--device", "cpu", "--preset", "tiny", "--families", "dlrm,wukong", "--rungs", "4",
        "--samples", "500,1000", "--anchor-rungs", "3", "--num-samples", "3000", "--batch-size", "256",
        "--json", str(out)])
    scaling_gpu.main()
    figures = json.loads(out.read_text())
    for family in ("dlrm", "wukong"):
        assert figures[f"{family}_rungs"] == 4
        samples = [figures[f"{family}_r{r}_samples"] for r in range(4)]
        assert samples == [500, 707, 1000, 1414]
        flops = [figures[f"{family}_r{r}_mflops"] for r in range(4)]
        assert flops == sorted(flops) and flops[0] < flops[-1]
        assert all(0 < figures[f"{family}_r{r}_test_logloss"] < 1.5 for r in range(4))
        # the law over all rungs and over the CPU span (rungs 0-2 here) are both there
        assert f"{family}_alpha" in figures and f"{family}_cpu_span_alpha" in figures
        assert f"{family}_holdout_rel_err" in figures
    assert figures["skipped"] == "" and figures["bayes_logloss"] > 0


def test_a_rung_that_cannot_fit_in_the_time_left_is_skipped(tmp_path, monkeypatch):
    out = tmp_path / "ladder.json"
    monkeypatch.setattr(scaling_gpu, "OPTIMISTIC_FLOPS", 1.0)  # every rung then needs ages
    monkeypatch.setattr(sys, "argv", [
        "scaling_gpu", "--device", "cpu", "--preset", "tiny", "--families", "dlrm", "--rungs", "2",
        "--samples", "500,1000", "--anchor-rungs", "2", "--num-samples", "2000", "--time-limit", "60",
        "--json", str(out)])
    scaling_gpu.main()
    assert not out.exists()  # nothing trained, nothing claimed
