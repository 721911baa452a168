import dataclasses

import pytest
import torch
from torchrec.models.dlrm import DLRM
from torchrec.modules.embedding_modules import EmbeddingBagCollection
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from autorec.arch import ArchSpec, DotConfig, TableSpec, WukongConfig
from autorec.data import Schema, SparseFeature
from autorec.models import build_model, embedding_configs
from autorec.presets import PRESETS, preset

SCHEMA = Schema(dense=("x", "y", "z"), sparse=(SparseFeature("u", 50), SparseFeature("i", 30),
                                                SparseFeature("g", 10, multi_hot=True)))


def kjt(batch: int, seed: int = 0) -> KeyedJaggedTensor:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.cat([torch.ones(2 * batch, dtype=torch.int64),
                         torch.randint(0, 4, (batch,), generator=g)])
    values = torch.cat([torch.randint(0, 30, (2 * batch,), generator=g),
                        torch.randint(0, 10, (int(lengths[2 * batch:].sum()),), generator=g)])
    return KeyedJaggedTensor.from_lengths_sync(["u", "i", "g"], values, lengths)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_build_and_give_one_logit_per_sample(name):
    torch.manual_seed(0)
    spec = preset(name, SCHEMA)
    assert spec.name == name and ArchSpec.from_json(spec.to_json()) == spec
    logits = build_model(spec)(torch.randn(5, 3), kjt(5))
    assert logits.shape == (5,) and torch.isfinite(logits).all()


def test_dlrm_matches_torchrec_dlrm_with_the_same_weights():
    torch.manual_seed(0)
    dim = 8
    spec = preset("dlrm", SCHEMA, dim=dim).replace(dense_arch=(16,), over_arch=(32, 16))
    ours = build_model(spec)
    ref = DLRM(embedding_bag_collection=EmbeddingBagCollection(tables=embedding_configs(spec)),
               dense_in_features=3, dense_arch_layer_sizes=[16, dim], over_arch_layer_sizes=[32, 16, 1])
    ref.sparse_arch.embedding_bag_collection.load_state_dict(ours.sparse_arch.state_dict())
    ref.dense_arch.model.load_state_dict(ours.dense_arch.state_dict())
    # Our dot block packs its output into D-wide rows and zero-pads the last: the reference's
    # first over-arch layer takes the unpadded width, so it gets the matching columns.
    ref_first = ref.over_arch.model[0]._mlp[0]._linear
    ours_first = ours.over_arch[0]._mlp[0]._linear
    width = ref_first.in_features
    assert width == dim + 4 * 3 // 2 and ours_first.in_features >= width
    with torch.no_grad():
        ref_first.weight.copy_(ours_first.weight[:, :width])
        ref_first.bias.copy_(ours_first.bias)
        for p_ref, p_ours in zip(list(ref.over_arch.model.parameters())[2:],
                                 list(ours.over_arch.parameters())[2:], strict=True):
            p_ref.copy_(p_ours)
    dense, sparse = torch.randn(6, 3), kjt(6)
    torch.testing.assert_close(ours(dense, sparse), ref(dense, sparse).squeeze(-1), rtol=1e-5, atol=1e-6)


def test_narrow_tables_are_projected_to_the_model_width():
    spec = ArchSpec(dim=8, n_dense=3, dense_arch=(8,), over_arch=(8,), layers=(WukongConfig(),),
                    tables=(TableSpec(name="a", features=("u", "i"), num_embeddings=50, dim=8),
                            TableSpec(name="b", features=("g",), num_embeddings=10, dim=4)))
    model = build_model(spec)
    assert set(model.projections) == {"g"}
    x0 = model.embed(torch.randn(4, 3), kjt(4))
    assert x0.shape == (4, 4, 8)
    assert model(torch.randn(4, 3), kjt(4)).shape == (4,)


def test_model_without_dense_features():
    spec = preset("dlrm", Schema(dense=(), sparse=SCHEMA.sparse))
    assert spec.n_dense == 0 and spec.num_inputs == 3
    model = build_model(spec.replace(layers=(DotConfig(n_passthrough=0),)))
    assert model(torch.empty(4, 0), kjt(4)).shape == (4,)


@pytest.mark.parametrize("name", ["dlrm", "wukong"])
def test_under_autocast_the_last_block_reaches_the_over_arch_in_bf16_with_the_same_training(name):
    """DLRM's dots and Wukong's last layer feed the over-arch's plain linear, so under bf16
    autocast they come out in bf16 (their kernels write them so) with the same logits and
    gradients, bit for bit, as the fp32 output that linear would cast; a quantised first
    linear, or a block that feeds another block, keeps its dtype."""
    spec = preset(name, SCHEMA)
    model = build_model(spec)
    assert model.layers[-1].feeds_linear
    dense, sparse = torch.randn(32, 3), kjt(32)
    runs = []
    for feeds in (True, False):
        model.layers[-1].feeds_linear = feeds
        model.zero_grad()
        seen: list[torch.dtype] = []
        handle = model.layers[-1].register_forward_hook(lambda m, i, o, seen=seen: seen.append(o.dtype))
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(dense, sparse)
        handle.remove()
        logits.float().square().mean().backward()
        runs.append((seen[0], logits.detach(), {n: p.grad.clone() for n, p in model.named_parameters()
                                                if p.grad is not None}))
    assert (runs[0][0], runs[1][0]) == (torch.bfloat16, torch.float32)
    torch.testing.assert_close(runs[0][1], runs[1][1], rtol=0, atol=0)
    assert runs[0][2].keys() == runs[1][2].keys()
    for name, grad in runs[0][2].items():
        torch.testing.assert_close(grad, runs[1][2][name], rtol=0, atol=0, msg=name)
    two = build_model(ArchSpec(name="two", dim=4, tables=spec.tables, n_dense=3, dense_arch=(8,),
                               layers=(DotConfig(), DotConfig()), over_arch=(8,)))
    assert [block.feeds_linear for block in two.layers] == [False, True]
    quantised = build_model(dataclasses.replace(spec, over_arch_precision="fp8_e4m3"))
    assert not quantised.layers[-1].feeds_linear


def _spy_on_parts(name: str, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that gets a 1 each time ``name``'s first block runs its kernel on X in parts."""
    from autorec.native import pair_dots as native_dots
    from autorec.native import wukong_layer as native_wukong

    calls: list[int] = []
    if name == "dlrm":
        real = native_dots.forward_parts
        monkeypatch.setattr(native_dots, "forward_parts", lambda *a, **k: calls.append(1) or real(*a, **k))
    else:
        head = native_wukong.head
        monkeypatch.setattr(native_wukong, "head", lambda x, *a, **k: (
            calls.append(1) if not isinstance(x, torch.Tensor) else None) or head(x, *a, **k))
    return calls


@pytest.mark.parametrize("name", ["dlrm", "wukong"])
@pytest.mark.parametrize("dim", [16, 8])
@pytest.mark.parametrize("low", [False, True], ids=["fp32", "bf16-autocast"])
def test_the_first_block_reads_its_input_in_parts_with_the_same_training(name, dim, low, monkeypatch):
    """DLRM's dots and Wukong's first layer read the dense vector and the pooled embeddings where
    they lie (no concatenation): the logits and every gradient are those of the concatenated
    input bit for bit; a hook on the block gets the concatenated tensor, and D 8 (no kernel for
    parts) takes the concatenation inside the block."""
    calls = _spy_on_parts(name, monkeypatch)
    torch.manual_seed(0)
    schema = Schema(dense=("d0", "d1", "d2"), sparse=tuple(SparseFeature(f"s{i}", 10 + i) for i in range(5)))
    model = build_model(preset(name, schema, dim=dim))
    assert type(model.layers[0]).takes_parts
    sparse = KeyedJaggedTensor.from_lengths_sync([f"s{i}" for i in range(5)], torch.arange(5 * 37) % 10,
                                                 torch.ones(5 * 37, dtype=torch.long))
    dense = torch.randn(37, 3)
    results, seen = [], []
    for hooked in (False, True):
        hook = model.layers[0].register_forward_pre_hook
        handle = hook(lambda m, args: seen.append(args[0])) if hooked else None
        model.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=low):
            logits = model(dense, sparse)
        logits.float().sum().backward()
        results.append((logits.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None]))
        if handle is not None:
            handle.remove()
            assert isinstance(seen[0], torch.Tensor) and seen[0].shape == (37, 6, dim)
    assert calls == ([1] if dim == 16 else [])  # the parts path ran once, in the unhooked pass
    assert torch.equal(results[0][0], results[1][0])
    assert all(torch.equal(a, b) for a, b in zip(results[0][1], results[1][1], strict=True))
