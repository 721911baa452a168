"""Embedding-width layouts of the supernet (autorec.supernet.widths): shared prefixes or own columns."""

import pytest
import torch
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from autorec.data import Schema, SparseFeature
from autorec.space import SearchSpace
from autorec.supernet import Supernet, SupernetConfig, SupernetError
from autorec.supernet.mixed import projected_width
from autorec.supernet.widths import embedding_widths

SPACE = {"dim": [16], "dense_arch": [[8]], "over_arch": [[16]], "embedding": {"dim": [0, 4, 8, 16]},
         "layers": {"num": [1], "kinds": ["dlrm", "dcnv2"], "dcnv2": {"rank": [0]}}}
SCHEMA = Schema(dense=("a",), sparse=(SparseFeature("u", 10), SparseFeature("i", 7)))


def _net(columns: str) -> Supernet:
    torch.manual_seed(0)
    return Supernet(SearchSpace.from_dict(SPACE), SCHEMA, dim=16, dense_arch=(8,), over_arch=(16,),
                    width_columns=columns)


def _batch(b: int = 5) -> tuple[torch.Tensor, KeyedJaggedTensor]:
    g = torch.Generator().manual_seed(1)
    values = torch.cat([torch.randint(0, 10, (b,), generator=g), torch.randint(0, 7, (b,), generator=g)])
    kjt = KeyedJaggedTensor.from_lengths_sync(["u", "i"], values, torch.ones(2 * b, dtype=torch.long))
    return torch.randn(b, 1, generator=g), kjt


def _path(net: Supernet, width: int, kind: str = "dcnv2") -> dict[str, torch.Tensor]:
    weights = {}
    for name, choice in net.arch.choices.items():
        value = width if name.startswith("emb.") else kind if name == "layer0.kind" else choice.values[0]
        weights[name] = torch.nn.functional.one_hot(torch.tensor(choice.values.index(value)),
                                                    len(choice.values)).float()
    return weights


def test_layouts_place_each_width():
    space = SearchSpace.from_dict(SPACE)
    shared, own = embedding_widths(space, 16), embedding_widths(space, 16, "own")
    assert (shared.widths, shared.offsets, shared.table_width) == ((0, 4, 8, 16), (0, 0, 0, 0), 16)
    assert (own.widths, own.offsets, own.table_width) == ((0, 4, 8, 16), (0, 0, 4, 12), 28)
    ratios = SearchSpace.from_dict({**SPACE, "embedding": {"dim_ratio": [0.25, 1]}})
    assert embedding_widths(ratios, 16, "own").offsets == (0, 4)
    assert _net("own").sparse_arch.embedding_bags["t_u"].weight.shape == (10, 28)


@pytest.mark.parametrize("width,columns", [(4, range(0, 4)), (8, range(4, 12)), (16, range(12, 28))])
def test_a_path_trains_only_its_own_columns(width, columns):
    net = _net("own")
    dense, kjt = _batch()
    net(dense, kjt, _path(net, width)).sum().backward()
    grad = net.sparse_arch.embedding_bags["t_u"].weight.grad
    touched = {int(c) for c in torch.nonzero(grad.abs().sum(0)).flatten()}
    assert touched == set(columns)


def test_shared_layout_trains_a_prefix():
    net = _net("shared")
    dense, kjt = _batch()
    net(dense, kjt, _path(net, 8)).sum().backward()
    grad = net.sparse_arch.embedding_bags["t_u"].weight.grad
    assert {int(c) for c in torch.nonzero(grad.abs().sum(0)).flatten()} == set(range(8))


@pytest.mark.parametrize("width", [0, 4, 8, 16])
def test_compact_and_padded_forward_agree_on_own_columns(width):
    net = _net("own")
    dense, kjt = _batch()
    weights = _path(net, width)
    compact = net(dense, kjt, weights)
    net.compact = False
    assert torch.allclose(compact, net(dense, kjt, weights), atol=1e-5)


def test_soft_weights_mix_each_width_on_its_own_columns():
    proj = torch.nn.Linear(14, 8, bias=False)
    e = torch.randn(3, 14)
    widths, offsets = (0, 2, 4, 8), (0, 0, 2, 6)
    w = torch.tensor([0.1, 0.2, 0.3, 0.4])
    expected = sum(float(w[c]) * projected_width(e, torch.eye(4)[c], proj, widths, 8, offsets)
                   for c in range(4))
    assert torch.allclose(projected_width(e, w, proj, widths, 8, offsets), expected, atol=1e-6)


def test_unknown_layout_is_refused_by_name():
    with pytest.raises(SupernetError, match="width_columns: expected one of shared, own, got 'wide'"):
        _net("wide")
    with pytest.raises(ValueError, match="supernet width_columns: expected one of shared, own, got 'wide'"):
        SupernetConfig(width_columns="wide")
