"""prune(): structured pruning that really shrinks the matrices, by magnitude or learned gates."""

from __future__ import annotations

import pytest
import torch

from autorec.arch import CrossConfig, DhenConfig, WukongConfig
from autorec.costs import arch_cost
from autorec.growth import GrowthError, add_gates, drop_modules, gate_penalty, prune, shrink
from autorec.growth.gates import gates_of
from autorec.models import build_model
from tests.growth.cases import SPECS, batch, outputs, scramble, spec


def shapes(model) -> dict[str, tuple[int, ...]]:
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}


@pytest.mark.parametrize("name", sorted(SPECS))
def test_pruning_builds_the_smaller_model_with_fewer_flops(name):
    full = SPECS[name]
    small_spec = shrink(full, 0.5)
    model = scramble(build_model(full))
    small = prune(model, full, small_spec)
    assert small.spec == small_spec
    assert shapes(small) == shapes(build_model(small_spec))
    params = sum(p.numel() for p in small.parameters() if p.dim() > 1)
    assert params < sum(p.numel() for p in model.parameters() if p.dim() > 1)
    assert arch_cost(small_spec).forward_flops < arch_cost(full).forward_flops
    assert torch.isfinite(outputs(small, batch())).all()
    for key, table in model.sparse_arch.state_dict().items():
        assert torch.equal(small.sparse_arch.state_dict()[key], table)


def test_magnitude_pruning_removes_the_units_that_do_nothing():
    full = spec(over_arch=(8, 6))
    model = scramble(build_model(full))
    dead = [1, 4, 6]
    with torch.no_grad():  # three hidden units of over_arch[0] that nothing reads
        model.over_arch[0]._mlp[1]._linear.weight[:, dead] = 0
    small = prune(model, full, spec(over_arch=(5, 6)))
    kept = [0, 2, 3, 5, 7]
    torch.testing.assert_close(small.over_arch[0]._mlp[0]._linear.weight,
                               model.over_arch[0]._mlp[0]._linear.weight[kept])
    torch.testing.assert_close(outputs(small, batch()), outputs(model, batch()))


def test_magnitude_pruning_of_rank_components_and_rows_is_exact_when_they_are_unused():
    full = spec(CrossConfig(num_layers=1, rank=6), WukongConfig(n_fm=4, n_lcb=4, rank=2, mlp=(8,)),
                over_arch=(8,))
    model = scramble(build_model(full))
    with torch.no_grad():
        model.layers[0].cross.W_kernels[0][:, [0, 3]] = 0  # two rank components unused
        # Rows 1 (FMB) and 6 (LCB) of the last layer: nothing reads them.
        first = model.over_arch[0]._mlp[0]._linear.weight.view(8, 8, 8)
        first[:, [1, 6], :] = 0
    target = spec(CrossConfig(num_layers=1, rank=4), WukongConfig(n_fm=3, n_lcb=3, rank=2, mlp=(8,)),
                  over_arch=(8,))
    small = prune(model, full, target)
    torch.testing.assert_close(outputs(small, batch()), outputs(model, batch()))


def test_a_full_rank_cross_layer_is_pruned_to_its_truncated_svd():
    full = spec(CrossConfig(num_layers=1, rank=0))
    model = scramble(build_model(full))
    with torch.no_grad():  # a kernel of rank 3: the rank-3 SVD is exact
        n = model.layers[0].cross.kernels[0].shape[0]
        g = torch.Generator().manual_seed(0)
        low = torch.randn(n, 3, generator=g) @ torch.randn(3, n, generator=g) / n
        model.layers[0].cross.kernels[0].copy_(low)
    small = prune(model, full, spec(CrossConfig(num_layers=1, rank=3)))
    torch.testing.assert_close(outputs(small, batch()), outputs(model, batch()), rtol=1e-4, atol=1e-4)


def test_pruning_cross_layers_drops_the_smallest():
    full = spec(CrossConfig(num_layers=3, rank=4))
    model = scramble(build_model(full))
    with torch.no_grad():  # layer 1 is the identity: x0 * (0 + 0) + x
        model.layers[0].cross.W_kernels[1].zero_()
        model.layers[0].cross.bias[1].zero_()
    small = prune(model, full, spec(CrossConfig(num_layers=2, rank=4)))
    assert torch.equal(small.layers[0].cross.V_kernels[1], model.layers[0].cross.V_kernels[2])
    torch.testing.assert_close(outputs(small, batch()), outputs(model, batch()))


@pytest.mark.parametrize("ensemble", ["concat", "sum"])
def test_dropping_a_dhen_module_that_contributes_nothing_is_exact(ensemble):
    full = spec(DhenConfig(modules=("dot", "linear", "conv"), ensemble=ensemble, n_out=3), over_arch=(8,))
    model = scramble(build_model(full))
    with torch.no_grad():
        if ensemble == "sum":
            model.layers[0].interactions.linear.linear.weight.zero_()
        else:  # the linear module's three rows: nothing reads them
            model.over_arch[0]._mlp[0]._linear.weight.view(8, 9, 8)[:, 3:6] = 0
    target = spec(DhenConfig(modules=("dot", "conv"), ensemble=ensemble, n_out=3), over_arch=(8,))
    small = prune(model, full, target)
    assert list(small.layers[0].interactions) == ["dot", "conv"]
    torch.testing.assert_close(outputs(small, batch()), outputs(model, batch()))


@pytest.mark.parametrize("ensemble", ["concat", "weighted_sum"])
def test_drop_modules_picks_the_module_that_contributes_least(ensemble):
    full = spec(DhenConfig(modules=("dot", "attention", "linear"), ensemble=ensemble, n_out=3),
                over_arch=(8,))
    model = scramble(build_model(full))
    with torch.no_grad():
        if ensemble == "concat":  # the attention module's rows are hardly read
            model.over_arch[0]._mlp[0]._linear.weight.view(8, 9, 8)[:, 3:6] *= 1e-3
        else:  # the dot module's softmax weight is tiny
            model.layers[0].ensemble_logits.copy_(torch.tensor([-9.0, 0.0, 0.0]))
    target = drop_modules(model, full, 1)
    expected = ("dot", "linear") if ensemble == "concat" else ("attention", "linear")
    assert target.layers[0].modules == expected
    small = prune(model, full, target)
    assert tuple(small.layers[0].interactions) == expected
    assert drop_modules(model, full, {"layers.0": 5}).layers[0].modules != ()  # one stays


def test_drop_modules_refuses_a_layer_that_is_not_dhen():
    full = spec(CrossConfig(), DhenConfig(modules=("dot", "linear")))
    with pytest.raises(GrowthError, match=r"count\['layers.0'\]: not a DHEN layer; expected one of layers.1"):
        drop_modules(build_model(full), full, {"layers.0": 1})


def test_gates_prune_exactly_the_units_whose_gates_are_zero():
    full = spec(CrossConfig(num_layers=1, rank=6), over_arch=(8, 6))
    model = scramble(build_model(full))
    gates = add_gates(model, full)
    assert set(gates) == {"dense_arch[0]", "layers.0.rank.0", "over_arch[0]", "over_arch[1]"}
    with torch.no_grad():
        gates["over_arch[0]"].copy_(torch.tensor([0.5, 0.0, 2.0, 1.0, 0.0, 1.5, 0.0, 3.0]))
        gates["layers.0.rank.0"].copy_(torch.tensor([1.0, 0.0, 0.0, 1.0, 2.0, 0.7]))
    gated = outputs(model, batch())
    target = spec(CrossConfig(num_layers=1, rank=4), over_arch=(5, 6))
    small = prune(model, full, target, method="gates")
    kept = [0, 2, 3, 5, 7]  # the magnitude choice would differ: the weights are random
    plain = model.over_arch[0]._mlp[0]._linear.weight  # gates sit on the next layer's columns
    torch.testing.assert_close(small.over_arch[0]._mlp[0]._linear.weight, plain[kept])
    torch.testing.assert_close(outputs(small, batch()), gated)
    assert gates_of(small) == {}


def test_gates_on_rows_prune_exactly_the_rows_whose_gates_are_zero():
    def layers(n_fm, n_lcb, n_out1, n_out2):
        return (WukongConfig(n_fm=n_fm, n_lcb=n_lcb, rank=4, mlp=(16,)),
                DhenConfig(modules=("dot", "linear", "conv"), n_out=n_out1),
                DhenConfig(modules=("dot", "linear"), n_out=n_out2))

    full = spec(*layers(4, 4, 4, 2), over_arch=(8,))
    model = scramble(build_model(full))
    gates = add_gates(model, full)
    rows = {"layers.0.n_fm": [1.0, 0.0, 0.5, 2.0], "layers.0.n_lcb": [0.0, 1.5, 1.0, 0.7],
            "layers.1.n_out.dot": [0.0, 1.0, 1.0, 0.4], "layers.1.n_out.linear": [1.0, 0.0, 0.3, 1.0],
            "layers.1.n_out.conv": [2.0, 1.0, 0.0, 1.0], "layers.2.n_out.dot": [0.0, 1.0],
            "layers.2.n_out.linear": [1.2, 0.0]}
    # The FM rank feeds a LayerNorm: not gated (pruned by magnitude).
    assert set(gates) == {"dense_arch[0]", "layers.0.mlp[0]", "over_arch[0]", *rows}
    with torch.no_grad():
        for name, values in rows.items():
            gates[name].copy_(torch.tensor(values))
    gated = outputs(model, batch())
    # (rows in != rows out everywhere, as in the full model: no learned shortcut becomes an identity)
    small = prune(model, full, spec(*layers(3, 3, 3, 1), over_arch=(8,)), method="gates")
    torch.testing.assert_close(outputs(small, batch()), gated)


def test_gates_trained_with_an_l1_penalty_switch_units_off():
    torch.manual_seed(0)
    full = spec(over_arch=(16,))
    model = build_model(full)
    gates = add_gates(model, full)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    for step in range(60):
        b = batch(index=step % 20)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(
            model(b.dense_features, b.sparse_features), b.labels)
        optimizer.zero_grad()
        (loss + 0.002 * gate_penalty(model)).backward()
        optimizer.step()
    g = gates["over_arch[0]"].detach().abs()
    assert (g < 0.2).sum() >= 4 and (g > 0.5).sum() >= 4
    kept = int((g > 0.2).sum())
    small = prune(model, full, spec(over_arch=(kept,)), method="gates")
    assert small.over_arch[0]._mlp[0]._linear.weight.shape[0] == kept

    def loss_of(m):
        b = batch(index=22)
        return float(torch.nn.functional.binary_cross_entropy_with_logits(outputs(m, b), b.labels))

    assert abs(loss_of(small) - loss_of(model)) < 0.02


def test_gates_need_gates():
    full = spec()
    with pytest.raises(ValueError, match="no gates; call"):
        prune(build_model(full), full, shrink(full, 0.5), method="gates")


def test_unknown_method_is_refused():
    full = spec()
    with pytest.raises(GrowthError, match="method: expected one of magnitude, gates, got 'l2'"):
        prune(build_model(full), full, shrink(full, 0.5), method="l2")
