"""benchmarks/fused_tables.py and its rounds (benchmarks/step_ab.py) on a tiny workload."""

from __future__ import annotations

import pytest

from autorec.data import load_dataset
from autorec.train import embedding_optim as emb_optim
from benchmarks.fused_tables import VARIANTS, measure, replicated, trainer
from benchmarks.step_ab import WARMUP, alternating_rounds, paired_speedup, preset_trainer


@pytest.fixture(scope="module")
def tiny():
    return load_dataset("synthetic", preset="tiny", num_samples=2000)


def test_the_benchmark_times_both_placements_and_puts_the_default_back(tiny):
    fusable = emb_optim.fusable_alone
    got = measure("dlrm", tiny, batch_size=64, rounds=2, steps=2)
    for variant in VARIANTS:
        assert got[f"fused_tables_dlrm_{variant}_step_ms"] > 0
    assert got["fused_tables_dlrm_speedup"] > 0
    assert got["fused_tables_dlrm_replicated"] > 0  # tiny's small tables: the planner replicates them
    assert emb_optim.fusable_alone is fusable
    assert replicated(trainer("dlrm", tiny, 64, "fused")) == 0


def test_rounds_rotate_the_order_and_each_round_takes_new_batches_for_every_run(tiny):
    runs = {name: preset_trainer("dlrm", tiny, 64) for name in ("a", "b", "c")}
    seen: list[tuple[str, int]] = []
    for name, run in runs.items():
        step = run.train_step

        def record(batch, name=name, step=step):
            seen.append((name, int(batch.labels.sum())))
            return step(batch)
        run.train_step = record
    times = alternating_rounds(runs, rounds=3, steps=2)
    assert {k: len(v) for k, v in times.items()} == {"a": 3, "b": 3, "c": 3}
    timed = seen[WARMUP * 3:]
    firsts = [timed[i][0] for i in range(0, len(timed), 2)]  # the run of each block of 2 steps
    assert firsts == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]
    batches = {name: [s for n, s in timed if n == name] for name in runs}
    assert batches["a"] == batches["b"] == batches["c"]
    warmup = [s for n, s in seen[:WARMUP * 3] if n == "a"]
    every = list(runs["a"]._batches("train", 64, True, 0))[:WARMUP + 6]
    assert warmup + batches["a"] == [int(b.labels.sum()) for b in every]
    assert paired_speedup([2.0, 3.0, 9.0], [1.0, 1.0, 1.0]) == 3.0


def test_too_few_batches_is_a_clear_error(tiny):
    runs = {"a": preset_trainer("dlrm", tiny, 64)}
    with pytest.raises(ValueError, match=r"alternating_rounds: 1002 batches needed "
                                         r"\(1 rounds x 1000 steps \+ 2 warm-up\), the data holds \d+"):
        alternating_rounds(runs, rounds=1, steps=1000)
