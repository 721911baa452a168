"""The compiled pairwise dots: the values and gradients of torch's path, and where they apply."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from autorec.blocks import gram
from autorec.native import pair_dots as native
from tests.doctests import assert_examples_run


def _torch_path(x: torch.Tensor, first: torch.Tensor, second: torch.Tensor, n: int, pad: int,
                upstream: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    leaf = x.clone().requires_grad_()
    with native.disabled():
        out = gram.pair_dots(leaf, first, second, passthrough=n, pad=pad)
    (out * upstream).sum().backward()
    assert leaf.grad is not None
    return out.detach(), leaf.grad


def test_the_example_runs() -> None:
    assert_examples_run("autorec.native.pair_dots")


@pytest.mark.parametrize(("f", "d"), [(27, 16), (5, 4), (17, 8), (40, 24), (64, 64), (3, 1)])
@pytest.mark.parametrize(("n", "pad"), [(0, 0), (1, 1), (2, 0)])
def test_values_and_gradients_are_torchs(f: int, d: int, n: int, pad: int) -> None:
    """Every F and D the kernel's chunks of 16 take (one, two, partial, full), with passthrough
    vectors and a pad."""
    torch.manual_seed(f * 100 + d)
    first, second = torch.triu_indices(f, f, offset=1)
    x = torch.randn(37, f, d)
    upstream = torch.randn(37, n * d + first.numel() + pad)
    leaf = x.clone().requires_grad_()
    out = gram.pair_dots(leaf, first, second, passthrough=n, pad=pad)
    (out * upstream).sum().backward()
    expected, expected_grad = _torch_path(x, first, second, n, pad, upstream)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(leaf.grad, expected_grad, rtol=1e-5, atol=1e-5)
    with torch.no_grad():  # evaluation runs the same kernel
        assert torch.equal(gram.pair_dots(x, first, second, passthrough=n, pad=pad), out)


@pytest.mark.parametrize(("f", "d"), [(27, 16), (17, 20), (40, 64), (1, 4)])
@pytest.mark.parametrize("offset", [0, 1])
def test_torchrecs_order_and_any_other_give_the_same(f: int, d: int, offset: int) -> None:
    """Pairs in torchrec's triu order (with or without the diagonal) take the kernel's runs of a
    row, in either direction; the same pairs in another order take the gather and the fold.
    Both give torch's values and gradients, each dot in its own place."""
    torch.manual_seed(f + d + offset)
    first, second = torch.triu_indices(f, f, offset=offset)
    order = torch.randperm(first.numel())
    x = torch.randn(19, f, d)
    upstream = torch.randn(19, d + first.numel())
    runs = native.forward(x, first, second, 1, 0), native.backward(upstream, x, first, second, 1)
    shuffled = torch.cat((upstream[:, :d], upstream[:, d:][:, order]), 1)
    gathered = (native.forward(x, first[order], second[order], 1, 0),
                native.backward(shuffled, x, first[order], second[order], 1))
    torch.testing.assert_close(gathered[0], torch.cat((runs[0][:, :d], runs[0][:, d:][:, order]), 1))
    torch.testing.assert_close(gathered[1], runs[1], rtol=1e-5, atol=1e-5)
    expected, expected_grad = _torch_path(x, first, second, 1, 0, upstream)
    torch.testing.assert_close(runs[0], expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(runs[1], expected_grad, rtol=1e-5, atol=1e-5)


def test_any_pairs_repeated_reversed_and_diagonal() -> None:
    """The compacted supernet passes any pairs: one below the diagonal, one repeated, one
    diagonal (whose gradient is 2x)."""
    first, second = torch.tensor([2, 0, 3, 0, 1]), torch.tensor([2, 3, 1, 3, 1])
    x = torch.randn(6, 4, 8)
    upstream = torch.randn(6, 5)
    out = native.forward(x, first, second, 0, 0)
    torch.testing.assert_close(out, (x[:, first] * x[:, second]).sum(-1))
    dx = native.backward(upstream, x, first, second, 0)
    reference = x.clone().requires_grad_()
    ((reference[:, first] * reference[:, second]).sum(-1) * upstream).sum().backward()
    torch.testing.assert_close(dx, reference.grad)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_the_threads_split_the_samples_alike(threads: int) -> None:
    """Any thread count gives the same bits; the gradient may be a slice of a wider tensor."""
    first, second = torch.triu_indices(27, 27, offset=1)
    x = torch.randn(301, 27, 16)
    wide = torch.randn(301, 16 + first.numel() + 9)[:, 4:4 + 16 + first.numel()]
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        got = native.forward(x, first, second, 1, 0), native.backward(wide, x, first, second, 1)
    finally:
        torch.set_num_threads(before)
    assert not wide.is_contiguous()
    assert torch.equal(got[0], native.forward(x, first, second, 1, 0))
    assert torch.equal(got[1], native.backward(wide.contiguous(), x, first, second, 1))


def test_a_training_step_runs_the_kernel_where_it_applies(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    for name in ("forward", "backward"):
        monkeypatch.setattr(native, name, _recording(getattr(native, name), name, calls))
    first, second = torch.triu_indices(6, 6, offset=1)
    x = torch.randn(4, 6, 8, requires_grad=True)
    gram.pair_dots(x, first, second).sum().backward()
    assert calls == ["forward", "backward"]
    calls.clear()
    cases = {"float64": x.detach().double().requires_grad_(),
             "disabled": x.detach().clone().requires_grad_()}
    for case, leaf in cases.items():
        if case == "disabled":
            with native.disabled():
                gram.pair_dots(leaf, first, second).sum().backward()
        else:
            gram.pair_dots(leaf, first, second).sum().backward()
    assert calls == []  # float64 and disabled() keep torch's path
    with torch.autocast("cpu", dtype=torch.bfloat16):  # an fp32 x: the kernel, in fp32
        out = gram.pair_dots(x, first, second)
        out.sum().backward()
    assert calls == ["forward", "backward"] and out.dtype == torch.float32
    torch.testing.assert_close(out, gram.pair_dots(x, first, second))
    assert native.eligible(torch.randn(2, 64, 64)) and not native.eligible(torch.randn(2, 65, 8))


def test_bad_pairs_and_gradients_are_refused_by_name() -> None:
    x = torch.randn(2, 3, 4)
    with pytest.raises(ValueError, match=r"a vector index outside \[0, 3\)"):
        native.forward(x, torch.tensor([0, 3]), torch.tensor([1, 1]), 0, 0)
    with pytest.raises(ValueError, match=r"a vector index outside \[0, 3\)"):
        native.backward(torch.randn(2, 3), x, torch.tensor([0, 1, -1]), torch.tensor([1, 2, 2]), 0)
    with pytest.raises(ValueError, match=r"first \(2,\) and second \(1,\)"):
        native.forward(x, torch.tensor([0, 1]), torch.tensor([1]), 0, 0)
    with pytest.raises(ValueError, match=r"gradient \(2, 2\) for 2 samples of 4 \+ 3 outputs"):
        native.backward(torch.randn(2, 2), x, *torch.triu_indices(3, 3, offset=1), 1)


@pytest.mark.parametrize(("f", "d", "offset"), [(27, 16, 1), (17, 20, 0), (5, 3, 1)])
@pytest.mark.parametrize("order", ["triu", "shuffled"])
def test_bf16_output_and_gradient_are_the_fp32_ones_cast(f: int, d: int, offset: int, order: str) -> None:
    """Asked for bf16, the kernel gives its fp32 output rounded as torch's ``.to`` rounds (ties,
    NaN, infinities, the passthrough values and pad included), and its backward on a bf16
    gradient gives what the same gradient widened to fp32 gives, bit for bit."""
    torch.manual_seed(f + d)
    first, second = torch.triu_indices(f, f, offset=offset)
    if order == "shuffled":
        perm = torch.randperm(first.numel())
        first, second = first[perm], second[perm]
    x = torch.randn(23, f, d) * 3
    special = torch.tensor([1 + 2**-8, 1 + 3 * 2**-8, -(1 + 2**-8), float("nan"), float("inf"), -float("inf"),
                            3.0e38, 1e-30, -0.0, 2.0, 1 - 2**-9, 65504.0, 1e-41, 1.00390625, 5.0, 7.0])
    x[0, 0, : min(d, 16)] = special[: min(d, 16)]
    for n, pad in ((0, 0), (1, 3), (2, 1)):
        full = native.forward(x, first, second, n, pad)
        low = native.forward(x, first, second, n, pad, torch.bfloat16)
        assert low.dtype == torch.bfloat16
        torch.testing.assert_close(low, full.to(torch.bfloat16), rtol=0, atol=0, equal_nan=True)
        grad = torch.randn(23, n * d + first.numel() + pad).to(torch.bfloat16)
        torch.testing.assert_close(native.backward(grad, x, first, second, n),
                                   native.backward(grad.float(), x, first, second, n), rtol=0, atol=0,
                                   equal_nan=True)
    expected = r"output dtype torch\.float16, expected torch\.float32 or torch\.bfloat16"
    with pytest.raises(ValueError, match=expected):
        native.forward(x, first, second, 0, 0, torch.float16)


def test_asked_for_bf16_the_dots_train_as_autocast_cast_them() -> None:
    """``pair_dots(..., dtype=bf16)`` gives the kernel's bf16 output, and the gradient that reaches
    x is the one autocast's own cast of the fp32 output gives; torch's path (disabled) casts."""
    first, second = torch.triu_indices(9, 9, offset=1)
    x = torch.randn(16, 9, 8)
    upstream = torch.randn(16, 8 + first.numel() + 2).to(torch.bfloat16)
    grads = []
    for dtype in (torch.bfloat16, None):
        leaf = x.clone().requires_grad_()
        out = gram.pair_dots(leaf, first, second, 1, 2, dtype)
        (out.to(torch.bfloat16) * upstream).sum().backward()
        assert out.dtype == dtype or dtype is None
        grads.append(leaf.grad)
    torch.testing.assert_close(grads[0], grads[1], rtol=0, atol=0)
    with native.disabled():
        assert gram.pair_dots(x, first, second, 1, 2, torch.bfloat16).dtype == torch.bfloat16


def _recording(fn: Any, name: str, calls: list[str]) -> Any:
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        calls.append(name)
        return fn(*args, **kwargs)
    return wrapped


@pytest.mark.parametrize(("f", "d", "n"), [(27, 16, 1), (40, 64, 2), (3, 16, 0)])
def test_two_parts_give_the_concatenations_dots_bit_for_bit(f: int, d: int, n: int) -> None:
    """The dense vector and the pooled embeddings read where they lie (the second part's rows
    apart, as a slice of a wider tensor): the output and each part's gradient are those of the
    concatenated x, in both dtypes."""
    torch.manual_seed(f + d)
    first, second = torch.triu_indices(f, f, offset=1)
    x = torch.randn(37, f, d)
    x0, x1 = x[:, :1].clone(), torch.randn(37, f + 2, d)[:, 2:f + 1]
    x1.copy_(x[:, 1:])
    assert not x1.is_contiguous() and native.parts_eligible(x0, x1)
    pad = -(n * d + first.numel()) % d
    for dtype in (torch.float32, torch.bfloat16):
        out = native.forward_parts(x0, x1, first, second, n, pad, dtype)
        assert torch.equal(out, native.forward(x, first, second, n, pad, dtype))
        grad = torch.randn(out.shape).to(dtype)
        dx0, dx1 = native.backward_parts(grad, x0, x1, first, second, n)
        assert torch.equal(torch.cat([dx0, dx1], 1), native.backward(grad, x, first, second, n))


def test_two_parts_refuse_pairs_out_of_order_and_other_widths() -> None:
    first, second = torch.triu_indices(5, 5, offset=1)
    x0, x1 = torch.randn(4, 1, 16), torch.randn(4, 4, 16)
    with pytest.raises(ValueError, match="the pairs must be in torchrec's order and D a multiple of 16"):
        native.forward_parts(x0, x1, first.flip(0), second.flip(0), 0, 0)
    assert not native.parts_eligible(torch.randn(4, 1, 8), torch.randn(4, 4, 8))
    assert not native.parts_eligible(x0, torch.randn(4, 16, 4).transpose(1, 2))  # vectors not contiguous
    with torch.no_grad():  # outside the kernel's reach, pair_dots_parts concatenates
        got = gram.pair_dots_parts(torch.randn(4, 1, 8), torch.randn(4, 4, 8), first, second)
    assert got.shape == (4, first.numel())
