import json
import re

import pytest

from autorec.arch import (
    ArchSpec,
    ArchSpecError,
    CrossConfig,
    DhenConfig,
    DotConfig,
    MLPConfig,
    SkipConfig,
    TableSpec,
    WukongConfig,
)


def spec(**changes):
    base = dict(
        name="t", dim=8, n_dense=3, dense_arch=(16,),
        tables=(TableSpec(name="a", features=("u", "v"), num_embeddings=100, dim=8),
                TableSpec(name="b", features=("w",), num_embeddings=7, dim=4, precision="fp16")),
        layers=(WukongConfig(n_fm=3, n_lcb=2, rank=2, mlp=(32, 16)), DhenConfig(modules=("dot", "conv")),
                CrossConfig(num_layers=2, rank=4), DotConfig(self_interaction=True), MLPConfig(),
                SkipConfig(precision="bf16")),
        over_arch=(32, 8), metadata=(("source", "test"),))
    base.update(changes)
    return ArchSpec(**base)


def test_json_round_trip_is_exact_and_hashable():
    s = spec()
    again = ArchSpec.from_json(s.to_json())
    assert again == s and hash(again) == hash(s)
    assert again.to_json() == s.to_json()
    assert json.loads(s.to_json())["layers"][0] == {
        "kind": "wukong", "precision": "fp32", "n_fm": 3, "n_lcb": 2, "rank": 2, "mlp": [32, 16]}


def test_derived_sizes():
    s = spec()
    assert s.layer_widths()[:3] == (4, 5, 2 * 8)  # F0; wukong n_fm + n_lcb; dhen 2 modules x n_out
    assert s.feature_names == ("u", "v", "w")
    assert s.num_inputs == 4
    assert spec(n_dense=0, dense_arch=()).num_inputs == 3


def test_save_and_load(tmp_path):
    s = spec()
    s.save(tmp_path / "arch.json")
    assert ArchSpec.load(tmp_path / "arch.json") == s


@pytest.mark.parametrize("changes, where", [
    (dict(dim=0), "dim"),
    (dict(over_arch=(8, 0)), "over_arch[1]"),
    (dict(layers=(WukongConfig(n_fm=0),)), "layers[0].n_fm"),
    (dict(layers=(SkipConfig(), DhenConfig(modules=("dot", "mystery")))), "layers[1].modules[1]"),
    (dict(layers=(DhenConfig(ensemble="max"),)), "layers[0].ensemble"),
    (dict(layers=(SkipConfig(precision="fp7"),)), "layers[0].precision"),
    (dict(tables=()), "tables"),
    (dict(layers=(SkipConfig(), DhenConfig(modules=("attention",), num_heads=3))),
     "layers[1].num_heads"),
    (dict(layers=(DotConfig(n_passthrough=9),)), "layers[0].n_passthrough"),
    (dict(tables=(TableSpec(name="a", features=("u",), num_embeddings=0, dim=8),)),
     "tables[0].num_embeddings"),
    (dict(tables=(TableSpec(name="a", features=("u",), num_embeddings=5, dim=8),
                  TableSpec(name="b", features=("u",), num_embeddings=5, dim=8))), "tables[1].features"),
    (dict(tables=(TableSpec(name="a", features=("u",), num_embeddings=5, dim=8, precision="fp8"),)),
     "tables[0].precision"),
    (dict(tables=(TableSpec(name="a", features=("u",), num_embeddings=5, dim=6),)), "tables[0].dim"),
])
def test_invalid_specs_name_the_field(changes, where):
    with pytest.raises(ArchSpecError, match="^" + re.escape(where) + ":"):
        spec(**changes)


def test_bad_json_names_file_line_and_key(tmp_path):
    path = tmp_path / "arch.json"
    path.write_text('{\n  "dim": 8,\n  "tables": [,]\n}')
    with pytest.raises(ArchSpecError, match=r"arch.json:3:\d+: invalid JSON"):
        ArchSpec.load(path)
    data = json.loads(spec().to_json())
    data["layers"][1]["kind"] = "transformer"
    with pytest.raises(ArchSpecError, match=r"my.json: layers\[1\].kind: expected one of"):
        ArchSpec.from_dict(data, "my.json")
    data = json.loads(spec().to_json())
    data["layers"][0]["n_fmm"] = 3
    with pytest.raises(ArchSpecError, match=r"layers\[0\].n_fmm: unknown key"):
        ArchSpec.from_dict(data)
    data = json.loads(spec().to_json())
    del data["tables"][0]["dim"]
    with pytest.raises(ArchSpecError, match=r"tables\[0\].dim: required key is missing"):
        ArchSpec.from_dict(data)
    data = json.loads(spec().to_json())
    data["tables"][0]["dim"] = 6  # torchrec's fused kernels refuse it: an error on load, not in training
    with pytest.raises(ArchSpecError, match=r"a.json: tables\[0\].dim: expected a multiple of 4, got 6"):
        ArchSpec.from_dict(data, "a.json")
    data = json.loads(spec().to_json())
    data["format"] = 99
    with pytest.raises(ArchSpecError, match="format: expected 1"):
        ArchSpec.from_dict(data)
    with pytest.raises(ArchSpecError, match="cannot read"):
        ArchSpec.load(tmp_path / "missing.json")


def test_public_names_resolve():
    import autorec

    for name in autorec.__all__:
        assert getattr(autorec, name) is not None
    with pytest.raises(AttributeError):
        autorec.no_such_name  # noqa: B018
