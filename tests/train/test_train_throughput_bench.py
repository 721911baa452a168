"""benchmarks/train_throughput.py's harness: rounds rotate the order and feed every step the
same batches, and each ratio is the median of the per-round ratios to the reference."""

from __future__ import annotations

import pytest

from benchmarks.train_throughput import ratio_figures, timed_rounds


def test_rounds_rotate_the_order_and_give_every_step_the_same_batches(planted_data):
    batches = [b for b, _ in zip(planted_data.batches("train", 32, shuffle=False), range(4), strict=False)]
    calls: list[tuple[str, int]] = []

    def recorder(name: str):
        def step(batch) -> float:
            calls.append((name, id(batch)))
            return 0.0
        return step

    rates = timed_rounds({n: recorder(n) for n in ("reference", "a", "b")}, batches, rounds=3,
                         steps_per_round=2)
    assert all(len(r) == 3 and min(r) > 0 for r in rates.values())
    per_round = [calls[:15], calls[15:24], calls[24:]]  # 3 warm-up + 2 timed each, then 1 + 2
    firsts = [rnd[0][0] for rnd in per_round]
    assert firsts == ["reference", "a", "b"]  # each round starts one further along
    for rnd in per_round:
        seen = {name: [batch for n, batch in rnd if n == name] for name in ("reference", "a", "b")}
        assert seen["reference"] == seen["a"] == seen["b"]


def test_a_ratio_is_the_median_of_the_rounds_ratios():
    rates = {"reference": [10.0, 20.0, 40.0], "ours": [15.0, 20.0, 100.0]}
    figures = ratio_figures(rates, "ours", "ours_vs_reference")
    assert figures == {"ours_vs_reference": pytest.approx(1.5), "ours_vs_reference_min": pytest.approx(1.0),
                       "ours_vs_reference_max": pytest.approx(2.5)}


def test_the_reference_keeps_torchrecs_own_table_update_and_autorec_switches_its() -> None:
    from autorec.data import load_dataset
    from autorec.presets import preset
    from autorec.train import cpu_lookup
    from autorec.train.trainer import TrainConfig, Trainer
    from benchmarks.train_throughput import reference_step

    data = load_dataset("synthetic", num_samples=2000, seed=0)
    spec = preset("dlrm", data.schema)
    step = reference_step(spec, 1e-3, 0.1)
    tables = cpu_lookup.fused_tables(step.model)
    assert tables and all("forward" not in t.__dict__ for t in tables)  # fbgemm's fused backward
    ours = cpu_lookup.fused_tables(Trainer(spec, data, TrainConfig(progress=False)).model)
    assert ours and all("forward" in t.__dict__ for t in ours)


def test_a_ratio_to_another_base() -> None:
    rates = {"reference": [1.0, 1.0, 1.0], "reference_bf16": [10.0, 20.0, 40.0], "ours": [15.0, 20.0, 100.0]}
    figures = ratio_figures(rates, "ours", "ours_vs_bf16", base="reference_bf16")
    assert figures["ours_vs_bf16"] == pytest.approx(1.5)


def test_the_bf16_reference_runs_its_forward_under_autocast() -> None:
    """The like-for-like reference: torchrec's DLRM with its over-arch's products in bf16, its
    loss from fp32 logits (a finite float back)."""
    import torch

    from autorec.data import load_dataset
    from autorec.presets import preset
    from benchmarks.train_throughput import reference_step

    data = load_dataset("synthetic", num_samples=2000, seed=0)
    spec = preset("dlrm", data.schema)
    seen: list[torch.dtype] = []
    for bf16 in (False, True):
        step = reference_step(spec, 1e-3, 0.1, bf16=bf16)
        over = step.model.module.over_arch
        handle = over.register_forward_hook(lambda m, args, out: seen.append(out.dtype))
        batch = next(iter(data.batches("train", 64, shuffle=False)))
        loss = step(batch)
        handle.remove()
        assert loss == loss and abs(loss) < 100
    assert seen == [torch.float32, torch.bfloat16]
