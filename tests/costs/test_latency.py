"""The learned latency model: profiling, fitting, file errors, and its use as the supernet's cost."""

import json
import subprocess
import sys

import pytest
import torch

from autorec.costs.latency import (
    LatencyModel,
    default_path,
    fit_latency_model,
    load_latency_model,
    profile_parts,
    sample_specs,
)
from autorec.data import load_dataset
from autorec.space import SPACES_DIR, SearchSpace
from autorec.supernet import SupernetConfig, SupernetSearch
from autorec.supernet.cost import ExpectedCost, spec_cost

COEF = {"dlrm": (2e-4, 1e-9, 0.0, 1e-7, 0, 0, 0, 0, 0),
        "dhen": (1e-4, 0.0, 0.0, 0.0, 5e-6, 0, 0, 1e-6, 0)}  # attention 5 us, dot 1 us per input


MODULES = ("attention", "conv", "dcn", "dot", "linear")


def rows_from(coef, n=40, seed=0):
    g = torch.Generator().manual_seed(seed)
    rows = []
    for kind, c in coef.items():
        for _ in range(n):
            flops = float(torch.randint(10**3, 10**6, (1,), generator=g))
            inputs = float(torch.randint(16, 600, (1,), generator=g))
            subsets = ([], ["dot"], ["attention"], ["attention", "dot"])  # each term identifiable
            modules = subsets[int(torch.randint(0, 4, (1,), generator=g))] if kind == "dhen" else []
            x = [1.0, flops, 0.0, inputs] + [inputs if m in modules else 0.0 for m in MODULES]
            rows.append({"kind": kind, "modules": modules, "flops": flops, "params": 0, "inputs": inputs,
                         "seconds": sum(a * b for a, b in zip(c, x, strict=True))})
    return rows


def test_the_fit_recovers_planted_coefficients_and_reports_held_out_error():
    model = fit_latency_model(rows_from(COEF))
    assert model.heldout_mape["all"] < 1e-6 and set(model.heldout_mape) == {"dlrm", "dhen", "all"}
    for kind, coef in COEF.items():
        assert model.coefficients[kind] == pytest.approx(coef, rel=1e-4, abs=1e-12)
    # A DHEN layer with attention costs more than one with only the dot module, at equal FLOPs.
    with_attention = model.predict("dhen", 1e5, 0, 100, ("attention", "dot"))
    assert with_attention > model.predict("dhen", 1e5, 0, 100, ("dot",))
    # A kind without profiles falls back to the fit over every part.
    assert model.predict("wukong", 1e5, 0, 100) == pytest.approx(
        sum(a * b for a, b in zip(model.fallback, [1.0, 1e5, 0.0, 100.0, 0, 0, 0, 0, 0], strict=True)))


def test_too_few_profiles_is_an_error():
    with pytest.raises(ValueError, match="expected at least 5 profiled parts, got 2"):
        fit_latency_model(rows_from(COEF)[:2])


def test_real_profiles_of_sampled_architectures_fit_and_round_trip(tmp_path):
    torch.set_num_threads(1)
    space = SearchSpace.load(SPACES_DIR / "quickstart.yaml")
    records = profile_parts(sample_specs(space, 6, seed=1, num_features=(4, 8)), batch_size=64, repeats=1)
    kinds = {r["kind"] for r in records}
    assert "mlp" in kinds and kinds - {"mlp"} <= {"dlrm", "dcnv2", "wukong", "dhen"}
    assert all(r["seconds"] > 0 and r["inputs"] > 0 for r in records)
    model = fit_latency_model(records, batch_size=64, min_rows=2)
    model.save(tmp_path / "latency.json")
    again = LatencyModel.load(tmp_path / "latency.json")
    assert again == model
    assert all(v >= 0 for c in model.coefficients.values() for v in c)


@pytest.mark.parametrize(("text", "message"), [
    ("{", "line 1: not valid JSON"),
    ('{"version": 9}', "expected a latency model of version 1, got version 9"),
    ('{"version": 1, "device": "cpu", "batch_size": 512, "fallback": [0, 0, 0, 0, 0, 0, 0, 0, 0]}',
     "missing key 'coefficients'"),
    ('{"version": 1, "device": "cpu", "batch_size": 512, "coefficients": {"dlrm": [1, 2]}, '
     '"fallback": [0, 0, 0, 0, 0, 0, 0, 0, 0]}', "coefficients.dlrm: expected a list of 9 coefficients"),
    ('{"version": 1, "device": "cpu", "batch_size": 512, "coefficients": {}, '
     '"fallback": [0, -1, 0, 0, 0, 0, 0, 0, 0]}', "fallback: expected finite numbers >= 0"),
])
def test_bad_model_files_name_the_file_and_the_fault(tmp_path, text, message):
    path = tmp_path / "latency.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=message) as info:
        LatencyModel.load(path)
    assert str(path) in str(info.value)


def test_a_missing_model_says_how_to_fit_one(tmp_path):
    with pytest.raises(FileNotFoundError, match="autorec profile latency --out"):
        LatencyModel.load(tmp_path / "cpu" / "latency.json")


def test_the_shipped_cpu_model_loads_with_its_held_out_error():
    model = load_latency_model("cpu")
    assert default_path("cpu").is_file() and model.device == "cpu"
    assert {"dlrm", "dcnv2", "wukong", "dhen", "mlp"} <= set(model.coefficients)
    assert 0 < model.heldout_mape["all"] < 1


SPACE = {
    "dim": [8], "dense_arch": [[8]], "over_arch": [[16]],
    "layers": {"num": {"low": 1, "high": 2}, "kinds": ["dlrm", "dcnv2", "dhen"],
               "dlrm": {"n_passthrough": [1], "self_interaction": [False]},
               "dcnv2": {"num_layers": [1, 3], "rank": [0]},
               "dhen": {"modules": [["dot", "attention"], ["dot"]], "ensemble": ["concat"], "n_out": [2],
                        "num_heads": [2], "dcn_layers": [1]}},
}


def test_latency_is_a_supernet_cost_metric_exact_at_one_hot_and_steered_by_lambda():
    data = load_dataset("synthetic", preset="tiny", num_samples=3000)
    space = SearchSpace.from_dict(SPACE)

    def run(lam):
        search = SupernetSearch(space, data, 8, (8,), (16,), SupernetConfig(
            steps=100, warmup_steps=0, batch_size=64, arch_lr=0.2, cost_metric="latency",
            cost_lambda=lam, weight_sampling="uniform"))
        return search, search.fit()

    search, free = run(0.0)
    _, costly = run(3.0)
    assert costly.expected_cost < free.expected_cost and costly.expected_cost < 0.8 * costly.cost_target
    # At a one-hot distribution E[latency] is the model's time of the derived spec.
    net = search.supernet
    with torch.no_grad():
        for logit in net.arch.logits:
            logit.copy_(torch.zeros_like(logit).index_fill_(0, torch.tensor([logit.numel() - 1]), 50.0))
        expected = float(ExpectedCost(net, "latency")())
    assert expected == pytest.approx(spec_cost(net.derive(), "latency"), rel=1e-9)
    derived = net.derive()
    assert spec_cost(derived, "latency") == pytest.approx(load_latency_model().spec_seconds(derived))


@pytest.mark.slow  # 33 s: three CLI processes that profile; the latency model's own tests stay in make test
def test_the_profile_command_checks_its_flags_and_writes_a_model(tmp_path):
    bad = subprocess.run([sys.executable, "-m", "autorec.cli", "profile", "latency", "--specs", "0"],
                         capture_output=True, text=True)
    assert bad.returncode != 0 and "--specs: expected a positive integer, got 0" in bad.stderr
    missing = subprocess.run([sys.executable, "-m", "autorec.cli", "profile", "latency", "--space", "nope"],
                             capture_output=True, text=True)
    assert missing.returncode != 0 and "--space 'nope': no such space file" in missing.stderr
    ok = subprocess.run([sys.executable, "-m", "autorec.cli", "profile", "latency", "--out", str(tmp_path),
                         "--space", "quickstart", "--specs", "12", "--repeats", "1", "--batch-size", "64"],
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert "held-out MAPE" in ok.stdout
    model = LatencyModel.load(tmp_path / "latency.json")
    lines = (tmp_path / "latency_profiles.jsonl").read_text().splitlines()
    assert model.batch_size == 64 and len(lines) > 5
    assert all(json.loads(line)["seconds"] > 0 for line in lines)
