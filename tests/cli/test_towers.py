"""``autorec towers partition``: bad flags are errors naming the flag; a run writes a partition
file that a search space reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autorec.cli import main
from autorec.data import load_dataset
from autorec.space import SearchSpace

TINY = ["towers", "partition", "--data", "synthetic", "--data-opt", "preset=tiny", "--data-opt",
        "num_samples=600", "--epochs", "1"]


@pytest.mark.parametrize(("args", "message"), [
    (["--k", "0"], "--k: expected positive tower counts"),
    (["--k", "5"], "--k: 5 towers for 4 tables"),
    (["--k", "2", "--tolerance", "-1"], "--tolerance >= 0"),
    (["--k", "2", "--arch", "missing.json"], "missing.json"),
])
def test_bad_flags(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*TINY, *args]) == 2
    assert message in capsys.readouterr().err


def test_an_impossible_balance_names_the_flags(capsys: pytest.CaptureFixture[str]) -> None:
    # tiny's tables have 50 to 1000 rows: no 2 towers hold equal bytes within 0%.
    assert main([*TINY, "--k", "2", "--tolerance", "0"]) == 2
    assert "--k 2 --tolerance 0.0: cannot balance" in capsys.readouterr().err


def test_a_run_writes_groups_a_space_reads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "parts.json"
    assert main([*TINY, "--k", "2", "--k", "1", "--tolerance", "1.0", "-o", str(out), "--json"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(result["towers"]) == {"2", "1"} and result["method"] == "ablation"
    written = json.loads(out.read_text())
    assert sorted(f for g in written["2"] for f in g) == ["cat_0", "cat_1", "cat_2", "cat_3"]
    space = SearchSpace.from_dict({"towers": {"num": [2], "kinds": ["mlp"], "partition": str(out)}})
    schema = load_dataset("synthetic", preset="tiny", num_samples=600).schema
    assert [list(g) for g in space.sample(schema, 0).towers.groups] == written["2"]


def test_plan_writes_a_plan_for_a_spec_with_towers(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from autorec.arch import ArchSpec, DotConfig, TowerSpec
    from autorec.presets import preset
    from autorec.train.plan import load_plan

    ds = load_dataset("synthetic", preset="groups4", num_samples=200)
    flat = preset("dlrm", ds.schema, dim=8)
    flat.save(tmp_path / "flat.json")
    towered = flat.replace(towers=TowerSpec(groups=ds.feature_groups(), module=DotConfig(n_passthrough=0)))
    towered.save(tmp_path / "arch.json")
    out = tmp_path / "plan.json"
    assert main(["towers", "plan", "--arch", str(tmp_path / "arch.json"), "--world-size", "4",
                 "--local-world-size", "2", "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["world_size"] == 4 and len(doc["tables"]) == 16
    assert load_plan(out, ArchSpec.load(tmp_path / "arch.json"), 4, "cpu").plan["sparse_arch"]
    assert main(["towers", "plan", "--arch", str(tmp_path / "flat.json"), "--world-size", "4", "-o",
                 str(out)]) == 2
    assert "has no towers" in capsys.readouterr().err
    assert main(["towers", "plan", "--arch", str(tmp_path / "arch.json"), "--world-size", "3",
                 "--local-world-size", "2", "-o", str(out)]) == 2
    assert "--world-size / --local-world-size" in capsys.readouterr().err
