"""The contract every registered interaction block meets (one suite, every implementation).

Adding a block kind without a case here fails ``test_every_registered_kind_has_a_case``.
"""

from __future__ import annotations

import pytest
import torch
from torch.export import Dim

from autorec.arch import (
    ArchSpec,
    BlockConfig,
    CrossConfig,
    DhenConfig,
    DotConfig,
    MLPConfig,
    SkipConfig,
    TableSpec,
    WukongConfig,
)
from autorec.blocks import KINDS, build_block, kind, out_features

CASES: dict[str, BlockConfig] = {
    "skip": SkipConfig(),
    "dlrm": DotConfig(n_passthrough=1),
    "dlrm-self-nopass": DotConfig(n_passthrough=0, self_interaction=True),
    "dcnv2-full": CrossConfig(num_layers=2, rank=0),
    "dcnv2-lowrank": CrossConfig(num_layers=2, rank=3),
    "wukong": WukongConfig(n_fm=3, n_lcb=2, rank=2, mlp=(16,)),
    "wukong-no-lcb-no-mlp": WukongConfig(n_fm=2, n_lcb=0, rank=3, mlp=()),
    "dhen-concat-all": DhenConfig(modules=("dot", "attention", "dcn", "linear", "conv"),
                                  ensemble="concat", n_out=2, num_heads=2),
    "dhen-sum": DhenConfig(modules=("linear", "conv"), ensemble="sum", n_out=3),
    "dhen-weighted": DhenConfig(modules=("dot", "dcn", "attention"), ensemble="weighted_sum", n_out=2,
                                num_heads=4, dcn_layers=2),
    "mlp": MLPConfig(hidden=(16, 8), n_out=3),
    "mlp-no-hidden": MLPConfig(hidden=(), n_out=2),
}

# (F_in, D, B): D divisible by every case's num_heads, F_in >= 2 for the dot modules.
SIZES = [(2, 4, 1), (5, 8, 3), (7, 4, 4)]


@pytest.fixture(params=list(CASES), ids=list(CASES))
def config(request: pytest.FixtureRequest) -> BlockConfig:
    return CASES[request.param]


def _build(config: BlockConfig, num_in: int, dim: int, seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return build_block(config, num_in, dim)


def test_every_registered_kind_has_a_case() -> None:
    assert set(KINDS) == {c.kind for c in CASES.values()}


@pytest.mark.parametrize(("num_in", "dim", "batch"), SIZES)
def test_output_shape(config: BlockConfig, num_in: int, dim: int, batch: int) -> None:
    block = _build(config, num_in, dim)
    num_out = out_features(config, num_in, dim)
    out = block(torch.randn(batch, num_in, dim))
    assert out.shape == (batch, num_out, dim)
    assert block.num_out == num_out == type(block).out_features(config, num_in, dim)
    assert out.dtype == torch.float32
    assert torch.isfinite(out).all()


def test_build_block_uses_the_registry(config: BlockConfig) -> None:
    block = build_block(config, 3, 4)
    assert type(block) is kind(config.kind).block
    assert type(block).config_type is type(config)
    assert (block.config, block.num_in, block.dim) == (config, 3, 4)


def test_wrong_config_type_is_refused(config: BlockConfig) -> None:
    other = SkipConfig() if not isinstance(config, SkipConfig) else DotConfig()
    with pytest.raises(TypeError, match=type(config).__name__):
        kind(config.kind).block(other, 3, 4)


def test_gradients_reach_every_parameter(config: BlockConfig) -> None:
    block = _build(config, 4, 8)
    x = torch.randn(3, 4, 8, requires_grad=True)
    out = block(x)
    # A random weighting: a plain sum of a LayerNorm output carries no gradient to its input.
    (out * torch.randn_like(out)).sum().backward()
    assert x.grad is not None and x.grad.abs().sum() > 0
    for name, param in block.named_parameters():
        assert param.grad is not None, f"{name} got no gradient"
        assert param.grad.abs().sum() > 0, f"{name} got a zero gradient"


def test_rows_are_independent(config: BlockConfig) -> None:
    block = _build(config, 5, 8).eval()
    x = torch.randn(4, 5, 8)
    with torch.no_grad():
        full = block(x)
        for i in range(len(x)):
            torch.testing.assert_close(block(x[i : i + 1])[0], full[i], rtol=1e-5, atol=1e-5)


def test_deterministic_given_the_seed(config: BlockConfig) -> None:
    x = torch.randn(3, 4, 8)
    first, second = _build(config, 4, 8, seed=7), _build(config, 4, 8, seed=7)
    for (name, a), (_, b) in zip(first.state_dict().items(), second.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
    assert torch.equal(first(x), second(x))
    params = list(first.parameters())
    if params:  # another seed must give other weights, or the check above proves nothing
        other = list(_build(config, 4, 8, seed=8).parameters())
        assert any(not torch.equal(a, b) for a, b in zip(params, other, strict=True))


def test_torch_export_with_a_dynamic_batch(config: BlockConfig) -> None:
    block = _build(config, 4, 8).eval()
    program = torch.export.export(block, (torch.randn(3, 4, 8),),
                                  dynamic_shapes={"x": {0: Dim("batch")}})
    exported = program.module()
    for batch in (3, 6, 1):
        x = torch.randn(batch, 4, 8)
        with torch.no_grad():
            torch.testing.assert_close(exported(x), block(x), rtol=1e-5, atol=1e-5)


def test_json_round_trip_rebuilds_the_same_block(config: BlockConfig) -> None:
    spec = ArchSpec(dim=8, n_dense=2, dense_arch=(8,),
                    tables=(TableSpec(name="t", features=("a", "b", "c"), num_embeddings=10, dim=8),),
                    layers=(config, config))
    back = ArchSpec.from_json(spec.to_json())
    assert back == spec
    num_in = spec.num_inputs
    for layer in back.layers:
        assert type(layer) is type(config)
        assert out_features(layer, num_in, 8) == out_features(config, num_in, 8)
    x = torch.randn(2, num_in, 8)
    torch.testing.assert_close(_build(back.layers[0], num_in, 8)(x), _build(config, num_in, 8)(x))
