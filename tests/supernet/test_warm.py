"""Warm start of a derived model from a one-shot supernet's embeddings (autorec.supernet.warm)."""

import dataclasses

import pytest
import torch
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from autorec.data import Schema, SparseFeature
from autorec.models import RecModel
from autorec.space import SearchSpace
from autorec.supernet import Supernet
from autorec.supernet.warm import warm_embeddings

SPACE = {"dim": [16], "dense_arch": [[8]], "over_arch": [[16]],
         "embedding": {"dim": [0, 4, 8, 16], "hash": [1, 0.5]},
         "layers": {"num": [1], "kinds": ["dlrm", "dcnv2"], "dcnv2": {"rank": [0]}}}
SCHEMA = Schema(dense=("a",), sparse=(SparseFeature("u", 10), SparseFeature("i", 7), SparseFeature("s", 9)))


def _net(columns: str, hash_rows: str = "shared") -> Supernet:
    torch.manual_seed(0)
    net = Supernet(SearchSpace.from_dict(SPACE), SCHEMA, dim=16, dense_arch=(8,), over_arch=(16,),
                   width_columns=columns, hash_rows=hash_rows)
    with torch.no_grad():  # every column and row its own value, so a wrong slice shows
        for table in net.sparse_arch.embedding_bags.values():
            table.weight.copy_(torch.randn_like(table.weight))
    return net


def _batch(b: int = 6) -> tuple[torch.Tensor, KeyedJaggedTensor]:
    g = torch.Generator().manual_seed(1)
    values = torch.cat([torch.randint(0, card, (b,), generator=g) for card in (10, 7, 9)])
    kjt = KeyedJaggedTensor.from_lengths_sync(["u", "i", "s"], values, torch.ones(3 * b, dtype=torch.long))
    return torch.randn(b, 1, generator=g), kjt


def _one_hot(net: Supernet, values: dict[str, object]) -> dict[str, torch.Tensor]:
    out = {}
    for name, choice in net.arch.choices.items():
        index = choice.values.index(values[name]) if name in values else 0
        out[name] = torch.nn.functional.one_hot(torch.tensor(index), len(choice.values)).float()
    return out


@pytest.mark.parametrize("columns", ["own", "shared"])
@pytest.mark.parametrize("widths,hashes", [((4, 8, 16), (1, 0.5, 1)), ((8, 0, 4), (0.5, 0.5, 1)),
                                           ((16, 16, 0), (1, 1, 0.5))])
def test_the_warm_model_embeds_as_the_supernets_path_did(columns, widths, hashes):
    net = _net(columns)
    values = {"layer0.kind": "dlrm"}
    for (group, _), width, fraction in zip(net.groups, widths, hashes, strict=True):
        values.update({f"emb.{group}": width, f"emb.{group}.hash": fraction})
    weights = _one_hot(net, values)
    spec = net.derive(values)
    model = RecModel(spec)
    copied = warm_embeddings(net, net, model)
    live = [i for i, width in enumerate(widths) if width]
    assert {f"sparse_arch.embedding_bags.t_{f}.weight" for f in spec.feature_names} <= set(copied)
    dense, kjt = _batch()
    with torch.no_grad():
        want = net.embed(dense, kjt, weights)  # [B, 1 + 3, D]: the dense vector, zeros where dropped
        got = model.embed(dense, kjt)  # [B, 1 + live, D]
    torch.testing.assert_close(got, want[:, [0, *(1 + i for i in live)]])


def test_a_table_wider_than_any_width_choice_is_refused_by_name():
    net = _net("own")
    spec = net.derive({"layer0.kind": "dlrm"})
    wide = spec.replace(tables=tuple(dataclasses.replace(t, dim=12) if i == 0 else t
                                     for i, t in enumerate(spec.tables)))
    with pytest.raises(ValueError, match=rf"{spec.tables[0].name}\.weight is 12 wide.*\[4, 8, 16\]"):
        warm_embeddings(net, net, RecModel(wide))


def test_a_table_with_more_rows_than_the_supernets_is_refused_by_name_before_any_copy():
    net = _net("own")
    spec = net.derive({"layer0.kind": "dlrm", **{f"emb.{group}": 8 for group, _ in net.groups}})
    assert len(spec.tables) == 3
    last = len(spec.tables) - 1  # checked after the others: a copy as it goes would have begun
    rows = spec.tables[last].num_embeddings
    tall = spec.replace(tables=tuple(dataclasses.replace(t, num_embeddings=rows + 5) if i == last else t
                                     for i, t in enumerate(spec.tables)))
    model = RecModel(tall)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(ValueError, match=rf"{spec.tables[last].name}\.weight has {rows + 5} rows, "
                                         rf"the supernet's {rows}"):
        warm_embeddings(net, net, model)
    after = model.state_dict()
    assert all(torch.equal(after[k], v) for k, v in before.items())


def test_a_supernet_with_own_hash_rows_is_refused():
    net = _net("shared", hash_rows="own")
    with pytest.raises(ValueError, match="hash_rows: own keeps each hash size's rows in its own block"):
        warm_embeddings(net, net, RecModel(net.derive({"layer0.kind": "dlrm"})))
