"""ArchSpec.towers: validation (errors name the key), JSON round trip, and the built model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from autorec.arch import ArchSpec, ArchSpecError, DotConfig, MLPConfig, TableSpec, TowerSpec, WukongConfig
from autorec.models import build_model

FEATURES = ("a", "b", "c", "d", "e")


def _spec(**changes: object) -> ArchSpec:
    tables = (*(TableSpec(name=f"t_{f}", features=(f,), num_embeddings=20, dim=8) for f in "abc"),
              TableSpec(name="t_de", features=("d", "e"), num_embeddings=30, dim=4))
    base = dict(dim=8, n_dense=3, dense_arch=(16,), tables=tables, layers=(DotConfig(),), over_arch=(16,),
                towers=TowerSpec(groups=(("a", "d", "e"), ("c", "b")), module=DotConfig(n_passthrough=0),
                                 n_out=2))
    return ArchSpec(**{**base, **changes})


def _batch(batch: int = 4) -> tuple[torch.Tensor, KeyedJaggedTensor]:
    lengths = torch.ones(batch * len(FEATURES), dtype=torch.long)
    return torch.randn(batch, 3), KeyedJaggedTensor.from_lengths_sync(
        list(FEATURES), torch.arange(batch * len(FEATURES)) % 20, lengths)


def test_json_round_trip() -> None:
    spec = _spec()
    back = ArchSpec.from_json(spec.to_json())
    assert back == spec and back.towers == spec.towers
    assert json.loads(spec.to_json())["towers"]["module"]["kind"] == "dlrm"


def test_arch_json_without_towers_still_loads_and_writes_none() -> None:
    data = json.loads(_spec().to_json())
    del data["towers"]
    spec = ArchSpec.from_dict(data)
    assert spec.towers is None
    assert "towers" not in spec.to_dict()
    assert spec.num_inputs == 1 + len(FEATURES)


def test_towers_set_the_stack_input_width() -> None:
    spec = _spec()
    assert spec.num_inputs == 1 + 2 * 2
    assert spec.layer_widths()[0] == 5


@pytest.mark.parametrize(("groups", "where", "what"), [
    ((("a", "d", "e"), ("c", "x")), r"towers\.groups\[1\]\[1\]", "unknown feature 'x'"),
    ((("a", "d", "e"), ("c", "a", "b")), r"towers\.groups\[1\]\[1\]", "already in towers.groups"),
    ((("a", "d", "e"), ("c",)), r"towers\.groups", "missing b"),
    ((("a", "d", "b"), ("c", "e")), r"towers\.groups\[1\]", "table 't_de' is split"),
    ((), r"towers\.groups", "non-empty list"),
    ((("a", "b", "c", "d", "e"), ()), r"towers\.groups\[1\]", "non-empty list"),
])
def test_bad_groups_name_the_key(groups: tuple, where: str, what: str) -> None:
    with pytest.raises(ArchSpecError, match=where) as info:
        _spec(towers=TowerSpec(groups=groups, module=DotConfig(n_passthrough=0)))
    assert what in str(info.value)


def test_bad_module_and_n_out_name_the_key() -> None:
    with pytest.raises(ArchSpecError, match=r"towers\.n_out: expected an integer >= 1, got 0"):
        _spec(towers=TowerSpec(groups=(FEATURES,), module=DotConfig(), n_out=0))
    with pytest.raises(ArchSpecError, match=r"towers\.module\.rank"):
        _spec(towers=TowerSpec(groups=(FEATURES,), module=WukongConfig(rank=0)))
    # DLRM without passthrough or self-dots needs 2+ features: a one-feature tower cannot take it.
    fit = r"towers\.module: does not fit towers\.groups\[1\] \(1 features\)"
    with pytest.raises(ArchSpecError, match=fit):
        _spec(towers=TowerSpec(groups=(("a", "b", "d", "e"), ("c",)),
                               module=DotConfig(n_passthrough=0)))


ALL = [list(FEATURES)]


@pytest.mark.parametrize(("data", "where"), [
    ({"groups": "a", "module": {"kind": "dlrm"}}, "towers.groups: expected a list of lists"),
    ({"groups": ALL, "module": {"kind": "moe"}}, "towers.module.kind: expected one of"),
    ({"groups": ALL}, "towers.module: required key is missing"),
    ({"groups": ALL, "module": {"kind": "mlp"}, "n_outs": 2}, "towers.n_outs: unknown key"),
    ({"groups": ALL, "module": {"kind": "mlp", "hidden": "x"}}, "towers.module.hidden"),
])
def test_bad_json_names_the_file_and_key(data: dict, where: str) -> None:
    arch = json.loads(_spec().to_json())
    arch["towers"] = data
    with pytest.raises(ArchSpecError, match="my.json: " + where.replace(".", r"\.").replace("[", r"\[")):
        ArchSpec.from_json(json.dumps(arch), "my.json")


def test_model_output_and_tower_locality() -> None:
    module = MLPConfig(hidden=(8,), n_out=1)
    spec = _spec(towers=TowerSpec(groups=(("a", "d", "e"), ("c", "b")), module=module, n_out=3))
    torch.manual_seed(0)
    model = build_model(spec)
    dense, sparse = _batch()
    x0 = model.embed(dense, sparse)
    assert x0.shape == (4, 1 + 2 * 3, 8)
    assert model(dense, sparse).shape == (4,)
    # Changing only feature b's ids moves tower 1's vectors, never tower 0's.
    other = KeyedJaggedTensor.from_lengths_sync(
        list(FEATURES), torch.where(torch.arange(20) // 4 == 1, 19, sparse.values()), sparse.lengths())
    x1 = model.embed(dense, other)
    torch.testing.assert_close(x1[:, :4], x0[:, :4])
    assert not torch.allclose(x1[:, 4:], x0[:, 4:])


def test_tower_module_precision_is_applied() -> None:
    spec = _spec(towers=TowerSpec(groups=(FEATURES,), module=MLPConfig(hidden=(8,), n_out=1,
                                                                        precision="mxfp8_e4m3")))
    model = build_model(spec)
    assert any(type(m).__name__.startswith("Quant") for m in model.towers.modules())


@pytest.mark.slow
def test_a_tower_model_exports(tmp_path: Path) -> None:
    """export_model's own checks (the exported program and weights give the model's logits)
    pass for a tower model, and its arch.json carries the towers."""
    from autorec.data import load_dataset
    from autorec.export import export_model
    from autorec.presets import preset

    ds = load_dataset("synthetic", preset="groups4", num_samples=500)
    flat = preset("dlrm", ds.schema, dim=8)
    spec = flat.replace(towers=TowerSpec(groups=ds.feature_groups(), module=DotConfig(n_passthrough=0),
                                         n_out=2))
    torch.manual_seed(0)
    batch = next(iter(ds.batches("test", 16, shuffle=False)))
    out = export_model(build_model(spec), tmp_path / "export", sample_batch=batch, metrics={},
                       retrain_command="autorec train")
    assert ArchSpec.load(out / "arch.json") == spec
