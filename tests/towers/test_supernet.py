"""Towers in the supernet: count, module kind and size as mixed ops; derive() returns towers."""

from __future__ import annotations

import random

import pytest
import torch
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from autorec.costs import arch_cost
from autorec.data import Schema, SparseFeature, load_dataset
from autorec.space import SearchSpace
from autorec.space.towers import tower_module
from autorec.supernet import ExpectedCost, Supernet, SupernetConfig, SupernetSearch
from autorec.supernet.towers import SuperTowers
from tests.doctests import assert_examples_run

SCHEMA = Schema(dense=("a",), sparse=tuple(SparseFeature(f"f{i}", 10) for i in range(6)))
SPACE = {"dim": [8], "dense_arch": [[8]], "over_arch": [[16]],
         "layers": {"num": [1], "kinds": ["dlrm", "mlp"], "mlp": {"hidden": [[8]], "n_out": [2]}},
         "towers": {"num": [0, 2, 3], "kinds": ["mlp", "dlrm"], "n_out": [1, 2]}}


def _net() -> tuple[SearchSpace, Supernet]:
    space = SearchSpace.from_dict(SPACE)
    torch.manual_seed(0)
    return space, Supernet(space, SCHEMA, dim=8, dense_arch=(8,), over_arch=(16,))


def _batch(b: int = 5) -> tuple[torch.Tensor, KeyedJaggedTensor]:
    kjt = KeyedJaggedTensor.from_lengths_sync([f"f{i}" for i in range(6)], torch.arange(6 * b) % 10,
                                              torch.ones(6 * b, dtype=torch.long))
    return torch.randn(b, 1), kjt


def test_the_choices_and_the_stack_width() -> None:
    _, net = _net()
    assert {"towers.num", "towers.kind", "towers.n_out"} <= set(net.arch.choices)
    assert net.arch.choices["towers.num"].values == (0, 2, 3)
    assert net.f0 == 1 + 3 * 2  # the widest: 3 towers x 2 vectors (flat gives 6)


@pytest.mark.parametrize("hard", [False, True])
def test_forward_and_gradients_reach_the_tower_logits(hard: bool) -> None:
    _, net = _net()
    dense, kjt = _batch()
    weights = net.arch.sample(tau=1.0, hard=hard, generator=torch.Generator().manual_seed(2))
    assert net.embed(dense, kjt, weights).shape == (5, net.f0, 8)
    torch.nn.functional.binary_cross_entropy_with_logits(net(dense, kjt, weights), torch.ones(5)).backward()
    grad = net.arch.logit("towers.num").grad
    assert grad is not None and grad.abs().sum() > 0
    if not hard:
        for name in ("towers.kind", "towers.n_out"):
            assert net.arch.logit(name).grad.abs().sum() > 0, name


def test_n_out_masks_each_towers_vectors_with_shared_weights() -> None:
    towers = SuperTowers(SearchSpace.from_dict(SPACE).towers, SCHEMA, dim=8)
    x = torch.randn(4, 6, 8)
    w = {"towers.num": torch.tensor([0.0, 1.0, 0.0]), "towers.kind": torch.tensor([1.0, 0.0]),
         "towers.n_out": torch.tensor([1.0, 0.0])}
    out = towers(x, w)
    assert out.shape == (4, 6, 8)
    assert out[:, 1].abs().sum() == 0 and out[:, 3].abs().sum() == 0  # second vector of both towers
    assert out[:, 0].abs().sum() > 0 and out[:, 2].abs().sum() > 0
    assert out[:, 4:].abs().sum() == 0  # padding to the widest candidate (3 towers x 2)
    wide = towers(x, {**w, "towers.n_out": torch.tensor([0.0, 1.0])})
    torch.testing.assert_close(wide[:, 0], out[:, 0])  # n_out 1 is the prefix of n_out 2


@pytest.mark.parametrize("seed", range(6))
def test_derive_returns_the_preferred_towers_in_the_space(seed: int) -> None:
    space, net = _net()
    rng = random.Random(seed)
    with torch.no_grad():
        for p in net.arch.logits:
            p.copy_(100.0 * torch.tensor(rng.sample(range(p.numel()), p.numel()), dtype=torch.float32))
    spec = net.derive()
    assert space.contains(spec)
    k = net.arch.argmax()["towers.num"]
    if k == 0:
        assert spec.towers is None
    else:
        assert spec.towers.num_towers == k
        assert spec.towers.module == tower_module(net.arch.argmax()["towers.kind"])
        assert spec.towers.n_out == net.arch.argmax()["towers.n_out"]
    chosen = net.derive({"towers.num": 3, "towers.kind": "dlrm", "towers.n_out": 2})
    assert chosen.towers.groups == (("f0", "f3"), ("f1", "f4"), ("f2", "f5"))
    assert chosen.towers.n_out == 2 and chosen.num_inputs == 7
    assert net.derive({"towers.num": 0}).towers is None


@pytest.mark.parametrize("seed", range(6))
def test_one_hot_expected_cost_equals_the_derived_specs_cost(seed: int) -> None:
    _, net = _net()
    rng = random.Random(seed)
    with torch.no_grad():
        for p in net.arch.logits:
            p.copy_(100.0 * torch.tensor(rng.sample(range(p.numel()), p.numel()), dtype=torch.float32))
    cost = arch_cost(net.derive())
    with torch.no_grad():
        assert float(ExpectedCost(net, "flops")()) == cost.forward_flops
        assert float(ExpectedCost(net, "params_bytes")()) == cost.dense_bytes


def test_expected_cost_has_gradients_through_the_tower_choices() -> None:
    _, net = _net()  # uniform probabilities
    ExpectedCost(net, "flops")().backward()
    for name in ("towers.num", "towers.kind", "towers.n_out"):
        assert net.arch.logit(name).grad.abs().sum() > 0, name


def test_a_short_supernet_search_derives_towers() -> None:
    torch.set_num_threads(1)
    ds = load_dataset("synthetic", preset="groups4", num_samples=2000)
    space = SearchSpace.from_dict({"dim": [8], "dense_arch": [[8]], "over_arch": [[16]],
                                   "layers": {"kinds": ["dlrm", "mlp"]},
                                   "towers": {"num": [2, 4], "kinds": ["dlrm", "mlp"], "n_out": [1, 2]}})
    result = SupernetSearch(space, ds, dim=8, dense_arch=(8,), over_arch=(16,),
                            config=SupernetConfig(steps=6, warmup_steps=2, batch_size=64)).fit()
    assert result.spec.towers is not None and space.contains(result.spec)


def test_doctests() -> None:
    assert_examples_run("autorec.supernet.towers")
