"""The compiled LayerNorm over short rows: torch's values and gradients, and where it applies."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from autorec.blocks.layout import FloatLayerNorm
from autorec.native import layer_norm as native
from tests.doctests import assert_examples_run


def test_the_example_runs() -> None:
    assert_examples_run("autorec.native.layer_norm")


@pytest.mark.parametrize("shape", [(4096, 16, 16), (37, 5), (3, 7, 40), (11, 64), (2, 1)])
def test_values_and_gradients_are_torchs(shape: tuple[int, ...]) -> None:
    """Rows of one, two, partial and four chunks of 16, off-centre values, any leading shape."""
    torch.manual_seed(sum(shape))
    d = shape[-1]
    x = torch.randn(*shape) * 3 + 1
    weight, bias, upstream = torch.randn(d), torch.randn(d), torch.randn(*shape)
    ours = [t.clone().requires_grad_() for t in (x, weight, bias)]
    theirs = [t.clone().requires_grad_() for t in (x, weight, bias)]
    out = native.layer_norm(*ours, 1e-5)
    want = F.layer_norm(theirs[0], (d,), theirs[1], theirs[2], 1e-5)
    torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)
    (out * upstream).sum().backward()
    (want * upstream).sum().backward()
    for got, expected in zip(ours, theirs, strict=True):  # dx, dweight, dbias
        torch.testing.assert_close(got.grad, expected.grad, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_any_thread_count_gives_the_rows_the_same_bits(threads: int) -> None:
    x, weight, bias = torch.randn(1001, 16), torch.randn(16), torch.randn(16)
    leaf = x.clone().requires_grad_()
    upstream = torch.randn(1001, 16)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        out = native.layer_norm(leaf, weight, bias, 1e-5)
        out.backward(upstream)
    finally:
        torch.set_num_threads(before)
    reference = x.clone().requires_grad_()
    native.layer_norm(reference, weight, bias, 1e-5).backward(upstream)
    assert torch.equal(out, native.layer_norm(x, weight, bias, 1e-5))
    assert torch.equal(leaf.grad, reference.grad)  # the weight's sums are split, the rows not


def test_float_layer_norm_runs_it_where_it_applies(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    kept = native.layer_norm
    monkeypatch.setattr(native, "layer_norm", lambda *a: calls.append(1) or kept(*a))
    norm = FloatLayerNorm(16)
    x = torch.randn(8, 16, requires_grad=True)
    norm(x).sum().backward()
    assert calls == [1] and norm.weight.grad is not None and norm.bias.grad is not None
    cases: dict[str, Any] = {
        "float64": lambda: FloatLayerNorm(16).double()(x.double()),
        "rows of 65": lambda: FloatLayerNorm(65)(torch.randn(3, 65)),
        "no affine": lambda: FloatLayerNorm(16, elementwise_affine=False)(x),
        "two dims": lambda: FloatLayerNorm((4, 4))(x.view(8, 4, 4)),
    }
    for case, run in cases.items():
        run()
        assert calls == [1], case
    with native.disabled():
        norm(x)
    assert calls == [1]  # disabled() keeps torch's


def test_under_autocast_a_bf16_input_is_normalised_in_fp32_on_the_kernel() -> None:
    """FloatLayerNorm's contract under autocast (fp32 out, bf16 input's gradient in bf16) on
    the kernel, with torch's fp32 norm's values and gradients."""
    torch.manual_seed(0)
    norm = FloatLayerNorm(16)
    x = torch.randn(64, 16).bfloat16().requires_grad_()
    upstream = torch.randn(64, 16)
    got = {}
    for way in ("native", "torch"):
        x.grad, norm.weight.grad = None, None
        with torch.autocast("cpu", dtype=torch.bfloat16), (native.disabled() if way == "torch"
                                                           else contextlib.nullcontext()):
            y = norm(x)
        (y * upstream).sum().backward()
        got[way] = (y, x.grad, norm.weight.grad)
    assert got["native"][0].dtype == torch.float32 and got["native"][1].dtype == torch.bfloat16
    torch.testing.assert_close(got["native"][0], got["torch"][0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got["native"][2], got["torch"][2], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got["native"][1], got["torch"][1], rtol=1e-2, atol=1e-2)  # bf16's rounding
    calls: list[int] = []
    kept = native.layer_norm
    try:
        native.layer_norm = lambda *a: calls.append(1) or kept(*a)  # type: ignore[assignment]
        with torch.autocast("cpu", dtype=torch.bfloat16):
            norm(x)
    finally:
        native.layer_norm = kept  # type: ignore[assignment]
    assert calls == [1]


def test_wukong_trains_with_it_as_with_torchs() -> None:
    """A Wukong layer's output and every parameter's gradient, the kernel against torch's."""
    from autorec.arch import WukongConfig
    from autorec.blocks.wukong import WukongLayer
    torch.manual_seed(0)
    layer = WukongLayer(WukongConfig(n_fm=3, n_lcb=2, rank=2, mlp=(16,)), num_in=4, dim=8)
    x = torch.randn(64, 4, 8)
    grads = {}
    for way in ("native", "torch"):
        layer.zero_grad()
        if way == "torch":
            with native.disabled():
                out = layer(x)
        else:
            out = layer(x)
        out.square().sum().backward()
        grads[way] = (out.detach(), {n: p.grad.clone() for n, p in layer.named_parameters()})
    torch.testing.assert_close(grads["native"][0], grads["torch"][0], rtol=1e-5, atol=1e-5)
    for name, grad in grads["native"][1].items():
        torch.testing.assert_close(grad, grads["torch"][1][name], rtol=1e-4, atol=1e-4, msg=name)
