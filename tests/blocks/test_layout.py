"""FloatLayerNorm and transposed: the blocks' CPU-minded pieces (autorec/blocks/layout.py)."""

from __future__ import annotations

import contextlib

import pytest
import torch
from torch import nn

from autorec.arch import DhenConfig, WukongConfig
from autorec.blocks.dhen import DhenLayer
from autorec.blocks.layout import FloatLayerNorm, transposed
from autorec.blocks.wukong import WukongLayer
from autorec.native import layer_norm as native_norm


def _norm(width: int = 6) -> FloatLayerNorm:
    torch.manual_seed(0)
    norm = FloatLayerNorm(width)
    with torch.no_grad():  # affine parameters away from 1 and 0, so they count
        norm.weight.uniform_(0.5, 1.5)
        norm.bias.uniform_(-0.5, 0.5)
    return norm


def test_float_norm_is_layer_norm_outside_autocast() -> None:
    norm = _norm()
    plain = nn.LayerNorm(6)
    plain.load_state_dict(norm.state_dict())  # the same keys: checkpoints load either way
    x = torch.randn(4, 3, 6, requires_grad=True)
    torch.testing.assert_close(norm(x), plain(x))  # fp32 on the CPU: autorec.native's kernel
    with native_norm.disabled():
        assert torch.equal(norm(x), plain(x))
    assert norm(x.bfloat16()).dtype == torch.bfloat16  # no autocast: the input's dtype, as LayerNorm


@pytest.mark.parametrize("kernel", ["native", "torch"])
def test_float_norm_runs_in_fp32_under_autocast(kernel: str) -> None:
    """A bf16 input under CPU autocast is normalised in fp32: the fp32 norm of the same values,
    and its gradients are fp32 LayerNorm's (bit for bit on torch's path, to float rounding on
    the compiled kernel)."""
    exact = {"atol": 0, "rtol": 0} if kernel == "torch" else {"atol": 1e-6, "rtol": 1e-5}
    norm = _norm()
    x = torch.randn(4, 3, 6).bfloat16().requires_grad_()
    with contextlib.ExitStack() as stack:
        if kernel == "torch":
            stack.enter_context(native_norm.disabled())
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = norm(x)
        want = nn.functional.layer_norm(x.float(), (6,), norm.weight, norm.bias)
        assert out.dtype == torch.float32
        torch.testing.assert_close(out, want, **exact)
        upstream = torch.randn(4, 3, 6)
        got = torch.autograd.grad(out, [norm.weight], upstream)[0]
        torch.testing.assert_close(got, torch.autograd.grad(want, [norm.weight], upstream)[0])
        with torch.autocast("cpu", dtype=torch.bfloat16):  # an fp32 input under autocast: as LayerNorm
            torch.testing.assert_close(norm(x.float()), want, **exact)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_transposed_is_the_transpose_and_its_gradient(dtype: torch.dtype) -> None:
    x = torch.randn(3, 5, 4, dtype=dtype, requires_grad=True)
    xt = transposed(x)
    assert xt.shape == (3, 4, 5) and xt.is_contiguous() and torch.equal(xt, x.transpose(1, 2))
    upstream = torch.randn(3, 4, 5, dtype=dtype)
    seen: list[torch.Tensor] = []
    x.register_hook(lambda grad: seen.append(grad))
    (grad,) = torch.autograd.grad(xt, [x], upstream)
    assert torch.equal(grad, upstream.transpose(1, 2))
    # bf16's gradient comes back contiguous (its strided add is slow), fp32's as the view
    assert seen[0].is_contiguous() == (dtype != torch.float32)


def test_wukong_and_dhen_norms_are_float_norms() -> None:
    wukong = WukongLayer(WukongConfig(n_fm=2, n_lcb=2, rank=2, mlp=(8,)), num_in=3, dim=4)
    dhen = DhenLayer(DhenConfig(modules=("dot", "linear"), n_out=2), num_in=3, dim=4)
    assert isinstance(wukong.norm, FloatLayerNorm) and isinstance(wukong.fmb.norm, FloatLayerNorm)
    assert isinstance(dhen.norm, FloatLayerNorm)


@pytest.mark.parametrize("num_in", [5, 4], ids=["projecting", "identity"])
def test_wukong_takes_its_x_transposed_through_transposed(num_in: int,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Both of the layer's paths take X^T through ``transposed`` (the bf16 X under autocast, once),
    so X's second gradient comes back contiguous; the output is the fp32 norm's."""
    import autorec.blocks.wukong as wukong_module

    seen: list[torch.dtype] = []

    def spy(x: torch.Tensor) -> torch.Tensor:
        seen.append(x.dtype)
        return transposed(x)

    monkeypatch.setattr(wukong_module, "transposed", spy)
    torch.manual_seed(0)
    layer = WukongLayer(WukongConfig(n_fm=2, n_lcb=2, rank=2, mlp=(8,)), num_in=num_in, dim=4)
    x = torch.randn(6, num_in, 4, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = layer(x)
    assert seen == [torch.bfloat16] and out.dtype == torch.float32
    handle = layer.lcb.linear.register_forward_pre_hook(lambda m, args: None)  # the per-module path
    try:
        layer(x).sum().backward()
    finally:
        handle.remove()
    assert seen == [torch.bfloat16, torch.float32] and x.grad is not None
