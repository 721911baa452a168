"""WukongLayer: FMB and LCB as the Wukong paper defines them."""

from __future__ import annotations

import dataclasses
import re

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from autorec.arch import WukongConfig
from autorec.blocks.mlp import FeatureLinear
from autorec.blocks.wukong import WukongLayer


def _layer(num_in: int, n_fm: int, n_lcb: int, rank: int = 2, mlp: tuple[int, ...] = (6,),
           dim: int = 3) -> WukongLayer:
    torch.manual_seed(0)
    return WukongLayer(WukongConfig(n_fm=n_fm, n_lcb=n_lcb, rank=rank, mlp=mlp), num_in, dim)


def _linears(module: nn.Module) -> list[nn.Linear]:
    return [m for m in module.modules() if isinstance(m, nn.Linear)]


def test_fmb_equals_a_direct_einsum() -> None:
    layer = _layer(num_in=4, n_fm=2, n_lcb=1)
    fmb = layer.fmb
    with torch.no_grad():  # LayerNorm's affine parameters away from 1 and 0, so they count
        fmb.norm.weight.normal_()
        fmb.norm.bias.normal_()
    x = torch.randn(5, 4, 3)
    # The naive FM: all pairwise dots X X^T [B, F, F], projected by Y [F, k].
    fm = torch.einsum("bfd,bgd,gk->bfk", x, x, fmb.proj)
    torch.testing.assert_close(fmb.interactions(x), fm)
    hidden, final = _linears(fmb.mlp)
    h = F.layer_norm(fm.flatten(1), (8,), fmb.norm.weight, fmb.norm.bias)
    h = torch.relu(h @ hidden.weight.T + hidden.bias)
    expected = (h @ final.weight.T + final.bias).view(5, 2, 3)
    torch.testing.assert_close(fmb(x), expected)


def test_layer_equals_the_paper_formula() -> None:
    layer = _layer(num_in=4, n_fm=2, n_lcb=3)
    x = torch.randn(5, 4, 3)
    w_lcb = layer.lcb.linear.weight  # [n_lcb, F_in]
    w_res = layer.residual.linear.weight  # [n_fm + n_lcb, F_in]
    assert w_lcb.shape == (3, 4) and w_res.shape == (5, 4)
    lcb = torch.einsum("lf,bfd->bld", w_lcb, x)
    residual = torch.einsum("of,bfd->bod", w_res, x)
    expected = F.layer_norm(torch.cat((layer.fmb(x), lcb), dim=1) + residual, (3,),
                            layer.norm.weight, layer.norm.bias)
    torch.testing.assert_close(layer(x), expected)


@pytest.mark.parametrize(("num_in", "n_fm", "n_lcb", "projected"),
                         [(5, 3, 2, False), (4, 3, 2, True), (6, 3, 2, True), (3, 3, 0, False)])
def test_residual_projection_exactly_when_sizes_differ(num_in: int, n_fm: int, n_lcb: int,
                                                       projected: bool) -> None:
    layer = _layer(num_in, n_fm, n_lcb)
    assert layer.num_out == n_fm + n_lcb
    assert isinstance(layer.residual, FeatureLinear) == projected
    assert isinstance(layer.residual, nn.Identity) == (not projected)
    residual_params = sum(p.numel() for p in layer.residual.parameters())
    assert residual_params == (num_in * (n_fm + n_lcb) if projected else 0)
    if not projected:
        x = torch.randn(2, num_in, 3)
        fmb_and_lcb = torch.cat([layer.fmb(x)] + ([layer.lcb(x)] if n_lcb else []), dim=1)
        torch.testing.assert_close(layer(x), layer.norm(fmb_and_lcb + x))


def test_no_lcb_means_no_lcb_parameters() -> None:
    layer = _layer(num_in=3, n_fm=4, n_lcb=0)
    assert layer.lcb is None
    assert layer(torch.randn(2, 3, 3)).shape == (2, 4, 3)


def test_output_rows_are_layer_normed_over_d() -> None:
    out = _layer(num_in=4, n_fm=3, n_lcb=2, dim=8)(torch.randn(6, 4, 8))
    torch.testing.assert_close(out.mean(-1), torch.zeros(6, 5), atol=1e-5, rtol=0)
    torch.testing.assert_close(out.var(-1, unbiased=False), torch.ones(6, 5), atol=1e-3, rtol=0)


def test_parameter_count() -> None:
    # Y: 4*2; LN(F*k): 2*8; MLP 8->6 and 6->2*3; LCB 3*4; residual 5*4; LN(D): 2*3.
    layer = _layer(num_in=4, n_fm=2, n_lcb=3)
    expected = 8 + 16 + (8 * 6 + 6) + (6 * 6 + 6) + 12 + 20 + 6
    assert sum(p.numel() for p in layer.parameters()) == expected


@pytest.mark.parametrize(("field", "change"), [("n_fm", {"n_fm": 0}), ("rank", {"rank": 0}),
                                               ("mlp[0]", {"mlp": (0,)})])
def test_bad_config_names_the_field(field: str, change: dict) -> None:
    with pytest.raises(ValueError, match=re.escape(f"wukong.{field}:")):
        WukongLayer(WukongConfig(**change), num_in=3, dim=4)


@pytest.mark.parametrize(("num_in", "n_lcb"), [(5, 2), (5, 0), (4, 1), (4, 0)],
                         ids=["projecting", "projecting-no-lcb", "identity", "identity-no-lcb"])
def test_the_shared_transpose_gives_the_separate_modules_results(num_in: int, n_lcb: int) -> None:
    """The FM projection, the LCB and a projecting residual share one transposed X: the layer's
    output and every gradient are those of its modules applied one by one (the paper's form)."""
    torch.manual_seed(0)
    layer = WukongLayer(WukongConfig(n_fm=4 - n_lcb, n_lcb=n_lcb, rank=3, mlp=(8,)), num_in=num_in, dim=6)
    x = torch.randn(5, num_in, 6, requires_grad=True)
    fused = layer(x)
    assert isinstance(layer.residual, nn.Identity) == (num_in == 4)
    parts = [layer.fmb(x)] + ([layer.lcb(x)] if layer.lcb is not None else [])
    separate = layer.norm(torch.cat(parts, dim=1) + layer.residual(x))
    torch.testing.assert_close(fused, separate)
    upstream = torch.randn_like(fused)
    grads = torch.autograd.grad((fused * upstream).sum(), [x, *layer.parameters()])
    expected = torch.autograd.grad((separate * upstream).sum(), [x, *layer.parameters()])
    for got, want in zip(grads, expected, strict=True):
        torch.testing.assert_close(got, want)


def test_one_product_for_plain_maps_and_each_module_when_hooked() -> None:
    """Plain linears run as one product; a forward hook on one (as the precision probe sets)
    sends the layer back through its modules, so the hook sees the LCB's call, same output."""
    layer = _layer(num_in=5, n_fm=2, n_lcb=2)
    assert layer._plain_maps() == [layer.lcb.linear, layer.residual.linear]
    x = torch.randn(4, 5, 3)
    fused = layer(x)
    seen: list[torch.Size] = []
    handle = layer.lcb.linear.register_forward_hook(lambda m, args, out: seen.append(out.shape))
    try:
        assert layer._plain_maps() == []
        torch.testing.assert_close(layer(x), fused)
    finally:
        handle.remove()
    assert seen == [torch.Size([4, 3, 2])]
    global_handle = nn.modules.module.register_module_forward_hook(lambda m, args, out: None)
    try:
        assert layer._plain_maps() == []
    finally:
        global_handle.remove()


@pytest.mark.parametrize("num_in", [5, 4], ids=["projecting", "identity"])
def test_one_product_under_bf16_autocast_matches_the_modules(num_in: int) -> None:
    """Under CPU bf16 autocast the one-product path (X cast once) gives the per-module path's
    output and gradients within bf16's rounding, and its output dtype."""
    layer = _layer(num_in=num_in, n_fm=2, n_lcb=2, rank=3, mlp=(8,), dim=6)
    x = torch.randn(8, num_in, 6, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        fused = layer(x)
    handle = layer.lcb.linear.register_forward_pre_hook(lambda m, args: None)  # per-module path
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            separate = layer(x)
    finally:
        handle.remove()
    assert fused.dtype == separate.dtype
    torch.testing.assert_close(fused.float(), separate.float(), atol=2e-2, rtol=2e-2)
    got = torch.autograd.grad(fused.float().sum(), [x, layer.fmb.proj])
    want = torch.autograd.grad(separate.float().sum(), [x, layer.fmb.proj])
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, atol=5e-2, rtol=5e-2)



@pytest.mark.parametrize("low", [False, True], ids=["fp32", "bf16-autocast"])
def test_a_model_runs_its_wukong_stack_as_one_with_the_same_training(low: bool, monkeypatch) -> None:
    """A model's stacked Wukong layers run each layer's tail with the next one's head in one
    pass (``native.mid``, twice for three layers) with the logits and every gradient of the
    layers one by one, bit for bit; a hook on a layer (which sees that layer's output) or on the
    stack, or a single layer, runs them one by one."""
    from autorec.arch import ArchSpec, TableSpec
    from autorec.models import build_model
    from autorec.native import wukong_layer as native

    if not native.available():
        pytest.skip("no C++ compiler here")
    calls: list[int] = []
    real = native.mid
    monkeypatch.setattr(native, "mid", lambda *a, **k: calls.append(1) or real(*a, **k))
    torch.manual_seed(0)
    layer = WukongConfig(n_fm=3, n_lcb=2, rank=4, mlp=(16,))
    tables = tuple(TableSpec(name=f"t{i}", features=(f"f{i}",), num_embeddings=9, dim=16) for i in range(4))
    spec = ArchSpec(name="w", dim=16, tables=tables, n_dense=0, layers=(layer,) * 3, over_arch=(8,))
    model = build_model(spec)
    x = torch.randn(23, 4, 16)
    runs = []  # model.head: X0 -> logits, the interaction stack and the over-arch
    for stack in (True, False):
        model.zero_grad()
        leaf = x.clone().requires_grad_()
        context = torch.enable_grad() if stack else native.stack_disabled()
        with context, torch.autocast("cpu", dtype=torch.bfloat16, enabled=low):
            logits = model.head(leaf)
        logits.float().sum().backward()
        runs.append([logits.detach(), leaf.grad] + [p.grad.clone() for p in model.parameters()
                                                      if p.grad is not None])
    assert calls == [1, 1]  # two tail-and-head passes, in the stacked run only
    assert all(torch.equal(a, b) for a, b in zip(runs[0], runs[1], strict=True))
    for hooked in (model.layers[1], model.layers):
        handle = hooked.register_forward_hook(lambda m, i, o: None)
        calls.clear()
        model.head(x)
        handle.remove()
        assert calls == []
    single = build_model(dataclasses.replace(spec, layers=(layer,)))
    calls.clear()
    single.head(x)
    assert calls == []
