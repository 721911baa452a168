"""benchmarks/planted_oracle.py: a winner given the ``scale`` preset's planted per-table truth."""

from __future__ import annotations

import sys

import pytest

from autorec.data.synthetic.config import PRESETS
from benchmarks.planted_oracle import VARIANTS, main, planted, train_overrides, variant


def _arch(dim: int = 8) -> dict:
    tables = [{"name": f"t_cat_{i}", "features": [f"cat_{i}"], "num_embeddings": 7, "dim": dim,
               "precision": "fp32"} for i in range(26)]
    return {"name": "w", "tables": tables, "layers": [{"kind": "dcnv2"}], "over_arch": [256, 128]}


def test_the_variants_apply_the_planted_weights_and_ranks() -> None:
    weights, ranks = planted("scale")
    noise = {i for i, w in enumerate(weights) if w == 0}
    assert len(weights) == len(ranks) == 26 and len(noise) == 8
    arch = _arch()
    assert variant(arch, "as_found") == arch and variant(arch, "as_found") is not arch
    kept = variant(arch, "no_noise")
    assert [t["features"][0] for t in kept["tables"]] == [f"cat_{i}" for i in range(26) if i not in noise]
    assert {t["dim"] for t in kept["tables"]} == {8} and kept["layers"] == arch["layers"]
    oracle = variant(arch, "oracle")
    for table in oracle["tables"]:
        i = int(table["features"][0].split("_")[1])
        assert table["dim"] == max(ranks[i], 4)  # 16 for a strong table, never under the space's 4
        assert table["num_embeddings"] == PRESETS["scale"]["rows"][i]  # every row: full hash
    assert {t["dim"] for t in oracle["tables"]} == {4, 8, 16}
    assert arch["tables"][2]["dim"] == 8  # the winner itself is left as it was


def test_an_unknown_variant_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match=f"expected one of {', '.join(VARIANTS)}, got 'wide'"):
        variant(_arch(), "wide")
    monkeypatch.setattr(sys, "argv", ["planted_oracle", "--variants", "oracle,wide"])
    with pytest.raises(SystemExit, match="--variants 'oracle,wide'"):
        main()
    monkeypatch.setattr(sys, "argv", ["planted_oracle", "--train-seeds", "0,x"])
    with pytest.raises(SystemExit, match="--train-seeds '0,x': expected comma-separated integers"):
        main()


def test_a_recipe_must_be_known_fields_and_named() -> None:
    assert train_overrides("", "") == {}
    assert train_overrides('{"lr_schedule": "cosine", "warmup_steps": 10}', "_c") == {
        "lr_schedule": "cosine", "warmup_steps": 10}
    with pytest.raises(SystemExit, match="unknown TrainConfig field"):
        train_overrides('{"lr_shedule": "cosine"}', "_c")
    with pytest.raises(SystemExit, match="expected a JSON object"):
        train_overrides('["cosine"]', "_c")
    with pytest.raises(SystemExit, match="not JSON"):
        train_overrides("{lr_schedule: cosine}", "_c")
    with pytest.raises(SystemExit, match="name the recipe with --tag"):
        train_overrides('{"lr_schedule": "cosine"}', "")
