"""Per-layer precision as a mixed op of the supernet: one set of weights run in each format."""

import pytest
import torch

from autorec.costs import arch_cost
from autorec.data import load_dataset
from autorec.space import SearchSpace
from autorec.supernet import ExpectedCost, Supernet, SupernetConfig, SupernetSearch
from tests.supernet.test_supernet import SCHEMA, SPACE, batch, make, randomize

FORMATS = ["fp32", "mxfp8_e4m3", "mxfp4_e2m1"]
KINDS = ["wukong", "dhen", "dlrm", "dcnv2", "mlp"]


def with_formats(formats: list[str]) -> dict:
    return {**SPACE, "layers": {**SPACE["layers"], "precision": formats}}


def dense_params(net: Supernet) -> int:
    arch = {id(p) for p in net.arch_parameters()}
    return sum(p.numel() for p in net.parameters() if id(p) not in arch)


def one_hot(net: Supernet, choice: str, value) -> None:
    values = net.arch.choices[choice].values
    with torch.no_grad():
        net.arch.logit(choice).copy_(torch.tensor([100.0 if v == value else 0.0 for v in values]))


def test_the_precision_choice_exists_only_when_the_space_offers_more_than_one_format():
    _, single = make(with_formats(["mxfp8_e4m3"]))
    assert not [n for n in single.arch.choices if "precision" in n]
    assert {c.precision for c in single.derive().layers} == {"mxfp8_e4m3"}
    _, net = make(with_formats(FORMATS))
    assert [n for n in net.arch.choices if "precision" in n] == ["layer0.precision", "layer1.precision"]
    assert net.arch.choices["layer0.precision"].values == tuple(FORMATS)


def test_formats_share_one_set_of_weights():
    counts = {n: dense_params(make(with_formats(FORMATS[:n]))[1]) for n in (1, 2, 3)}
    assert len(set(counts.values())) == 1, counts
    _, net = make(with_formats(FORMATS))
    names = list(net.state_dict())
    assert len(names) == len(set(names)) and not any("fp32" in n or "mxfp" in n for n in names)


@pytest.mark.parametrize("kind", KINDS)
def test_the_precision_weights_change_the_output_where_the_kind_has_weights(kind):
    _, net = make(with_formats(FORMATS))
    randomize(net, 0)
    dense, kjt = batch()
    one_hot(net, "layer0.kind", kind)
    one_hot(net, "layer1.kind", "dlrm")  # no weights: only layer 0's format matters
    outputs = {}
    with torch.no_grad():
        for fmt in FORMATS:
            one_hot(net, "layer0.precision", fmt)
            outputs[fmt] = net(dense, kjt, net.arch.expected())
    assert torch.isfinite(outputs["fp32"]).all()
    if kind == "dlrm":  # dot products of two activations stay in fp32, as in the built model
        assert torch.equal(outputs["fp32"], outputs["mxfp4_e2m1"])
    else:
        assert not torch.allclose(outputs["fp32"], outputs["mxfp4_e2m1"], atol=1e-6)
        assert not torch.allclose(outputs["mxfp8_e4m3"], outputs["mxfp4_e2m1"], atol=1e-6)
    # the candidates leave the shared modules as they found them
    assert not any(hasattr(m, "precision") and m.precision != "fp32" for m in net.modules())


@pytest.mark.parametrize("hard", [False, True])
def test_gradients_reach_the_precision_logits(hard):
    _, net = make(with_formats(FORMATS))
    one_hot(net, "layer0.kind", "wukong")
    one_hot(net, "layer1.kind", "mlp")
    for name in ("layer0.kind", "layer1.kind"):
        net.arch.logit(name).data.zero_()
    dense, kjt = batch()
    weights = net.arch.sample(tau=1.0, hard=hard, generator=torch.Generator().manual_seed(3))
    loss = torch.nn.functional.binary_cross_entropy_with_logits(net(dense, kjt, weights), torch.ones(6))
    loss.backward()
    for i in range(2):
        grad = net.arch.logit(f"layer{i}.precision").grad
        assert grad is not None and grad.abs().sum() > 0


@pytest.mark.parametrize("seed", range(6))
def test_derive_writes_the_chosen_precisions_and_one_hot_cost_equals_the_analytic_cost(seed):
    space = SearchSpace.from_dict(with_formats(FORMATS))
    torch.manual_seed(0)
    net = Supernet(space, SCHEMA, dim=8, dense_arch=(8,), over_arch=(16,))
    randomize(net, seed)
    one_hot(net, "layer0.kind", KINDS[seed % len(KINDS)])  # every kind with a format at least once
    spec = net.derive()
    assert space.contains(spec)
    chosen = net.arch.argmax()
    for i, layer in enumerate(spec.layers):
        assert layer.precision == chosen[f"layer{i}.precision"]
    cost = arch_cost(spec)
    with torch.no_grad():
        assert float(ExpectedCost(net, "params_bytes")()) == cost.dense_bytes
        assert float(ExpectedCost(net, "flops")()) == cost.forward_flops
    # the same architecture all in fp32 costs the same FLOPs and, with any format below fp32, more bytes
    for i in range(2):
        one_hot(net, f"layer{i}.precision", "fp32")
    fp32 = arch_cost(net.derive())
    assert fp32.forward_flops == cost.forward_flops
    assert fp32.dense_bytes >= cost.dense_bytes


def test_expected_bytes_prefer_the_smaller_formats():
    _, net = make(with_formats(FORMATS))
    ExpectedCost(net, "params_bytes")().backward()
    grad = net.arch.logit("layer0.precision").grad  # d E[bytes] / d logit, at uniform logits
    assert grad[0] > grad[1] > grad[2]  # fp32 raises the bytes most, MXFP4 lowers them most
    net.arch.zero_grad()
    ExpectedCost(net, "flops")().backward()
    assert net.arch.logit("layer0.precision").grad.abs().max() == 0


def test_a_search_over_formats_runs_and_derives_a_mixed_precision_spec():
    space = SearchSpace.from_dict({
        "dim": [8], "dense_arch": [[8]], "over_arch": [[16]],
        "layers": {"num": [2], "kinds": ["wukong", "mlp"], "precision": FORMATS,
                   "wukong": {"n_fm": [2], "n_lcb": [2], "rank": [2], "mlp": [[16]]},
                   "mlp": {"hidden": [[16]], "n_out": [2]}},
    })
    data = load_dataset("synthetic", preset="tiny", num_samples=600)
    config = SupernetConfig(steps=8, warmup_steps=2, batch_size=64, cost_metric="params_bytes",
                            cost_lambda=1.0, arch_lr=0.2)
    run = SupernetSearch(space, data, dim=8, dense_arch=(8,), over_arch=(16,), config=config)
    result = run.fit()
    assert space.contains(result.spec)
    assert {layer.precision for layer in result.spec.layers} <= set(FORMATS)
    moved = run.supernet.arch.logit("layer0.precision").detach()
    assert moved.abs().sum() > 0  # the architecture steps updated the precision logits
