"""The Wukong layer's kernels (autorec/native/wukong_layer.cpp) against the layer in torch's ops:
values and every gradient, the sizes they take and refuse, autocast, threads."""

from __future__ import annotations

import pytest
import torch

from autorec.arch import WukongConfig
from autorec.blocks.wukong import WukongLayer
from autorec.native import wukong_layer as native
from tests.doctests import assert_examples_run

pytestmark = pytest.mark.skipif(not native.available(), reason="no C++ compiler here")


def _run(layer: WukongLayer, x: torch.Tensor, upstream: torch.Tensor, kernel: bool,
         autocast: bool = False) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    layer.zero_grad()
    leaf = x.clone().requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        if kernel:
            y = layer(leaf)
        else:
            with native.disabled():
                y = layer(leaf)
    (y.float() * upstream).sum().backward()
    grads = {name: p.grad.clone() for name, p in layer.named_parameters() if p.grad is not None}
    grads["x"] = leaf.grad
    return y.detach(), grads


def test_the_example_runs() -> None:
    assert_examples_run("autorec.native.wukong_layer")


@pytest.mark.parametrize(("f", "d", "config"), [
    (27, 16, WukongConfig(n_fm=8, n_lcb=8, rank=8, mlp=(128,))),  # the preset's first layer: projecting
    (16, 16, WukongConfig(n_fm=8, n_lcb=8, rank=8, mlp=(128,))),  # its second: identity residual
    (9, 32, WukongConfig(n_fm=3, n_lcb=0, rank=5, mlp=())),  # no LCB, a projecting residual, no hidden
    (5, 64, WukongConfig(n_fm=2, n_lcb=3, rank=19, mlp=(8, 8))),  # rank past 16, identity
    (7, 48, WukongConfig(n_fm=4, n_lcb=1, rank=3, mlp=(16,))),
])
def test_values_and_every_gradient_are_torchs(f: int, d: int, config: WukongConfig) -> None:
    torch.manual_seed(f + d)
    layer = WukongLayer(config, f, d)
    with torch.no_grad():  # norms away from their defaults, so their gradients mean something
        for norm in (layer.norm, layer.fmb.norm):
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.uniform_(-0.5, 0.5)
    x, upstream = torch.randn(37, f, d), torch.randn(37, layer.num_out, d)
    y, grads = _run(layer, x, upstream, kernel=True)
    ref, ref_grads = _run(layer, x, upstream, kernel=False)
    torch.testing.assert_close(y, ref, rtol=1e-5, atol=1e-5)
    assert grads.keys() == ref_grads.keys()
    for name, grad in grads.items():
        torch.testing.assert_close(grad, ref_grads[name], rtol=1e-4, atol=1e-4, msg=name)
    with torch.no_grad():  # evaluation runs the same kernels
        assert torch.equal(layer(x), y)


def test_the_kernels_run_where_they_apply(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    for name in ("head", "tail"):
        kept = getattr(native, name)

        def spy(*args, _kept=kept, _name=name, **kwargs):
            calls.append(_name)
            return _kept(*args, **kwargs)
        monkeypatch.setattr(native, name, spy)
    config = WukongConfig(n_fm=2, n_lcb=2, rank=2, mlp=(8,))
    WukongLayer(config, 4, 16)(torch.randn(3, 4, 16)).sum().backward()
    assert calls == ["head", "tail"]
    calls.clear()
    WukongLayer(config, 4, 8)(torch.randn(3, 4, 8))  # D not a multiple of 16
    WukongLayer(config, 4, 16).double()(torch.randn(3, 4, 16, dtype=torch.float64))
    with native.disabled():
        WukongLayer(config, 4, 16)(torch.randn(3, 4, 16))
    hook = torch.nn.modules.module.register_module_forward_hook(lambda m, i, o: None)
    try:  # a module-wide hook: every map through its own module, so the hook sees it
        WukongLayer(config, 4, 16)(torch.randn(3, 4, 16))
    finally:
        hook.remove()
    assert calls == []
    assert native.SWITCH.on


def test_under_bf16_autocast_fm_reaches_the_mlp_in_bf16_and_the_layer_trains_like_torchs() -> None:
    """Under autocast the kernels compute in fp32 (torch's path rounds X and the maps' weights
    to bf16 for the products), so the two agree to bf16's precision; the FM's values reach its
    MLP's plain linear in bf16 (which that linear would cast them to) and the layer's output is
    fp32, as on torch's path."""
    torch.manual_seed(0)
    layer = WukongLayer(WukongConfig(n_fm=8, n_lcb=8, rank=8, mlp=(64,)), 27, 16)
    seen: list[torch.dtype] = []
    layer.fmb.mlp.register_forward_pre_hook(lambda m, args: seen.append(args[0].dtype))
    x, upstream = torch.randn(64, 27, 16), torch.randn(64, 16, 16)
    y, grads = _run(layer, x, upstream, kernel=True, autocast=True)
    ref, ref_grads = _run(layer, x, upstream, kernel=False, autocast=True)
    # the kernel hands the MLP bf16; torch's path its norm's fp32, which the MLP's linear casts
    assert seen == [torch.bfloat16, torch.float32] and y.dtype == ref.dtype == torch.float32
    torch.testing.assert_close(y, ref, rtol=0.05, atol=0.05)
    for name, grad in grads.items():
        assert grad.dtype == ref_grads[name].dtype, name
        cosine = torch.nn.functional.cosine_similarity(grad.flatten(), ref_grads[name].flatten(), dim=0)
        assert cosine > 0.99, name


@pytest.mark.parametrize("threads", [1, 3])
def test_the_threads_split_the_samples_and_repeat_bit_for_bit(threads: int) -> None:
    torch.manual_seed(1)
    layer = WukongLayer(WukongConfig(n_fm=4, n_lcb=4, rank=4, mlp=(16,)), 11, 16)
    x, upstream = torch.randn(53, 11, 16), torch.randn(53, 8, 16)
    kept = torch.get_num_threads()
    try:
        torch.set_num_threads(threads)
        first, again = _run(layer, x, upstream, kernel=True), _run(layer, x, upstream, kernel=True)
    finally:
        torch.set_num_threads(kept)
    other = _run(layer, x, upstream, kernel=True)
    assert torch.equal(first[0], again[0]) and torch.equal(first[0], other[0])  # per sample: no sums
    for name, grad in first[1].items():
        assert torch.equal(grad, again[1][name]), name
        torch.testing.assert_close(grad, other[1][name], rtol=1e-4, atol=1e-5, msg=name)  # sums in parts


@pytest.mark.parametrize(("n0", "d", "proj"), [(1, 16, True), (3, 32, False), (9, 16, True)])
def test_x_in_two_parts_is_read_where_it_lies_with_the_same_values_and_gradients(n0: int, d: int,
                                                                                 proj: bool) -> None:
    """X in two parts (the second's samples apart, as a slice of a wider tensor; the first in
    bf16, as the dense arch's output under autocast) gives the values of X concatenated and each
    part its share of the gradient, bit for bit."""
    torch.manual_seed(n0 + d)
    f, k, n_fm, n_lcb = 11, 3, 4, 7
    f_out = n_fm + n_lcb
    wide = torch.randn(29, f - n0 + 2, d)[:, 1:-1]  # rows of a sample together, samples apart
    x0, wcat = torch.randn(29, n0, d).bfloat16(), torch.randn(f, k + n_lcb + (f_out if proj else 0))
    gamma, beta = torch.rand(f * k) + 0.5, torch.randn(f * k)
    dfm, dbase = torch.randn(29, f * k), torch.randn(29, f_out, d)
    runs = []
    for parts in (True, False):
        a0, a1, w = x0.clone().requires_grad_(), wide.clone().requires_grad_(), wcat.clone().requires_grad_()
        x = [a0, a1] if parts else torch.cat([a0, a1], dim=1)  # cat widens x0 to fp32
        fm, base = native.head(x, w, gamma, beta, 1e-5, k=k, n_fm=n_fm, n_lcb=n_lcb)
        torch.autograd.backward([fm, base], [dfm, dbase])
        runs.append((fm, base, a0.grad, a1.grad, w.grad))
    assert runs[0][2].dtype == torch.bfloat16
    for got, expected in zip(runs[0], runs[1], strict=True):
        assert torch.equal(got, expected)


@pytest.mark.parametrize(("low", "proj"), [(False, True), (True, False), (True, True)])
def test_a_tail_and_the_next_head_in_one_pass_give_the_values_and_gradients_of_the_two(low: bool,
                                                                                      proj: bool) -> None:
    """mid(base1, m1) is head(tail(base1, m1)) bit for bit, values and every gradient, with the
    MLP's output and the FM's values in bf16 (autocast's) or fp32."""
    torch.manual_seed(int(low) + 2 * int(proj))
    b, f, d, n_fm1, k, n_fm = 19, 6, 32, 4, 3, 2
    n_lcb = 5 if proj else f - n_fm  # (an identity residual keeps F)
    f_out = n_fm + n_lcb
    dtype = torch.bfloat16 if low else torch.float32
    base1, m1 = torch.randn(b, f, d), torch.randn(b, n_fm1 * d).to(dtype)
    norm1 = (torch.rand(d) + 0.5, torch.randn(d))
    wcat = torch.randn(f, k + n_lcb + (f_out if proj else 0))
    fm_norm = (torch.rand(f * k) + 0.5, torch.randn(f * k))
    dfm, dbase = torch.randn(b, f * k).to(dtype), torch.randn(b, f_out, d)
    runs = []
    for fused in (True, False):
        leaves = [t.clone().requires_grad_() for t in (base1, m1, *norm1, wcat, *fm_norm)]
        a, m, g1, b1, w, g2, b2 = leaves
        if fused:
            fm, base = native.mid(a, m, (g1, b1, 1e-5), w, (g2, b2, 1e-6), k=k, n_fm=n_fm, n_lcb=n_lcb,
                                  fm_dtype=dtype)
        else:
            y = native.tail(a, m, g1, b1, 1e-5)
            fm, base = native.head(y, w, g2, b2, 1e-6, k=k, n_fm=n_fm, n_lcb=n_lcb, fm_dtype=dtype)
        torch.autograd.backward([fm, base], [dfm, dbase])
        runs.append([fm, base, *(leaf.grad for leaf in leaves)])
    assert runs[0][3].dtype == dtype  # m1's gradient in m1's dtype
    for got, expected in zip(runs[0], runs[1], strict=True):
        assert torch.equal(got, expected)


def test_bad_sizes_are_refused_by_name() -> None:
    x, ones = torch.randn(2, 3, 16), torch.ones(6)
    with pytest.raises(ValueError, match=r"x \(2, 3, 16\), maps \(3, 4\): the sizes do not fit together"):
        native.head(x, torch.randn(3, 4), ones, ones, 1e-5, k=2, n_fm=2, n_lcb=1)  # 2 + 1 + 3 != 4
    with pytest.raises(ValueError, match=r"x \(2, 3, 8\), maps \(3, 3\): D must be a multiple of 16"):
        native.head(torch.randn(2, 3, 8), torch.randn(3, 3), ones, ones, 1e-5, k=2, n_fm=2, n_lcb=1)
    with pytest.raises(ValueError, match=r"fm dtype torch\.float16, expected torch\.float32 or torch\.bf"):
        native.head(x, torch.randn(3, 3), ones, ones, 1e-5, k=2, n_fm=2, n_lcb=1, fm_dtype=torch.float16)
    with pytest.raises(ValueError, match=r"X in 3 parts, expected a tensor or two parts"):
        native.head([x, x, x], torch.randn(9, 3), ones, ones, 1e-5, k=2, n_fm=2, n_lcb=1)
    sizes = {"k": 2, "n_fm": 2, "n_lcb": 1}
    with pytest.raises(ValueError, match=r"X's parts \(2, 1, 16\) and \(3, 2, 16\), expected \[B, F0, D\]"):
        native.head([x[:, :1], torch.randn(3, 2, 16)], torch.randn(3, 3), ones, ones, 1e-5, **sizes)
    with pytest.raises(ValueError, match=r"x in parts \(2, 1, 16\) \+ \(2, 2, 16\), maps \(3, 4\): the size"):
        native.head([x[:, :1], x[:, 1:]], torch.randn(3, 4), ones, ones, 1e-5, **sizes)
    with pytest.raises(ValueError, match=r"base \(2, 3, 16\), MLP output \(2, 64\): the sizes do not fit"):
        native.tail(torch.randn(2, 3, 16), torch.randn(2, 64), torch.ones(16), torch.zeros(16), 1e-5)
    with pytest.raises(ValueError, match=r"base \(2, 3, 16\), MLP output \(2, 64\), maps \(3, 3\): the size"):
        native.mid(torch.randn(2, 3, 16), torch.randn(2, 64), (torch.ones(16), torch.zeros(16), 1e-5),
                   torch.randn(3, 3), (ones, ones, 1e-5), **sizes)  # 4 MLP rows for 3 vectors
    with pytest.raises(ValueError, match=r"base \(2, 3, 16\), MLP output \(2, 32\), maps \(3, 4\): the size"):
        native.mid(torch.randn(2, 3, 16), torch.randn(2, 32), (torch.ones(16), torch.zeros(16), 1e-5),
                   torch.randn(3, 4), (ones, ones, 1e-5), **sizes)
    with pytest.raises(ValueError, match=r"output dtype torch\.float16, expected torch\.float32"):
        native.tail(torch.randn(2, 3, 16), torch.randn(2, 32), torch.ones(16), torch.zeros(16), 1e-5,
                    torch.float16)
