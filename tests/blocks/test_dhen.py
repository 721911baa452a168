"""DhenLayer: the ensemble of interaction modules, its sizes, weights and errors."""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F

from autorec.arch import DHEN_MODULES, ArchSpecError, DhenConfig
from autorec.blocks.dhen import ConvModule, DhenLayer


def _layer(num_in: int = 4, dim: int = 8, **fields: object) -> DhenLayer:
    torch.manual_seed(0)
    return DhenLayer(DhenConfig(**fields), num_in, dim)


@pytest.mark.parametrize("name", DHEN_MODULES)
def test_each_module_outputs_n_out_vectors(name: str) -> None:
    layer = _layer(modules=(name,), n_out=3, ensemble="concat")
    out = layer.interactions[name](torch.randn(2, 4, 8))
    assert out.shape == (2, 3, 8)


@pytest.mark.parametrize(("ensemble", "num_out"), [("concat", 9), ("sum", 3), ("weighted_sum", 3)])
def test_ensemble_sizes(ensemble: str, num_out: int) -> None:
    config = DhenConfig(modules=("dot", "linear", "conv"), ensemble=ensemble, n_out=3)
    assert DhenLayer.out_features(config, num_in=4, dim=8) == num_out
    assert _layer(modules=config.modules, ensemble=ensemble, n_out=3)(torch.randn(2, 4, 8)).shape == \
        (2, num_out, 8)


def _manual(layer: DhenLayer, x: torch.Tensor, mixed: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(mixed + layer.shortcut(x), (x.shape[-1],), layer.norm.weight, layer.norm.bias)


@pytest.mark.parametrize("ensemble", ["concat", "sum"])
def test_concat_and_sum_combine_the_module_outputs(ensemble: str) -> None:
    layer = _layer(modules=("linear", "dcn", "attention"), ensemble=ensemble, n_out=2)
    x = torch.randn(3, 4, 8)
    outs = [module(x) for module in layer.interactions.values()]
    mixed = torch.cat(outs, dim=1) if ensemble == "concat" else outs[0] + outs[1] + outs[2]
    torch.testing.assert_close(layer(x), _manual(layer, x, mixed))


def test_weighted_sum_weights_are_a_learned_softmax() -> None:
    layer = _layer(modules=("dot", "linear", "conv"), ensemble="weighted_sum", n_out=2)
    weights = layer.ensemble_weights()
    torch.testing.assert_close(weights, torch.full((3,), 1 / 3))
    with torch.no_grad():
        layer.ensemble_logits.copy_(torch.tensor([2.0, -1.0, 0.5]))
    weights = layer.ensemble_weights()
    torch.testing.assert_close(weights.sum(), torch.tensor(1.0))
    assert (weights > 0).all() and weights[0] > weights[2] > weights[1]
    x = torch.randn(3, 4, 8)
    outs = [module(x) for module in layer.interactions.values()]
    mixed = sum(w * out for w, out in zip(weights, outs, strict=True))
    torch.testing.assert_close(layer(x), _manual(layer, x, mixed))


def test_shortcut_is_identity_exactly_when_sizes_match() -> None:
    same = _layer(num_in=3, modules=("linear", "conv"), ensemble="sum", n_out=3)
    assert isinstance(same.shortcut, torch.nn.Identity)
    differ = _layer(num_in=3, modules=("linear", "conv"), ensemble="concat", n_out=3)
    assert differ.shortcut.linear.weight.shape == (6, 3)


def test_conv_module_is_the_documented_convolution() -> None:
    torch.manual_seed(0)
    conv = ConvModule(num_in=3, num_out=2)
    x = torch.randn(4, 3, 5)
    weight, bias = conv.conv.weight, conv.conv.bias  # [n_out, F, 3], [n_out]
    padded = F.pad(x, (1, 1))
    expected = torch.stack([
        torch.einsum("oft,bft->bo", weight, padded[:, :, d : d + 3]) + bias for d in range(5)], dim=-1)
    torch.testing.assert_close(conv(x), expected)


def test_dot_module_is_a_linear_of_the_pairwise_dots() -> None:
    layer = _layer(num_in=3, modules=("dot",), n_out=1, dim=2)
    module = layer.interactions["dot"]
    x = torch.randn(2, 3, 2)
    dots = torch.stack([(x[:, 0] * x[:, 1]).sum(-1), (x[:, 0] * x[:, 2]).sum(-1),
                        (x[:, 1] * x[:, 2]).sum(-1)], dim=1)
    expected = (dots @ module.linear.weight.T + module.linear.bias).view(2, 1, 2)
    torch.testing.assert_close(module(x), expected)


def test_layers_stack_into_a_hierarchy() -> None:
    first = _layer(num_in=4, modules=("dot", "attention"), ensemble="concat", n_out=3)
    second = DhenLayer(DhenConfig(modules=("dcn", "linear"), ensemble="weighted_sum", n_out=2),
                       first.num_out, 8)
    assert second(first(torch.randn(2, 4, 8))).shape == (2, 2, 8)


def test_heads_must_divide_dim_and_the_error_names_the_field() -> None:
    with pytest.raises(ValueError, match=r"dhen\.num_heads: .*dim 6"):
        _layer(dim=6, modules=("attention",), num_heads=4)
    # Without attention the same sizes are fine.
    assert _layer(dim=6, modules=("linear",), num_heads=4)(torch.randn(2, 4, 6)).shape == (2, 8, 6)


def test_dot_needs_two_vectors_and_the_error_names_the_field() -> None:
    with pytest.raises(ValueError, match=r"dhen\.modules: the dot module"):
        _layer(num_in=1, modules=("dot", "linear"))


@pytest.mark.parametrize(("fields", "path"), [
    ({"modules": ("dot", "mlp")}, "dhen.modules[1]:"),
    ({"modules": ()}, "dhen.modules:"),
    ({"ensemble": "max"}, "dhen.ensemble:"),
    ({"n_out": 0}, "dhen.n_out:"),
])
def test_bad_configs_name_the_field(fields: dict, path: str) -> None:
    with pytest.raises(ArchSpecError, match=re.escape(path)):
        _layer(**fields)


def test_under_cpu_bf16_autocast_the_attention_stays_in_fp32() -> None:
    """The CPU attention kernel's bf16 backward is about 4x slower than its fp32 one
    (BENCHMARKS.md, "bf16 autocast"): under autocast the attention takes fp32 inputs, gives
    the fp32 module's values, and only the projection after it runs in bf16."""
    from autorec.blocks.dhen import AttentionModule

    torch.manual_seed(0)
    module = AttentionModule(num_in=4, num_out=2, dim=8, num_heads=2)
    seen: list[torch.dtype] = []
    module.attention.register_forward_hook(lambda m, args, out: seen.append(out[0].dtype))
    x = torch.randn(3, 4, 8).bfloat16()  # what a bf16 layer before it hands over
    plain, _ = module.attention(x.float(), x.float(), x.float(), need_weights=False)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = module(x)
    assert seen == [torch.float32, torch.float32] and out.dtype == torch.bfloat16
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = module.project(plain)
    torch.testing.assert_close(out, expected, atol=0, rtol=0)
