"""`autorec shard`: the plan, its per-device costs and the baselines; bad flags name the flag."""

from __future__ import annotations

import json

import pytest

from autorec.cli import main
from autorec.cli.shard import parse_bytes
from autorec.data import Schema, SparseFeature
from autorec.presets import preset
from autorec.train.plan import load_plan

SCHEMA = Schema(dense=("x",), sparse=tuple(SparseFeature(f"f{i}", n) for i, n in
                                          enumerate((100_000, 5_000, 20_000, 1_000, 300_000))))
SPEC = preset("dlrm", SCHEMA, dim=32)


@pytest.fixture
def arch(tmp_path):
    path = tmp_path / "arch.json"
    SPEC.save(path)
    return str(path)


def test_json_report_with_baselines_and_a_plan_file(arch, tmp_path, capsys):
    out = tmp_path / "plan.json"
    assert main(["shard", "--arch", arch, "--world-size", "3", "--memory-per-device", "40MB",
                 "--pooling", "f0=4", "--json", "--out", str(out)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["world_size"] == 3 and len(report["devices"]) == 3
    assert report["planner"] == "greedy-polish"
    assert set(report["baselines"]) == {"rl", "torchrec", "size-greedy", "lookup-greedy", "random"}
    costs = [d["total_ms"] for d in report["devices"]]
    assert report["max_device_cost_ms"] == pytest.approx(max(costs), abs=1e-3)
    for d in report["devices"]:
        assert d["total_ms"] == pytest.approx(d["forward_ms"] + d["backward_ms"] + d["comm_ms"], abs=1e-3)
        assert d["bytes"] <= 40_000_000
    for b in report["baselines"].values():
        assert "error" in b or b["saving"] == pytest.approx(
            1 - report["max_device_cost_ms"] / b["max_device_cost_ms"], abs=1e-3)
    assert json.loads(out.read_text()) == report["plan"]
    plan = load_plan(out, SPEC, world_size=3, device_type="cpu").plan["sparse_arch"]
    assert set(plan) == {t.name for t in SPEC.tables}


def _phase_cost(report):
    return sum(max(d[f"{h}_ms"] for d in report["devices"]) for h in ("forward", "backward", "comm"))


@pytest.mark.parametrize("planner", ["greedy-polish", "rl"])
def test_polish_flags(arch, capsys, planner):
    """Either planner's plan is polished by default (no worse by its objective than the
    unpolished plan: greedy + polish the max device cost, the committed RL policy its phase
    objective); --no-polish and --polish-steps reach the planner."""
    common = ["shard", "--arch", arch, "--world-size", "3", "--memory-per-device", "40MB",
              "--pooling", "f0=4", "--json", "--no-baselines", "--planner", planner]
    reports = {}
    for name, extra in (("default", []), ("off", ["--no-polish"]), ("zero", ["--polish-steps", "0"])):
        assert main([*common, *extra]) == 0
        reports[name] = json.loads(capsys.readouterr().out)
    assert reports["default"]["polish_steps"] == 50 and reports["off"]["polish_steps"] == 0
    assert reports["zero"]["plan"] == reports["off"]["plan"]
    cost = _phase_cost if planner == "rl" else (lambda r: r["max_device_cost_ms"])
    assert cost(reports["default"]) <= cost(reports["off"]) + 1e-3
    assert reports["default"]["planner"] == planner
    assert main([*common, "--polish-steps", "-1"]) == 2
    assert "--polish-steps: expected 0 or more" in capsys.readouterr().err


def test_rich_output_names_tables_devices_and_planners(arch, capsys):
    assert main(["shard", "--arch", arch, "--world-size", "2", "--memory-per-device", "1GiB"]) == 0
    out = capsys.readouterr().out
    for word in ("t_f0", "t_f4", "forward", "comm", "greedy-polish (chosen)", "lookup-greedy", "torchrec",
                 "rl"):
        assert word in out


@pytest.mark.parametrize("args, message", [
    (["--world-size", "0", "--memory-per-device", "1GB"], "--world-size: expected a positive integer"),
    (["--world-size", "2", "--memory-per-device", "lots"], "--memory-per-device: expected a positive size"),
    (["--world-size", "2", "--memory-per-device", "0GB"], "--memory-per-device: expected a positive size"),
    (["--world-size", "2", "--memory-per-device", "1KB"], "does not fit"),
    (["--world-size", "2", "--memory-per-device", "1GB", "--pooling", "f9=2"],
     "--pooling: pooling: unknown table or feature 'f9'"),
    (["--world-size", "2", "--memory-per-device", "1GB", "--pooling", "f0"],
     "--pooling: expected FEATURE=IDS"),
])
def test_bad_flags(arch, args, message, capsys):
    assert main(["shard", "--arch", arch, *args]) == 2
    assert message in capsys.readouterr().err


def test_missing_arch_file(tmp_path, capsys):
    assert main(["shard", "--arch", str(tmp_path / "no.json"), "--world-size", "2",
                 "--memory-per-device", "1GB"]) == 2
    assert "no.json: no such arch.json file" in capsys.readouterr().err


def test_sizes():
    assert parse_bytes("80GB") == 80 * 10**9
    assert parse_bytes("16 GiB") == 16 * 2**30
    assert parse_bytes("2.5MB") == 2_500_000
