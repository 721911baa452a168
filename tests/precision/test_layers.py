"""Quantised layers: the straight-through products, the module swap, and build_model's use."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch
from torch import nn
from torchrec.modules.crossnet import CrossNet, LowRankCrossNet
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from autorec.arch import PRECISIONS, ArchSpec, TableSpec
from autorec.blocks import build_block
from autorec.costs import arch_cost
from autorec.models import build_model
from autorec.native import layer_norm as native_norm
from autorec.native import pair_dots as native_dots
from autorec.precision.layers import (
    QUANTISED,
    AtPrecision,
    QuantLinear,
    dense_parts,
    quant_linear,
    quantise_module_,
)
from autorec.precision.native import REFUSED, native_linear, scaled_mm_supported
from autorec.precision.recipes import RECIPES, recipe, with_precision
from tests.blocks.test_conformance import CASES


def _seeded(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def test_every_layer_precision_has_a_recipe() -> None:
    assert set(RECIPES) == set(PRECISIONS)
    assert recipe("mxfp4_e2m1").gradient == "mxfp8_e5m2"
    with pytest.raises(ValueError, match="unknown precision 'fp7'"):
        recipe("fp7")


@pytest.mark.parametrize("precision", PRECISIONS)
def test_quant_linear_forward_and_backward_are_the_recipe_products(precision: str) -> None:
    rec = recipe(precision)
    qw, qa, qg = rec.quantisers
    x = _seeded(6, 40, seed=0).requires_grad_()
    w = _seeded(24, 40, seed=1).requires_grad_()
    b = _seeded(24, seed=2).requires_grad_()
    gy = _seeded(6, 24, seed=3)
    out = quant_linear(x, w, b, precision)
    out.backward(gy)
    with torch.no_grad():
        torch.testing.assert_close(out, qa.quantise(x) @ qw.quantise(w).T + b, rtol=0, atol=0)
        # Straight through: each backward product takes its operands in the recipe's formats,
        # scaled along that product's own reduction axis.
        torch.testing.assert_close(x.grad, qg.quantise(gy, axis=1) @ qw.quantise(w, axis=0), rtol=0, atol=0)
        torch.testing.assert_close(w.grad, qg.quantise(gy, axis=0).T @ qa.quantise(x, axis=0), rtol=0, atol=0)
        torch.testing.assert_close(b.grad, gy.sum(0))
    if precision == "fp32":
        reference = torch.nn.functional.linear(x, w, b)
        assert torch.equal(out, reference)
    else:
        assert not torch.equal(x.grad, gy @ w.detach())  # the gradient is quantised too


def test_quant_linear_keeps_leading_dims() -> None:
    x = _seeded(2, 3, 32, seed=0)
    w = _seeded(5, 32, seed=1)
    out = quant_linear(x, w, None, "mxfp8_e4m3")
    assert out.shape == (2, 3, 5)
    torch.testing.assert_close(out[1], quant_linear(x[1], w, None, "mxfp8_e4m3"))


def _plain_modules() -> list[nn.Module]:
    torch.manual_seed(0)
    return [nn.Linear(16, 8), nn.Conv1d(4, 3, 3, padding=1), CrossNet(in_features=16, num_layers=2),
            LowRankCrossNet(in_features=16, num_layers=2, low_rank=3),
            nn.MultiheadAttention(16, 2, batch_first=True)]


def _call(module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    if isinstance(module, nn.MultiheadAttention):
        return module(x, x, x, need_weights=False)[0]
    return module(x)


def _input(module: nn.Module) -> torch.Tensor:
    if isinstance(module, nn.Conv1d):
        return _seeded(5, 4, 8, seed=9)
    if isinstance(module, nn.MultiheadAttention):
        return _seeded(5, 6, 16, seed=9)
    return _seeded(5, 16, seed=9)


@pytest.mark.parametrize("index", range(5))
def test_quantised_classes_reproduce_the_plain_ones_at_fp32(index: int) -> None:
    module = _plain_modules()[index]
    module.eval()
    x = _input(module)
    expected = _call(module, x)
    module.__class__ = QUANTISED[type(module)]
    module.precision = "fp32"  # the quantised forward with the identity recipe
    torch.testing.assert_close(_call(module, x), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("index", range(5))
def test_swap_quantises_trains_and_keeps_parameter_names(index: int) -> None:
    module = _plain_modules()[index]
    x = _input(module)
    names = sorted(module.state_dict())
    expected = _call(module, x).detach()
    assert quantise_module_(module, "mxfp4_e2m1") == 1
    assert type(module) is QUANTISED[type(module).__mro__[1]]
    out = _call(module, x)
    assert not torch.equal(out, expected)
    assert ((out - expected).norm() / expected.norm()).item() < 0.5
    out.square().sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in module.parameters())
    assert sorted(module.state_dict()) == names
    quantise_module_(module, "fp32")
    torch.testing.assert_close(_call(module, x), expected)


def test_unknown_precision_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown precision 'mxfp3'"):
        quantise_module_(nn.Linear(2, 2), "mxfp3")


@pytest.mark.parametrize("case", list(CASES))
def test_every_block_kind_trains_in_mxfp8(case: str) -> None:
    config = dataclasses.replace(CASES[case], precision="mxfp8_e4m3")
    spec = ArchSpec(dim=8, n_dense=2, dense_arch=(16,), over_arch=(16,), layers=(config,),
                    tables=(TableSpec(name="t", features=("a", "b", "c"), num_embeddings=20, dim=8),),
                    dense_arch_precision="mxfp8_e4m3", over_arch_precision="mxfp8_e4m3")
    torch.manual_seed(0)
    model = build_model(spec)
    parts = dense_parts(model)
    assert set(parts) == {"dense_arch", "layers.0", "over_arch"}
    dense_in_layer = [m for m in parts["layers.0"][0].modules() if type(m) in QUANTISED]
    assert not dense_in_layer  # every plain dense module was swapped
    quantised = [m for m in model.modules() if type(m) in QUANTISED.values()]
    assert all(m.precision == "mxfp8_e4m3" for m in quantised)
    assert not any(type(m) in QUANTISED.values() for m in model.sparse_arch.modules())
    kjt = KeyedJaggedTensor.from_lengths_sync(["a", "b", "c"], torch.arange(12) % 20,
                                              torch.ones(12, dtype=torch.int32))
    dense = _seeded(4, 2, seed=1)
    logits = model(dense, kjt)
    plain = build_model(dataclasses.replace(spec, layers=(CASES[case],), dense_arch_precision="fp32",
                                            over_arch_precision="fp32"))
    plain.load_state_dict(model.state_dict())  # same parameter names: fp32 weights load as they are
    reference = plain(dense, kjt)
    assert not torch.equal(logits, reference)
    torch.testing.assert_close(logits, reference, rtol=0.1, atol=0.05)
    logits.sum().backward()


def test_cost_model_counts_quantised_models_like_fp32_and_charges_fewer_bytes() -> None:
    spec = ArchSpec(dim=8, n_dense=2, dense_arch=(16,), over_arch=(64,), layers=(CASES["wukong"],),
                    tables=(TableSpec(name="t", features=("a", "b"), num_embeddings=20, dim=8),))
    mx = spec.replace(layers=(dataclasses.replace(CASES["wukong"], precision="mxfp4_e2m1"),),
                      over_arch_precision="fp8_e4m3_rowwise")
    plain, low = arch_cost(spec), arch_cost(mx)
    assert low.forward_flops == plain.forward_flops
    by_name = {p.name: p for p in low.parts}
    assert by_name["over_arch"].precision == "fp8_e4m3_rowwise"
    plain_parts = {p.name: p for p in plain.parts}
    assert by_name["over_arch"].bytes < plain_parts["over_arch"].bytes / 3
    assert by_name["layers.0"].bytes < plain_parts["layers.0"].bytes / 4
    assert ArchSpec.from_json(mx.to_json()) == mx
    assert "over_arch_precision" not in spec.to_json()  # fp32 files stay as they were


def test_bad_part_precision_names_the_field() -> None:
    from autorec.arch import ArchSpecError

    with pytest.raises(ArchSpecError, match=r"over_arch_precision: expected one of .*got 'fp7'"):
        ArchSpec.from_dict({"dim": 4, "over_arch_precision": "fp7",
                            "tables": [{"name": "t", "features": ["f"], "num_embeddings": 3, "dim": 4}]})


def test_native_fp8_falls_back_off_cuda() -> None:
    x, w = _seeded(4, 32, seed=0), _seeded(16, 32, seed=1)
    assert not scaled_mm_supported(x, w)
    assert native_linear(x, w, rowwise=True) is None


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability() < (8, 9),
                    reason="needs a CUDA device of compute capability >= 8.9")
@pytest.mark.parametrize("rowwise", [True, False])
def test_native_fp8_matches_the_emulation(rowwise: bool) -> None:
    x, w = _seeded(64, 128, seed=0).cuda(), _seeded(32, 128, seed=1).cuda()
    native = native_linear(x, w, rowwise=rowwise)
    assert native is not None
    precision = "fp8_e4m3_rowwise" if rowwise else "fp8_e4m3"
    qw, qa, _ = recipe(precision).quantisers
    emulated = qa.quantise(x) @ qw.quantise(w).T
    torch.testing.assert_close(native, emulated, rtol=2e-2, atol=2e-2)  # bf16 output
    assert native_linear(x[:, :120], w[:, :120], rowwise=rowwise) is None  # K % 16 != 0
    # The backward products (E5M2 gradient x E4M3 weight / activation) run natively too and
    # match the emulated backward on the CPU, given the same output gradient.
    torch.manual_seed(2)
    emulated_layer = QuantLinear(128, 32, precision=precision)
    native_layer = copy.deepcopy(emulated_layer).cuda()
    upstream = _seeded(64, 32, seed=3)
    x_cpu, x_gpu = x.cpu().requires_grad_(), x.clone().requires_grad_()
    emulated_layer(x_cpu).backward(upstream)
    native_layer(x_gpu).backward(upstream.cuda())
    assert not REFUSED, f"torch._scaled_mm refused {REFUSED}"
    for native_grad, emulated_grad in ((x_gpu.grad, x_cpu.grad),
                                       (native_layer.weight.grad, emulated_layer.weight.grad)):
        gap = (native_grad.cpu().float() - emulated_grad).norm() / emulated_grad.norm()
        assert gap < 1e-2


def test_at_precision_candidates_share_one_set_of_weights() -> None:
    torch.manual_seed(0)
    shared = build_block(CASES["wukong"], 5, 8)
    candidates = nn.ModuleList([AtPrecision(shared, p) for p in ("fp32", "mxfp8_e4m3", "mxfp4_e2m1")])
    assert len(list(candidates.parameters())) == len(list(shared.parameters()))
    x = _seeded(4, 5, 8, seed=0)
    outs = [c(x) for c in candidates]
    assert torch.equal(outs[0], shared(x))  # the shared block is back in fp32 after each call
    quantised = build_block(CASES["wukong"], 5, 8)
    quantised.load_state_dict(shared.state_dict())
    quantise_module_(quantised, "mxfp4_e2m1")
    torch.testing.assert_close(outs[2], quantised(x), rtol=0, atol=0)
    mix = 0.2 * outs[0] + 0.3 * outs[1] + 0.5 * outs[2]
    mix.square().sum().backward()
    assert all(p.grad is not None for p in shared.parameters())


def test_quantised_model_exports_with_its_quantisation() -> None:
    from autorec.export.program import TensorInputs, _tracing_inputs, export_program

    spec = ArchSpec(dim=8, n_dense=2, dense_arch=(16,), over_arch=(16,),
                    layers=(dataclasses.replace(CASES["dhen-weighted"], precision="mxfp4_e2m1"),),
                    tables=(TableSpec(name="t", features=("a", "b", "c"), num_embeddings=20, dim=8),),
                    over_arch_precision="fp8_e4m3_rowwise")
    torch.manual_seed(0)
    model = build_model(spec).eval()
    program = export_program(model)
    inputs = _tracing_inputs(spec, batch=7)
    # export traces torch's operators; eager fp32 on the CPU runs autorec.native's kernels (the
    # same values to float rounding), so the bit-for-bit reference is eager with them off
    with torch.no_grad(), native_dots.disabled(), native_norm.disabled():
        expected = TensorInputs(model)(*inputs)
        plain = build_model(with_precision(spec, "fp32"))
        plain.load_state_dict(model.state_dict())
        unquantised = TensorInputs(plain.eval())(*inputs)
    with torch.no_grad():
        eager = TensorInputs(model)(*inputs)
    torch.testing.assert_close(program.module()(*inputs), expected, rtol=0, atol=0)
    torch.testing.assert_close(eager, expected, rtol=1e-5, atol=1e-6)
    assert not torch.equal(expected, unquantised)
