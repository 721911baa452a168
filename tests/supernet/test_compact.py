"""A single path on its live vectors computes what the padded supernet computes."""

import pytest
import torch
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from autorec.data import Schema, SparseFeature
from autorec.space import SearchSpace
from autorec.supernet import Supernet
from autorec.supernet.compact import single_path

# Every kind the one-shot benchmark searches, with the per-feature widths (0 drops) and hash
# sizes, a masked over-arch, and widths that leave padded vectors between and after layers.
SPACE = {
    "dim": [8], "dense_arch": [[8]], "over_arch": [[16, 8], [32, 16]],
    "embedding": {"dim": [0, 4, 8], "hash": [1, 0.5], "groups": "per_feature"},
    "layers": {
        "num": {"low": 1, "high": 2},
        "kinds": ["dcnv2", "wukong", "dhen", "dlrm", "mlp"],
        "dcnv2": {"num_layers": [1, 2], "rank": [0, 4]},
        "wukong": {"n_fm": [2, 4], "n_lcb": [0, 2, 3], "rank": [2, 4], "mlp": [[8], [16], []]},
        "dhen": {"modules": [["dot", "dcn"], ["dot", "attention", "dcn"], ["linear", "conv"]],
                 "ensemble": ["concat", "sum", "weighted_sum"], "n_out": [2, 3], "num_heads": [2],
                 "dcn_layers": [1]},
        "dlrm": {"n_passthrough": [0, 1], "self_interaction": [False, True]},
        "mlp": {"hidden": [[8], [16]], "n_out": [2, 3]},
    },
}
SCHEMA = Schema(dense=("a", "b"), sparse=tuple(SparseFeature(f"f{i}", 7 + i, multi_hot=i == 2)
                                               for i in range(5)))


def _batch(b: int = 16) -> tuple[torch.Tensor, KeyedJaggedTensor]:
    g = torch.Generator().manual_seed(1)
    lengths = torch.cat([torch.full((b,), 2 if i == 2 else 1) for i in range(5)])
    values = torch.cat([torch.randint(0, 7 + i, (int(lengths[i * b:(i + 1) * b].sum()),), generator=g)
                        for i in range(5)])
    kjt = KeyedJaggedTensor.from_lengths_sync([f.name for f in SCHEMA.sparse], values, lengths)
    return torch.randn(b, 2, generator=g), kjt


def _net(**space_changes) -> Supernet:
    space = SearchSpace.from_dict({**SPACE, **space_changes})
    torch.manual_seed(0)
    return Supernet(space, SCHEMA, dim=8, dense_arch=(8,), over_arch=None)


def _path(net: Supernet, seed: int) -> dict[str, torch.Tensor]:
    return net.arch.sample(1.0, hard=True, generator=torch.Generator().manual_seed(seed), uniform=True)


def _loss_and_grads(net: Supernet, weights, compact: bool) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    net.compact = compact
    net.zero_grad()
    dense, kjt = _batch()
    logits = net(dense, kjt, weights)
    (logits.sigmoid() * torch.linspace(-1, 1, logits.numel())).sum().backward()
    grads = {n: p.grad.clone() for n, p in net.named_parameters() if p.grad is not None}
    return logits.detach(), grads


@pytest.mark.parametrize("seed", range(40))
def test_a_single_path_gives_the_padded_logits_and_gradients(seed):
    net = _net()
    weights = _path(net, seed)
    assert single_path(weights)
    padded_calls = []  # the ops with a live-vector form must not run their padded forward
    hooks = [op.register_forward_hook(lambda *_: padded_calls.append(1)) for layer in net.layers
             for kind, op in layer.candidates.items() if kind in ("dcnv2", "wukong", "dhen", "dlrm")]
    compact, compact_grads = _loss_and_grads(net, weights, compact=True)
    for hook in hooks:
        hook.remove()
    assert padded_calls == []
    padded, padded_grads = _loss_and_grads(net, weights, compact=False)
    torch.testing.assert_close(compact, padded, rtol=1e-4, atol=1e-5)
    assert set(compact_grads) <= set(padded_grads)
    for name, grad in padded_grads.items():
        # a part the path masks whole (n_lcb 0) is not run: no gradient, where padded gives zeros
        mine = compact_grads.get(name, torch.zeros_like(grad))
        torch.testing.assert_close(mine, grad, rtol=1e-4, atol=1e-5, msg=name)


def test_paths_that_drop_and_narrow_run_on_fewer_vectors():
    net = _net(layers={**SPACE["layers"], "num": [2], "kinds": ["wukong", "dcnv2"]})
    weights = _path(net, 3)
    for name in net.arch.choices:  # drop f0 and f3, the narrowest Wukong
        if name.startswith("emb.") and not name.endswith(".hash"):
            weights[name] = torch.tensor([1.0, 0.0, 0.0]) if name in ("emb.f0", "emb.f3") \
                else torch.tensor([0.0, 0.0, 1.0])
    weights["layer0.kind"], weights["layer1.kind"] = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])
    weights["layer0.wukong.n_fm"] = torch.tensor([1.0, 0.0])
    weights["layer0.wukong.n_lcb"] = torch.tensor([1.0, 0.0, 0.0])
    seen = []
    cross = net.layers[1].candidates["dcnv2"]
    hook = cross.register_forward_hook(lambda *_: seen.append("padded"))
    compact, _ = _loss_and_grads(net, weights, compact=True)
    assert seen == []  # the cross layer ran on the live columns, not through its padded forward
    padded, _ = _loss_and_grads(net, weights, compact=False)
    hook.remove()
    assert seen == ["padded"]
    torch.testing.assert_close(compact, padded, rtol=1e-4, atol=1e-5)


def test_soft_or_differentiable_weights_run_padded():
    net = _net()
    soft = net.arch.sample(1.0, hard=False, generator=torch.Generator().manual_seed(0))
    assert not single_path(soft)
    hard = net.arch.sample(1.0, hard=True, generator=torch.Generator().manual_seed(0))
    assert not single_path(hard)  # straight-through: the logits need the padded masks' gradient
    assert single_path(_path(net, 0))
