"""The supernet's parts: mixed ops, weight-shared masks, gradients, derive(), E[cost]."""

import contextlib
import random

import pytest
import torch
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from autorec.arch import DotConfig
from autorec.blocks import build_block
from autorec.costs import arch_cost
from autorec.data import Schema, SparseFeature
from autorec.space import SearchSpace
from autorec.supernet import (
    Choice,
    ChoiceSet,
    ExpectedCost,
    MixedChoice,
    Supernet,
    SupernetConfig,
    SupernetError,
    width_mask,
)
from autorec.supernet.masked_mlp import MaskedMLP
from autorec.supernet.mixed import rms_rescale
from autorec.supernet.ops import SuperDot, SuperWukong
from autorec.supernet.warm import warm_start

SPACE = {
    "dim": [8], "dense_arch": [[8]], "over_arch": [[16], [16, 8]],
    "embedding": {"dim_ratio": [1, 0.5]},
    "layers": {
        "num": {"low": 1, "high": 2},
        "kinds": ["wukong", "dhen", "dlrm", "dcnv2", "mlp"],
        "wukong": {"n_fm": [2, 4], "n_lcb": [0, 2], "rank": [2, 4], "mlp": [[8], [16], [16, 8]]},
        "dhen": {"modules": [["dot"], ["dot", "linear"], ["attention", "dcn"]],
                 "ensemble": ["concat", "sum", "weighted_sum"], "n_out": [2, 3], "num_heads": [2],
                 "dcn_layers": [1]},
        "dlrm": {"n_passthrough": [0, 1], "self_interaction": [False, True]},
        "dcnv2": {"num_layers": {"low": 1, "high": 2}, "rank": [0, 4]},
        "mlp": {"hidden": [[8], [16]], "n_out": [2, 3]},
    },
}
SCHEMA = Schema(dense=("a", "b"), sparse=(SparseFeature("u", 10), SparseFeature("i", 7),
                                          SparseFeature("tags", 5, multi_hot=True)))


def make(space=None, over=(16,)) -> tuple[SearchSpace, Supernet]:
    space = SearchSpace.from_dict(space or SPACE)
    torch.manual_seed(0)
    return space, Supernet(space, SCHEMA, dim=8, dense_arch=(8,), over_arch=over)


def batch(b: int = 6) -> tuple[torch.Tensor, KeyedJaggedTensor]:
    g = torch.Generator().manual_seed(1)
    lengths = torch.tensor([1] * b + [1] * b + [2] * b)
    values = torch.cat([torch.randint(0, 10, (b,), generator=g), torch.randint(0, 7, (b,), generator=g),
                        torch.randint(0, 5, (2 * b,), generator=g)])
    kjt = KeyedJaggedTensor.from_lengths_sync(["u", "i", "tags"], values, lengths)
    return torch.randn(b, 2, generator=g), kjt


def randomize(net: Supernet, seed: int) -> None:
    """A random order of every choice's values, logits 100 apart: softmax is one-hot in float32."""
    rng = random.Random(seed)
    with torch.no_grad():
        for p in net.arch.logits:
            p.copy_(100.0 * torch.tensor(rng.sample(range(p.numel()), p.numel()), dtype=torch.float32))


@pytest.mark.parametrize("hard", [False, True])
def test_forward_shapes_and_every_layer_pads_to_its_widest_candidate(hard):
    _, net = make()
    dense, kjt = batch()
    weights = net.arch.sample(tau=1.0, hard=hard, generator=torch.Generator().manual_seed(0))
    assert net(dense, kjt, weights).shape == (6,)
    x = net.embed(dense, kjt, weights)
    assert x.shape == (6, net.f0, 8)
    for layer in net.layers:
        assert layer.num_out == max(op.num_out for op in layer.candidates.values())
        for op in layer.candidates.values():
            assert op(x, weights).shape == (6, op.num_out, 8)
        x = layer(x, weights)
        assert x.shape == (6, layer.num_out, 8)


def test_width_choices_share_one_max_size_op():
    base = {**SPACE, "layers": {**SPACE["layers"], "kinds": ["wukong"], "num": [1],
                                "wukong": {"n_fm": [4], "n_lcb": [2], "rank": [4], "mlp": [[16]]}}}
    wide = {**base, "layers": {**base["layers"],
                               "wukong": {"n_fm": [2, 3, 4], "n_lcb": [0, 1, 2], "rank": [1, 2, 4],
                                          "mlp": [[4], [8], [16]]}}}
    count = [sum(p.numel() for name, p in make(s)[1].named_parameters() if not name.startswith("arch."))
             for s in (base, wide)]
    assert count[0] == count[1]  # nine more width values, not one more weight
    one = MaskedMLP("m", ((16,),), 5, 3)
    many = MaskedMLP("m", ((4,), (8,), (16,)), 5, 3)
    assert sum(p.numel() for p in one.parameters()) == sum(p.numel() for p in many.parameters())


def test_a_masked_mlps_single_path_runs_in_the_layers_precision():
    from autorec.precision.layers import as_precision

    torch.manual_seed(0)
    mlp = MaskedMLP("m", ((8,), (16,)), in_size=32, out_size=32)
    x, widest = torch.randn(4, 32), torch.tensor([0.0, 1.0])  # the widest: no slice is partial
    chain = mlp.chains["1"]
    with as_precision(mlp, "mxfp4_e2m1"):
        quantised = mlp(x, widest)
        assert torch.allclose(quantised, chain[1](torch.relu(chain[0](x))))  # QuantLinear calls
    assert not torch.allclose(quantised, mlp(x, widest))  # fp32 outside the block differs


def test_a_smaller_width_is_the_prefix_of_the_same_weights():
    op = SuperWukong("w", {"n_fm": (2, 4), "n_lcb": (2,), "rank": (2, 4), "mlp": ((8,),)}, num_in=3, dim=4)
    x = torch.randn(5, 3, 4)
    small = {"w.n_fm": torch.tensor([1.0, 0.0]), "w.rank": torch.tensor([1.0, 0.0])}
    y = op(x, small)
    assert y[:, 2:4].abs().sum() == 0 and y[:, :2].abs().sum() > 0  # fm vectors 2, 3 absent
    with torch.no_grad():  # weights past rank 2 cannot matter at rank 2
        op.proj[:, 2:] = torch.randn(3, 2)
    assert torch.allclose(op(x, small), y)
    assert torch.equal(width_mask(torch.tensor([0.0, 1.0, 0.0]), (1, 2, 3), 4), torch.tensor([1.0, 1, 0, 0]))


@pytest.mark.parametrize("n_lcb", [(0,), (2, 3)])
def test_the_wukong_op_on_the_layer_kernels_gives_torchs_values_and_gradients(n_lcb):
    """At D 16 the op runs on autorec.native.wukong_layer's kernels: its output and the
    gradients of x, every weight and the architecture weights (masked rank, n_fm, n_lcb and MLP
    width) match torch's ops."""
    from autorec.native import wukong_layer as native

    torch.manual_seed(0)
    fields = {"n_fm": (2, 4), "n_lcb": n_lcb, "rank": (2, 4), "mlp": ((8,), (16,))}
    op = SuperWukong("w", fields, num_in=6, dim=16)
    x = torch.randn(9, 6, 16)
    runs = []
    for kernel in (True, False):
        op.zero_grad()
        leaf = x.clone().requires_grad_()
        weights = {f"w.{k}": torch.softmax(torch.arange(len(v), dtype=torch.float32), 0).requires_grad_()
                   for k, v in fields.items() if len(v) > 1}
        calls = []
        head = native.head
        native.head = lambda *a, _calls=calls, _head=head, **k: _calls.append(1) or _head(*a, **k)
        try:
            with (contextlib.nullcontext() if kernel else native.disabled()):
                y = op(leaf, weights)
        finally:
            native.head = head
        (y * torch.linspace(-1, 1, y.numel()).view_as(y)).sum().backward()
        grads = {n: p.grad for n, p in op.named_parameters() if p.grad is not None}
        runs.append((calls, y.detach(), leaf.grad, grads, {k: w.grad for k, w in weights.items()}))
    assert runs[0][0] == [1] and runs[1][0] == []
    torch.testing.assert_close(runs[0][1], runs[1][1], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(runs[0][2], runs[1][2], rtol=1e-4, atol=1e-5)
    assert runs[0][3].keys() == runs[1][3].keys()
    for name in runs[0][3]:
        torch.testing.assert_close(runs[0][3][name], runs[1][3][name], rtol=1e-4, atol=1e-5, msg=name)
    for name in runs[0][4]:
        torch.testing.assert_close(runs[0][4][name], runs[1][4][name], rtol=1e-4, atol=1e-5, msg=name)


def test_dot_op_at_one_hot_equals_the_dlrm_block():
    op = SuperDot("d", {"n_passthrough": (0, 1), "self_interaction": (False,)}, num_in=5, dim=4)
    block = build_block(DotConfig(n_passthrough=1), 5, 4)
    x = torch.randn(3, 5, 4)
    assert torch.equal(op(x, {"d.n_passthrough": torch.tensor([0.0, 1.0])}), block(x))


@pytest.mark.parametrize("rescale", [True, False])
def test_rescale_off_leaves_the_dot_and_cross_outputs_as_the_derived_blocks_give_them(rescale):
    space = SearchSpace.from_dict(SPACE)
    torch.manual_seed(0)
    net = Supernet(space, SCHEMA, dim=8, dense_arch=(8,), over_arch=(16,), rescale=rescale)
    layer = net.layers[0]
    assert layer.rescale == ({"dlrm", "dcnv2"} if rescale else set())
    x = 3 * torch.randn(2, layer.candidates["dlrm"].num_in, 8)
    weights = dict(net.arch.sample(1.0, hard=True, generator=torch.Generator().manual_seed(0)))
    kinds = net.arch.choices["layer0.kind"].values
    for kind in ("dlrm", "dcnv2"):
        weights["layer0.kind"] = torch.eye(len(kinds))[kinds.index(kind)]
        raw = layer.candidates[kind](x, weights)
        mixed = layer(x, weights)[:, : raw.shape[1]]
        assert torch.allclose(mixed, rms_rescale(raw) if rescale else raw)


def test_mixed_choice_skips_zero_weight_candidates():
    calls = []

    class Probe(torch.nn.Module):
        def __init__(self, name):
            super().__init__()
            self.name = name

        def forward(self, x, weights):
            calls.append(self.name)
            return x

    mix = MixedChoice("c", {"a": Probe("a"), "b": Probe("b")}, num_out=2)
    arch = ChoiceSet([Choice("c", ("a", "b"))])
    mix(torch.ones(1, 2, 1), arch.sample(1.0, hard=True, generator=torch.Generator().manual_seed(0)))
    assert len(calls) == 1
    with pytest.raises(ValueError, match="choice names repeat"):
        ChoiceSet([Choice("c", (1,)), Choice("c", (2,))])


@pytest.mark.parametrize("hard", [False, True])
def test_gradients_reach_the_architecture_logits(hard):
    _, net = make()
    dense, kjt = batch()
    weights = net.arch.sample(tau=1.0, hard=hard, generator=torch.Generator().manual_seed(3))
    torch.nn.functional.binary_cross_entropy_with_logits(net(dense, kjt, weights), torch.ones(6)).backward()
    for i in range(len(net.layers)):
        grad = net.arch.logit(f"layer{i}.kind").grad
        assert grad is not None and grad.abs().sum() > 0
    assert net.arch.logit("emb.u").grad.abs().sum() > 0
    if not hard:  # soft: every choice of every kind gets a gradient
        missing = [n for n in net.arch.choices if net.arch.logit(n).grad is None
                   or net.arch.logit(n).grad.abs().sum() == 0]
        assert missing == []


def test_expected_cost_has_gradients():
    _, net = make()
    cost = ExpectedCost(net, "flops")()
    cost.backward()
    assert net.arch.logit("layer0.kind").grad.abs().sum() > 0
    assert net.arch.logit("layer0.wukong.n_fm").grad.abs().sum() > 0
    assert net.arch.logit("emb.u").grad.abs().sum() > 0


@pytest.mark.parametrize("seed", range(8))
def test_derive_gives_a_spec_of_the_space_and_one_hot_cost_equals_the_analytic_cost(seed):
    space, net = make(over=(16, 8) if seed % 2 else (16,))
    randomize(net, seed)
    spec = net.derive()
    assert space.contains(spec)
    cost = arch_cost(spec)
    with torch.no_grad():
        assert float(ExpectedCost(net, "flops")()) == cost.forward_flops
        assert float(ExpectedCost(net, "params_bytes")()) == cost.dense_bytes
        assert float(ExpectedCost(net, "embedding_bytes")()) == cost.embedding_bytes


def test_derive_drops_skip_layers_the_space_does_not_list_and_falls_back_to_valid_values():
    space = {**SPACE, "layers": {**SPACE["layers"], "num": {"low": 1, "high": 3}}}
    space_obj, net = make(space)
    assert net.layer_kinds[0][-1] != "skip" and net.layer_kinds[2][-1] == "skip"
    with torch.no_grad():
        net.arch.logit("layer1.kind").copy_(torch.tensor([0, 0, 0, 0, 0, 9.0]))  # skip
    spec = net.derive()
    assert len(spec.layers) in (1, 2) and space_obj.contains(spec)
    samples = net.sample_specs(3, torch.Generator().manual_seed(0))
    assert 1 <= len(samples) <= 3 and all(space_obj.contains(s) for s in samples)


def test_warm_start_copies_the_embedding_prefix():
    _, net = make()
    randomize(net, 0)
    spec = net.derive()
    from autorec.models import build_model

    model = build_model(spec)
    copied = warm_start(net, model)
    for table in spec.tables:
        name = f"sparse_arch.embedding_bags.{table.name}.weight"
        assert name in copied
        src = net.state_dict()[name][:, : table.dim]
        assert torch.equal(model.state_dict()[name], src)


def test_bad_inputs_name_what_is_wrong():
    space = SearchSpace.from_dict(SPACE)
    with pytest.raises(SupernetError, match="dim: 16 is not among the choices"):
        Supernet(space, SCHEMA, dim=16, dense_arch=(8,), over_arch=(16,))
    with pytest.raises(SupernetError, match=r"over_arch: .* is not among the choices"):
        Supernet(space, SCHEMA, dim=8, dense_arch=(8,), over_arch=(99,))
    with pytest.raises(ValueError, match="tau"):
        SupernetConfig(tau_start=1.0, tau_end=2.0)
    with pytest.raises(ValueError, match="cost_metric: expected one of flops"):
        SupernetConfig(cost_metric="watts")
    with pytest.raises(ValueError, match="warmup_steps"):
        SupernetConfig(steps=3, warmup_steps=4)
    with pytest.raises(ValueError, match="cost metric: expected one of"):
        ExpectedCost(make()[1], "watts")


@pytest.mark.parametrize("layers", [
    {"kinds": ["wukong"], "num": {"low": 2, "high": 2},
     "wukong": {"n_fm": [2], "n_lcb": [2], "rank": [2], "mlp": [[8]]}},  # no choice at all
    {"kinds": ["dlrm"], "num": {"low": 1, "high": 2}},  # layer 0 has one kind, layer 1 dlrm/skip
])
def test_spaces_with_single_valued_choices_search_and_derive(layers):
    from autorec.data import load_dataset
    from autorec.supernet.search import SupernetSearch

    space = SearchSpace.from_dict({"dim": [8], "dense_arch": [[8]], "over_arch": [[16]],
                                   "layers": layers})
    data = load_dataset("synthetic", preset="tiny", num_samples=1000)
    result = SupernetSearch(space, data, 8, (8,), (16,),
                            SupernetConfig(steps=3, warmup_steps=1, batch_size=64)).fit()
    assert space.contains(result.spec)
    assert {layer.kind for layer in result.spec.layers} == set(layers["kinds"])


def test_a_mixed_choice_of_several_candidates_needs_its_weights():
    mix = MixedChoice("layer0.kind", {"a": torch.nn.Identity(), "b": torch.nn.Identity()}, 2)
    with pytest.raises(KeyError, match="no weights given for its 2 candidates"):
        mix(torch.ones(1, 2, 1), {})


SAME_DEPTH = {**SPACE, "over_arch": [[16, 8], [32, 16]]}


@pytest.mark.parametrize("seed", range(4))
def test_a_searched_over_arch_is_a_choice_with_exact_one_hot_cost_and_derive(seed):
    space, net = make(SAME_DEPTH, over=None)
    assert net.arch.choices["over_arch"].values == ((16, 8), (32, 16))
    randomize(net, seed)
    spec = net.derive()
    assert space.contains(spec) and spec.over_arch == net.arch.argmax()["over_arch"]
    with torch.no_grad():
        assert float(ExpectedCost(net, "flops")()) == arch_cost(spec).forward_flops
        assert float(ExpectedCost(net, "params_bytes")()) == arch_cost(spec).dense_bytes
    dense, kjt = batch()
    weights = net.arch.sample(tau=1.0, hard=True, generator=torch.Generator().manual_seed(seed))
    assert net(dense, kjt, weights).shape == (6,)


def test_a_searched_over_arch_gets_gradients_and_its_expected_cost_moves_with_it():
    _, net = make(SAME_DEPTH, over=None)
    dense, kjt = batch()
    weights = net.arch.sample(tau=1.0, hard=False, generator=torch.Generator().manual_seed(0))
    net(dense, kjt, weights).sum().backward()
    assert net.arch.logit("over_arch").grad is not None and net.arch.logit("over_arch").grad.abs().sum() > 0
    cost = ExpectedCost(net, "flops")
    with torch.no_grad():
        net.arch.logit("over_arch").copy_(torch.tensor([50.0, 0.0]))
        small = float(cost())
        net.arch.logit("over_arch").copy_(torch.tensor([0.0, 50.0]))
        large = float(cost())
    assert small < large


def test_an_over_arch_of_mixed_depths_cannot_be_searched():
    with pytest.raises(SupernetError, match=r"over_arch: to search it in the supernet, every value must "
                                            r"have the same number of layers, got \[\(16,\), \(16, 8\)\]"):
        make(over=None)
