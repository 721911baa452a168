"""pair_dots: the values and gradients of the indexing form, in every mode it takes."""

from __future__ import annotations

import pytest
import torch

from autorec.blocks.gram import pair_dots
from autorec.native import pair_dots as native_dots


def _indexing(x: torch.Tensor, first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
    return torch.bmm(x, x.transpose(1, 2))[:, first, second]


@pytest.mark.parametrize("offset", [0, 1], ids=["with-diagonal", "strict"])
def test_values_and_gradients_match_the_indexing_form(offset: int) -> None:
    torch.manual_seed(0)
    first, second = torch.triu_indices(7, 7, offset=offset)
    x = torch.randn(5, 7, 3, dtype=torch.float64)
    upstream = torch.randn(5, first.numel(), dtype=torch.float64)
    ours, theirs = x.clone().requires_grad_(), x.clone().requires_grad_()
    out = pair_dots(ours, first, second)
    torch.testing.assert_close(out, _indexing(theirs, first, second))
    (out * upstream).sum().backward()
    (_indexing(theirs, first, second) * upstream).sum().backward()
    torch.testing.assert_close(ours.grad, theirs.grad)


def test_gradcheck_on_any_pairs_repeats_and_reversed_included() -> None:
    """A subset of pairs in any order, one repeated and one below the diagonal (the compacted
    supernet passes live vectors' pairs)."""
    first, second = torch.tensor([2, 0, 3, 0, 1]), torch.tensor([2, 3, 1, 3, 1])
    x = torch.randn(3, 4, 2, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: pair_dots(t, first, second), (x,))


def test_a_non_contiguous_input_and_no_grad_give_the_same_values() -> None:
    first, second = torch.triu_indices(6, 6, offset=1)
    x = torch.randn(4, 3, 6).transpose(1, 2)  # [4, 6, 3], not contiguous
    with torch.no_grad():
        plain = pair_dots(x, first, second)
    leaf = x.detach().requires_grad_()
    torch.testing.assert_close(pair_dots(leaf, first, second), plain)
    pair_dots(leaf, first, second).sum().backward()
    assert leaf.grad is not None and leaf.grad.shape == (4, 6, 3)


def test_under_bf16_autocast_the_gradient_keeps_the_input_dtype() -> None:
    first, second = torch.triu_indices(5, 5, offset=1)
    x = torch.randn(2, 5, 4, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = pair_dots(x, first, second)
    out.float().sum().backward()
    assert x.grad is not None and x.grad.dtype == torch.float32
    reference = x.detach().clone().requires_grad_()
    _indexing(reference, first, second).sum().backward()
    torch.testing.assert_close(x.grad, reference.grad, atol=0.05, rtol=0.02)


def test_under_bf16_autocast_both_products_run_in_bf16_and_the_dots_keep_the_input_dtype() -> None:
    """torch's path (the kernel off; on, an fp32 x's dots are fp32's, tests/native): the forward
    and the backward's products take bf16 inputs (the backward's, which autograd would run in
    fp32, too); train and eval give the same dots, in fp32."""
    torch.manual_seed(0)
    first, second = torch.triu_indices(6, 6, offset=1)
    x, upstream = torch.randn(3, 6, 8, requires_grad=True), torch.randn(3, first.numel())
    with torch.autocast("cpu", dtype=torch.bfloat16), native_dots.disabled():
        out = pair_dots(x, first, second)
        with torch.no_grad():
            plain = pair_dots(x, first, second)
    assert out.dtype == plain.dtype == torch.float32
    low = x.detach().bfloat16()
    expected = torch.bmm(low, low.transpose(1, 2)).float()[:, first, second]
    torch.testing.assert_close(out, expected, atol=0, rtol=0)
    torch.testing.assert_close(plain, expected, atol=0, rtol=0)
    (out * upstream).sum().backward()
    sym = torch.zeros(3, 6, 6)
    sym[:, first, second] += upstream
    sym[:, second, first] += upstream
    torch.testing.assert_close(x.grad, torch.bmm(sym.bfloat16(), low).float(), atol=0, rtol=0)
    assert native_dots.SWITCH.on


def test_compiled_it_keeps_its_backward_and_exported_it_traces_the_plain_form() -> None:
    first, second = torch.triu_indices(4, 4, offset=1)
    x = torch.randn(2, 4, 3, requires_grad=True)
    upstream = torch.randn(2, first.numel())
    compiled = torch.compile(lambda t: pair_dots(t, first, second), backend="eager")
    out = compiled(x)
    torch.testing.assert_close(out, _indexing(x.detach(), first, second))
    assert out.grad_fn is not None and "_PairDots" in type(out.grad_fn).__name__  # the graph break
    (out * upstream).sum().backward()
    reference = x.detach().clone().requires_grad_()
    (_indexing(reference, first, second) * upstream).sum().backward()
    torch.testing.assert_close(x.grad, reference.grad)

    class Dots(torch.nn.Module):
        def forward(self, t: torch.Tensor) -> torch.Tensor:
            return pair_dots(t, first, second)

    program = torch.export.export(Dots(), (x.detach().requires_grad_(),))
    targets = {str(node.target) for node in program.graph.nodes if node.op == "call_function"}
    assert any("bmm" in t for t in targets)
    assert not any("PairDots" in t or "higher_order" in t for t in targets)


def _laid_out_plainly(x: torch.Tensor, first: torch.Tensor, second: torch.Tensor, n: int,
                      pad: int) -> torch.Tensor:
    """DLRM's layout as autograd builds it from plain ops: slice, cat, pad."""
    flat = torch.cat((x[:, :n].flatten(1), _indexing(x, first, second)), dim=1)
    return torch.nn.functional.pad(flat, (0, pad))


@pytest.mark.parametrize(("n", "pad"), [(1, 0), (2, 3), (0, 2), (7, 1)])
def test_passthrough_and_pad_match_the_plain_layout_in_values_and_gradients(n: int, pad: int) -> None:
    """The passthrough vectors' gradient is added into the product's in place; every vector
    passed through (n = F) and none (n = 0) too."""
    torch.manual_seed(1)
    first, second = torch.triu_indices(7, 7, offset=1)
    x = torch.randn(5, 7, 3, dtype=torch.float64)
    ours, theirs = x.clone().requires_grad_(), x.clone().requires_grad_()
    out = pair_dots(ours, first, second, passthrough=n, pad=pad)
    expected = _laid_out_plainly(theirs, first, second, n, pad)
    assert out.shape == (5, n * 3 + first.numel() + pad)
    torch.testing.assert_close(out, expected)
    upstream = torch.randn_like(expected)
    (out * upstream).sum().backward()
    (expected * upstream).sum().backward()
    torch.testing.assert_close(ours.grad, theirs.grad)
    with torch.no_grad():
        torch.testing.assert_close(pair_dots(x, first, second, passthrough=n, pad=pad), expected.detach())
    small = x[:2].clone().requires_grad_()
    assert torch.autograd.gradcheck(lambda t: pair_dots(t, first, second, n, pad), (small,))


def test_passthrough_under_bf16_autocast_keeps_fp32_vectors_and_gradient() -> None:
    """The passthrough values and their gradient stay in x's dtype, exactly; the dots are bf16
    products as without passthrough."""
    torch.manual_seed(2)
    first, second = torch.triu_indices(6, 6, offset=1)
    x = torch.randn(3, 6, 8, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = pair_dots(x, first, second, passthrough=1, pad=5)
        dots = pair_dots(x.detach().requires_grad_(), first, second)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out[:, :8], x.detach()[:, 0], atol=0, rtol=0)
    torch.testing.assert_close(out[:, 8:-5], dots.detach(), atol=0, rtol=0)
    assert not out[:, -5:].any()
    upstream = torch.randn_like(out)
    upstream[:, 8:] = 0  # only the passthrough's gradient
    (out * upstream).sum().backward()
    assert x.grad is not None
    torch.testing.assert_close(x.grad[:, 0], upstream[:, :8], atol=0, rtol=0)
    assert not x.grad[:, 1:].any()


@pytest.mark.parametrize("autocast", [False, True], ids=["fp32", "bf16-autocast"])
def test_blocks_of_the_batch_give_the_whole_batchs_values_and_gradients_bit_for_bit(
        monkeypatch: pytest.MonkeyPatch, autocast: bool) -> None:
    """7 samples in blocks of 3 (the last one short), with passthrough vectors and a pad; on
    torch's path (the compiled kernel has no blocks; ``tests/native/test_pair_dots.py``)."""
    from autorec.blocks import gram
    from autorec.native import pair_dots as native
    monkeypatch.setattr(native.SWITCH, "on", False)
    torch.manual_seed(0)
    first, second = torch.triu_indices(5, 5, offset=1)
    x, upstream = torch.randn(7, 5, 4), torch.randn(7, 2 * 4 + first.numel() + 2)
    got = {}
    for block in (3, 1024):
        monkeypatch.setattr(gram, "BLOCK", block)
        leaf = x.clone().requires_grad_()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            out = pair_dots(leaf, first, second, passthrough=2, pad=2)
        (out * upstream).sum().backward()
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            evaluated = pair_dots(x, first, second, passthrough=2, pad=2)  # evaluation's path
        got[block] = (out, leaf.grad, evaluated)
    assert torch.equal(got[3][0], got[1024][0]) and torch.equal(got[3][1], got[1024][1])
    assert torch.equal(got[3][2], got[3][0]) and torch.equal(got[1024][2], got[3][0])
    assert torch.equal(got[3][0][:, -2:], torch.zeros(7, 2))  # the pad is zeros
    assert torch.equal(got[3][0][:, :8], x[:, :2].flatten(1))  # the passthrough vectors lead
