"""The tower module meets the block contract (tests/blocks/test_conformance.py) for every inner
block kind, and compresses to ``n_out`` vectors."""

from __future__ import annotations

import pytest
import torch
from torch.export import Dim

from autorec.arch import BlockConfig, DotConfig
from autorec.blocks.towers import TowerModule, Towers
from tests.blocks.test_conformance import CASES
from tests.doctests import assert_examples_run


@pytest.fixture(params=list(CASES), ids=list(CASES))
def inner(request: pytest.FixtureRequest) -> BlockConfig:
    return CASES[request.param]


def _tower(config: BlockConfig, num_in: int, dim: int, n_out: int = 2, seed: int = 0) -> TowerModule:
    torch.manual_seed(seed)
    return TowerModule(config, num_in, dim, n_out)


@pytest.mark.parametrize(("num_in", "dim", "batch", "n_out"), [(2, 4, 1, 1), (5, 8, 3, 2), (7, 4, 4, 3)])
def test_output_shape(inner: BlockConfig, num_in: int, dim: int, batch: int, n_out: int) -> None:
    out = _tower(inner, num_in, dim, n_out)(torch.randn(batch, num_in, dim))
    assert out.shape == (batch, n_out, dim)
    assert torch.isfinite(out).all()


def test_gradients_reach_every_parameter(inner: BlockConfig) -> None:
    tower = _tower(inner, 4, 8)
    x = torch.randn(3, 4, 8, requires_grad=True)
    out = tower(x)
    (out * torch.randn_like(out)).sum().backward()
    assert x.grad is not None and x.grad.abs().sum() > 0
    for name, param in tower.named_parameters():
        assert param.grad is not None and param.grad.abs().sum() > 0, name


def test_rows_are_independent(inner: BlockConfig) -> None:
    tower = _tower(inner, 5, 8).eval()
    x = torch.randn(4, 5, 8)
    with torch.no_grad():
        full = tower(x)
        for i in range(len(x)):
            torch.testing.assert_close(tower(x[i : i + 1])[0], full[i], rtol=1e-5, atol=1e-5)


def test_deterministic_given_the_seed(inner: BlockConfig) -> None:
    x = torch.randn(3, 4, 8)
    assert torch.equal(_tower(inner, 4, 8, seed=3)(x), _tower(inner, 4, 8, seed=3)(x))
    assert not torch.equal(_tower(inner, 4, 8, seed=3)(x), _tower(inner, 4, 8, seed=4)(x))


# torch.export is the slow check (seconds per kind): the block suite exports every kind already;
# here one tower per structurally different inner block.
@pytest.mark.parametrize("case", ["dlrm", "wukong", "dhen-sum", "skip"])
def test_torch_export_with_a_dynamic_batch(case: str) -> None:
    tower = _tower(CASES[case], 4, 8).eval()
    program = torch.export.export(tower, (torch.randn(3, 4, 8),), dynamic_shapes={"x": {0: Dim("batch")}})
    for batch in (3, 6, 1):
        x = torch.randn(batch, 4, 8)
        with torch.no_grad():
            torch.testing.assert_close(program.module()(x), tower(x), rtol=1e-5, atol=1e-5)


def test_compression_is_a_linear_map_of_the_inputs_and_the_block_output() -> None:
    tower = _tower(DotConfig(n_passthrough=0), 3, 4, n_out=2)
    x = torch.randn(5, 3, 4)
    both = torch.cat([x, tower.block(x)], dim=1)
    want = torch.stack([both.mul(w.view(1, -1, 1)).sum(1) for w in tower.weight], dim=1) + tower.bias
    torch.testing.assert_close(tower(x), want)


def test_towers_read_their_own_positions() -> None:
    torch.manual_seed(0)
    towers = Towers(DotConfig(n_passthrough=0), [[3, 0], [1, 2]], dim=4, n_out=1)
    x = torch.randn(2, 4, 4)
    out = towers(x)
    torch.testing.assert_close(out[:, :1], towers.towers[0](x[:, [3, 0]]))
    torch.testing.assert_close(out[:, 1:], towers.towers[1](x[:, [1, 2]]))
    moved = x.clone()
    moved[:, 1] += 1.0  # a feature of tower 1 only: tower 0's output must not move
    torch.testing.assert_close(towers(moved)[:, :1], out[:, :1])
    assert not torch.allclose(towers(moved)[:, 1:], out[:, 1:])


def test_bad_n_out_is_refused() -> None:
    with pytest.raises(ValueError, match="n_out must be >= 1"):
        TowerModule(DotConfig(), 3, 4, 0)


def test_doctests() -> None:
    assert_examples_run("autorec.blocks.towers")
