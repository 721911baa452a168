"""The ReLU layers' compiled backward pass: torchrec's values and gradients, and where it applies."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
import torch
from torch import nn

from autorec.blocks.mlp import ReluMLP
from autorec.native import relu_linear as native
from tests.doctests import assert_examples_run


def _run(mlp: nn.Module, x: torch.Tensor, upstream: torch.Tensor, low: bool,
         torchs: bool) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
    """The output, the input's gradient and every parameter's gradient of one pass."""
    mlp.zero_grad()
    leaf = x.detach().clone().requires_grad_()
    with native.disabled() if torchs else contextlib.nullcontext(), \
            torch.autocast("cpu", dtype=torch.bfloat16, enabled=low):
        out = mlp(leaf)
    out.backward(upstream.to(out.dtype))
    assert leaf.grad is not None
    return out.detach(), leaf.grad, [p.grad.clone() for p in mlp.parameters()]


def test_the_example_runs() -> None:
    assert_examples_run("autorec.native.relu_linear")


@pytest.mark.parametrize("sizes", [[32, 16], [256, 128], [64]])
def test_values_and_gradients_are_torchrecs_under_autocast(sizes: list[int]) -> None:
    """The output and every gradient bit for bit (the bias's summed in another order, then
    rounded to bf16 as autocast's sum is, to float rounding in general)."""
    torch.manual_seed(len(sizes) * 7 + sizes[0])
    mlp = ReluMLP(40, sizes)
    x, upstream = torch.randn(301, 40), torch.randn(301, sizes[-1])
    new = _run(mlp, x, upstream, True, torchs=False)
    old = _run(mlp, x, upstream, True, torchs=True)
    assert new[0].dtype == torch.bfloat16
    assert torch.equal(new[0], old[0]) and torch.equal(new[1], old[1])
    for name, got, expected in zip([n for n, _ in mlp.named_parameters()], new[2], old[2], strict=True):
        if name.endswith("weight"):
            assert torch.equal(got, expected), name
        else:
            torch.testing.assert_close(got, expected, rtol=1e-2, atol=1e-3, msg=name)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("width", [16, 48])
def test_the_kernel_masks_and_sums_as_torch(dtype: torch.dtype, width: int) -> None:
    """The kernel alone, in both dtypes it takes: threshold_backward's values bit for bit (NaN
    keeps its gradient, -0.0 and -inf clear it) and their column sums."""
    a = torch.relu(torch.randn(67, width)).to(dtype)
    a[0, :4] = torch.tensor([float("nan"), -0.0, -float("inf"), float("inf")])
    g = torch.randn(67, width).to(dtype)
    dh, db = torch.empty_like(a), torch.empty(width)
    fn = native._fn()
    low = int(dtype == torch.bfloat16)
    assert fn(a.data_ptr(), g.data_ptr(), low, 67, width, dh.data_ptr(), db.data_ptr(), 2) == 0
    expected = torch.ops.aten.threshold_backward(g, a, 0)
    assert torch.equal(dh, expected)
    torch.testing.assert_close(db, expected.float().sum(0), rtol=1e-5, atol=1e-5)
    assert fn(a.data_ptr(), g.data_ptr(), 0, 67, 8, dh.data_ptr(), db.data_ptr(), 2) == -1  # 8 columns


def test_a_non_finite_pre_activation_keeps_torchs_gradient() -> None:
    """A NaN before the ReLU stays NaN after it, and its gradient passes (threshold_backward keeps
    it: NaN <= 0 is false); -inf gives 0 and passes none."""
    layer = nn.Linear(2, 16)
    with torch.no_grad():
        layer.weight.zero_()
        layer.bias.copy_(torch.tensor([float("nan"), -float("inf"), float("inf"), -1.0] + [1.0] * 12))
    mlp = ReluMLP(2, [16])
    mlp._mlp[0]._linear = layer
    x, upstream = torch.zeros(3, 2), torch.ones(3, 16)
    new, old = _run(mlp, x, upstream, True, False), _run(mlp, x, upstream, True, True)
    torch.testing.assert_close(new[0], old[0], equal_nan=True)
    torch.testing.assert_close(new[2][1], old[2][1], equal_nan=True)  # the bias's gradient
    assert new[2][1][:4].tolist() == [3.0, 0.0, 3.0, 0.0]


def test_it_applies_only_where_the_kernel_can_stand_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under bf16 autocast only (fp32 keeps torch's bits), and there widths past a multiple of
    16, a hook on a layer, another activation or another linear keep torchrec's layers; a hooked
    layer's hook sees every call."""
    calls: list[int] = []
    real = native.relu_linear
    monkeypatch.setattr(native, "relu_linear", lambda x, linear: calls.append(1) or real(x, linear))
    x = torch.randn(8, 12)
    ReluMLP(12, [32, 16])(x)  # fp32
    assert calls == []
    autocast = torch.autocast("cpu", dtype=torch.bfloat16)
    with autocast:
        assert ReluMLP(12, [32, 16])(x).dtype == torch.bfloat16
    assert len(calls) == 2
    calls.clear()
    other = ReluMLP(12, [16])
    other._mlp[0]._activation_fn = torch.sigmoid
    seen: list[Any] = []
    hooked = ReluMLP(12, [16])
    hooked._mlp[0]._linear.register_forward_hook(lambda *args: seen.append(args))
    with autocast:
        ReluMLP(12, [32, 20])(x)  # 20 outputs
        other(x)
        hooked(x)
        with native.disabled():
            ReluMLP(12, [16])(x)
    assert calls == [] and len(seen) == 1


def test_a_bad_width_or_input_is_refused_by_name() -> None:
    """Called past :func:`fusable`, a width that is not a multiple of 16 fails in the backward,
    naming it, before anything is written; an input outside bf16 autocast fails at once."""
    layer = nn.Linear(4, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = native.relu_linear(torch.randn(3, 4), layer)
    with pytest.raises(ValueError, match="relu layer: 8 outputs, expected a multiple of 16"):
        out.float().sum().backward()
    with pytest.raises(ValueError, match=r"relu layer: x torch\.float32 on cpu, expected fp32 or bf16 on "):
        native.relu_linear(torch.randn(3, 4), nn.Linear(4, 16))


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_a_thread_count_repeats_its_bits(threads: int) -> None:
    torch.manual_seed(threads)
    mlp, x, upstream = ReluMLP(24, [48]), torch.randn(97, 24), torch.randn(97, 48)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        first, second = _run(mlp, x, upstream, True, False), _run(mlp, x, upstream, True, False)
    finally:
        torch.set_num_threads(before)
    assert all(torch.equal(a, b) for a, b in zip(first[2], second[2], strict=True))


def test_a_training_step_runs_it_for_the_presets_mlps(monkeypatch: pytest.MonkeyPatch) -> None:
    """The dense arch, the over-arch and Wukong's FM MLP are ReluMLPs: a DLRM and a Wukong
    forward and backward go through the kernel for each of their ReLU layers."""
    from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

    from autorec.data import Schema, SparseFeature
    from autorec.models import build_model
    from autorec.presets import preset

    calls: list[int] = []
    real = native.relu_linear
    monkeypatch.setattr(native, "relu_linear", lambda x, linear: calls.append(1) or real(x, linear))
    schema = Schema(dense=("d0", "d1", "d2"), sparse=(SparseFeature("u", 10), SparseFeature("i", 12)))
    sparse = KeyedJaggedTensor.from_lengths_sync(["u", "i"], torch.tensor([1, 2, 3, 4]), torch.ones(4).long())
    for name, layers in (("dlrm", 2 + 2), ("wukong", 2 + 2 + 2)):  # dense arch, over-arch, FM MLPs
        calls.clear()
        model = build_model(preset(name, schema))
        assert isinstance(model.over_arch[0], ReluMLP)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            model(torch.randn(2, 3), sparse).float().sum().backward()
        assert len(calls) == layers, name
