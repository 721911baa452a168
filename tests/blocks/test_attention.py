"""self_attention: nn.MultiheadAttention's values and gradients, and when it stands in for it."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from autorec.blocks import attention
from autorec.blocks.attention import by_hand, self_attention
from autorec.blocks.dhen import AttentionModule
from autorec.precision.layers import quantise_module_


def _pair(embed: int, heads: int) -> tuple[nn.MultiheadAttention, nn.MultiheadAttention]:
    torch.manual_seed(0)
    ours = nn.MultiheadAttention(embed, heads, batch_first=True).double()
    with torch.no_grad():  # biases off zero, so their gradients are checked too
        ours.in_proj_bias.normal_()
        ours.out_proj.bias.normal_()
    theirs = nn.MultiheadAttention(embed, heads, batch_first=True).double()
    theirs.load_state_dict(ours.state_dict())
    return ours, theirs


@pytest.mark.parametrize("lanes", [16, 1], ids=["short-rows-padded", "unpadded"])
@pytest.mark.parametrize(("length", "heads"), [(3, 2), (12, 2), (16, 4), (27, 2), (27, 1)])
def test_values_and_gradients_match_the_module(monkeypatch, lanes: int, length: int, heads: int) -> None:
    """Both softmax forms whatever this CPU's width: rows shorter than ``lanes`` are padded."""
    monkeypatch.setattr(attention, "softmax_lanes", lambda: lanes)
    ours, theirs = _pair(16, heads)
    x = torch.randn(5, length, 16, dtype=torch.float64)
    a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
    upstream = torch.randn(5, length, 16, dtype=torch.float64)
    out = self_attention(ours, a)
    torch.testing.assert_close(out, theirs(b, b, b, need_weights=False)[0])
    (out * upstream).sum().backward()
    (theirs(b, b, b, need_weights=False)[0] * upstream).sum().backward()
    torch.testing.assert_close(a.grad, b.grad)
    for (name, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, msg=name)


def test_gradcheck_with_padded_rows(monkeypatch) -> None:
    monkeypatch.setattr(attention, "softmax_lanes", lambda: 8)
    ours, _ = _pair(4, 2)
    x = torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: self_attention(ours, t), (x,))


def test_only_a_plain_module_without_hooks_is_written_out() -> None:
    x = torch.randn(2, 5, 8)
    mha = nn.MultiheadAttention(8, 2, batch_first=True)
    assert by_hand(mha, x)
    assert not by_hand(nn.MultiheadAttention(8, 2), x)  # sequence-first
    assert not by_hand(nn.MultiheadAttention(8, 2, batch_first=True, add_bias_kv=True), x)
    dropped = nn.MultiheadAttention(8, 2, batch_first=True, dropout=0.1)
    assert not by_hand(dropped, x) and by_hand(dropped.eval(), x)
    handle = mha.register_forward_hook(lambda *args: None)  # a probe must see the call
    assert not by_hand(mha, x)
    handle.remove()
    handle = nn.modules.module.register_module_forward_hook(lambda *args: None)
    try:
        assert not by_hand(mha, x)
    finally:
        handle.remove()
    quantised = nn.MultiheadAttention(8, 2, batch_first=True)
    quantise_module_(quantised, "mxfp8_e4m3")  # its own forward quantises the projections
    assert not by_hand(quantised, x)


def test_the_dhen_module_uses_it_and_keeps_its_values_under_autocast() -> None:
    torch.manual_seed(0)
    module = AttentionModule(num_in=6, num_out=3, dim=8, num_heads=2)
    x = torch.randn(4, 6, 8)
    expected = module.project(module.attention(x, x, x, need_weights=False)[0])
    torch.testing.assert_close(module(x), expected)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = module(x)
    assert out.dtype == torch.bfloat16  # the attention in fp32, the projection under autocast
    torch.testing.assert_close(out.float(), expected, rtol=3e-2, atol=3e-2)
