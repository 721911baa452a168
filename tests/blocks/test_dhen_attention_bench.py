"""benchmarks/dhen_attention.py: its "before" arm calls nn.MultiheadAttention and trains the same
model as the default; the module-alone timing gives every key."""

from __future__ import annotations

import torch

from autorec.blocks import dhen
from benchmarks.dhen_attention import INPUTS, Before, alone, in_bf16, module_attention
from tests.ab_trainers import new_and_before


def test_the_module_is_called_only_inside_a_before_step_and_trains_the_same(monkeypatch) -> None:
    new, before, batches = new_and_before(Before, "dhen")
    calls = {"hand": 0}
    written_out = dhen.self_attention

    def counted(mha, x):
        calls["hand"] += 1
        return written_out(mha, x)

    monkeypatch.setattr(dhen, "self_attention", counted)
    for batch in batches:
        ours = new.train_step(batch)
        seen = calls["hand"]
        theirs = before.train_step(batch)
        assert calls["hand"] == seen > 0  # the default writes it out, the before arm does not
        assert abs(ours[0] - theirs[0]) < 1e-5 and ours[1] == theirs[1]
    for (name, a), (_, b) in zip(new.model.named_parameters(), before.model.named_parameters(), strict=True):
        if name.endswith("attention.in_proj_bias"):
            # The key bias adds the same q.b_k to each row of scores, which the softmax takes
            # away: its gradient is zero up to rounding, and Adam scales that rounding up to
            # steps of lr / 10 whose sign differs between the two forms. Query and value
            # biases must agree; the key bias's share of the output is checked to be nil.
            d = a.shape[0] // 3
            a, b = torch.cat([a[:d], a[2 * d:]]), torch.cat([b[:d], b[2 * d:]])
        torch.testing.assert_close(a, b, rtol=1e-4, atol=5e-5, msg=name)
    attention = next(m for m in new.model.modules() if isinstance(m, torch.nn.MultiheadAttention))
    x = torch.randn(4, 5, attention.embed_dim)
    with torch.no_grad():
        out = dhen.self_attention(attention, x)
        attention.in_proj_bias[attention.embed_dim: 2 * attention.embed_dim].add_(1.0)
        torch.testing.assert_close(dhen.self_attention(attention, x), out, rtol=1e-5, atol=1e-5)
    with module_attention():
        assert not dhen.by_hand(torch.nn.MultiheadAttention(8, 2, batch_first=True), torch.randn(2, 3, 8))


def test_the_part_alone_gives_each_input_size_both_ways() -> None:
    figures = alone(1, batch=8)
    for num_in in INPUTS:
        key = f"dhen_attention_alone_f{num_in}"
        assert figures[f"{key}_hand_ms"] > 0 and figures[f"{key}_module_ms"] > 0
        assert figures[f"{key}_speedup"] == figures[f"{key}_module_ms"] / figures[f"{key}_hand_ms"]


def test_the_part_alone_under_bf16_also_times_the_attention_in_bf16() -> None:
    figures = alone(1, "bf16", batch=8)
    torch.manual_seed(0)
    module, x = dhen.AttentionModule(INPUTS[-1], 4, 16, 2), torch.randn(8, INPUTS[-1], 16)
    with torch.autocast("cpu", dtype=torch.bfloat16):  # its attention rounds to bf16; as shipped, not
        assert not torch.equal(in_bf16(module, x).float(), module(x).float())
    torch.testing.assert_close(in_bf16(module, x), module(x))  # without autocast, the same module
    for num_in in INPUTS:
        key = f"dhen_attention_alone_f{num_in}_bf16"
        assert {f"{key}_{way}_ms" for way in ("hand", "module", "hand_bf16")} <= figures.keys()
        slowdown = figures[f"{key}_hand_bf16_ms"] / figures[f"{key}_hand_ms"]
        assert figures[f"{key}_in_bf16_slowdown"] == slowdown
    assert not any(key.startswith("dhen_attention_alone_f27_hand") for key in figures)
