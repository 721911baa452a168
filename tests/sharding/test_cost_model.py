"""The learned shard cost model: shapes and semantics, fitting on measured profiles, files."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
import torch

from autorec.sharding import cost_model as cm
from autorec.sharding.cost_model import CostModelError, ShardCostModel, fit, mape, predict_shards
from autorec.sharding.profiler import load_profiles
from autorec.sharding.tables import TableSet

PROFILES = cm.DEFAULT_DIR / "cpu" / "profiles.jsonl"


def one_hot(devices: list[int], d: int) -> torch.Tensor:
    return torch.nn.functional.one_hot(torch.tensor(devices), d).float()


def test_forward_agrees_with_device_costs() -> None:
    torch.manual_seed(0)
    ts = TableSet.generate(30, seed=1)
    model = ShardCostModel(hidden=16)
    devices = [random.Random(0).randrange(4) for _ in range(30)]
    devices[:3] = [0, 1, 2]
    with torch.no_grad():
        costs = model(ts.features(), one_hot(devices, 5))
    assert costs.shape == (5, 3)
    torch.testing.assert_close(costs, model.device_head_costs(ts, devices, 5))
    torch.testing.assert_close(costs.sum(-1), model.device_costs(ts, devices, 5))
    assert float(costs[4].abs().sum()) == 0.0 and bool((costs[:4] > 0).all())  # device 4 is empty


def test_costs_add_over_tables() -> None:
    ts = TableSet.generate(6, seed=2)
    model = ShardCostModel(hidden=16)
    per_table = model.table_costs(ts.features())
    with torch.no_grad():
        together = model(ts.features(), one_hot([0] * 6, 1))[0]
    torch.testing.assert_close(together, per_table.sum(0) + model.shard_overhead())


def test_batched_and_soft_assignments() -> None:
    ts = TableSet.generate(8, seed=3)
    model = ShardCostModel(hidden=16)
    a = torch.softmax(torch.randn(4, 8, 3), dim=-1)
    with torch.no_grad():
        batched = model(ts.features(), a)
        single = torch.stack([model(ts.features(), a[i]) for i in range(4)])
    torch.testing.assert_close(batched, single)
    with pytest.raises(ValueError, match="one row per table"):
        model(ts.features(), torch.ones(7, 3))
    with pytest.raises(ValueError, match="one device per table"):
        model.device_costs(ts, [0, 1], 2)
    with pytest.raises(ValueError, match=r"device ids in 0\.\.2, got 0\.\.3"):
        model.device_costs(ts, [0, 1, 2, 3, 0, 1, 2, 0], 3)


def test_device_cost_cache_follows_the_parameters() -> None:
    ts = TableSet.generate(5, seed=4)
    model = ShardCostModel(hidden=8)
    before = model.device_costs(ts, [0, 0, 1, 1, 1], 2)
    with torch.no_grad():
        model.heads.bias += 1.0
    model.invalidate()
    after = model.device_costs(ts, [0, 0, 1, 1, 1], 2)
    assert bool((after > before).all())


def test_fitting_on_measured_profiles_beats_the_unfitted_model() -> None:
    profiles = load_profiles(PROFILES)[:80]
    shards = [p.tables for p in profiles]
    targets = torch.stack([p.targets for p in profiles])
    train, test = slice(0, 60), slice(60, 80)
    torch.manual_seed(0)
    model = ShardCostModel(hidden=16)
    model.set_normalisation(torch.cat([s.features() for s in shards[train]]))
    with torch.no_grad():
        unfitted = mape(predict_shards(model, shards[test]), targets[test])
    fit(model, shards[train], targets[train], steps=300)
    with torch.no_grad():
        fitted = mape(predict_shards(model, shards[test]), targets[test])
    assert fitted["total"] < 0.5 * unfitted["total"]
    assert all(fitted[h] < unfitted[h] for h in cm.HEADS)


def test_save_load_round_trip(tmp_path: Path) -> None:
    ts = TableSet.generate(10, seed=5)
    model = ShardCostModel(hidden=8, batch_size=512)
    model.set_normalisation(ts.features())
    model.metadata = {"note": "x"}
    model.save(tmp_path / "m")
    loaded = ShardCostModel.load(tmp_path / "m")
    assert loaded.batch_size == 512 and loaded.metadata == {"note": "x"}
    devices = [i % 3 for i in range(10)]
    torch.testing.assert_close(loaded.device_costs(ts, devices, 3), model.device_costs(ts, devices, 3))


def test_bad_model_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(CostModelError, match=r"model\.json: no such file"):
        ShardCostModel.load(tmp_path)
    ShardCostModel(hidden=8).save(tmp_path)
    (tmp_path / "model.json").write_text("{bad")
    with pytest.raises(CostModelError, match=r"model\.json:1: not valid JSON"):
        ShardCostModel.load(tmp_path)
    (tmp_path / "model.json").write_text('{"format": "autorec-shard-cost-model", "hidden": 8}')
    with pytest.raises(CostModelError, match="missing key 'batch_size'"):
        ShardCostModel.load(tmp_path)
    monkeypatch.setattr(cm, "DEFAULT_DIR", tmp_path / "none")
    with pytest.raises(CostModelError, match=r"'tpu'.*none/tpu/model\.json is missing"):
        ShardCostModel.default("tpu")


def test_the_committed_cpu_model() -> None:
    model = ShardCostModel.default("cpu")
    assert model.device_kind == "cpu" and model.metadata["n_test"] > 0
    ts = TableSet.generate(500, seed=11)
    costs = model.device_costs(ts, [i % 16 for i in range(500)], 16)
    assert costs.shape == (16,) and bool((costs > 0).all()) and bool(costs.isfinite().all())


@pytest.mark.slow
def test_held_out_error_meets_the_target_and_matches_the_record(tmp_path: Path) -> None:
    """The issue's target (held-out total MAPE <= 15%) on the committed profiles, refitting as
    the benchmark did; the committed model's recorded error is what the refit gives."""
    import importlib.util

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "sharding_cost_model.py"
    spec = importlib.util.spec_from_file_location("sharding_cost_model_bench", script)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--profiles", str(PROFILES), "--out", str(tmp_path)]) == 0
    refit = ShardCostModel.load(tmp_path).metadata["heldout_mape"]
    recorded = ShardCostModel.default("cpu").metadata["heldout_mape"]
    assert refit["total"] <= 15.0
    for head in [*cm.HEADS, "total"]:
        assert refit[head] == pytest.approx(recorded[head], abs=1.5)


def shard_mlp_model(hidden: int = 16, seed: int = 0) -> ShardCostModel:
    """A shard-mlp model whose correction is not zero (a fresh one starts additive)."""
    torch.manual_seed(seed)
    model = ShardCostModel(hidden=hidden, kind="shard-mlp")
    with torch.no_grad():
        model.shard_mlp[-1].weight.normal_(0, 1.0)
        model.shard_mlp[-1].bias.normal_(0, 0.3)
    model.invalidate()
    return model


def test_shard_mlp_forward_agrees_with_device_costs_and_batches() -> None:
    ts = TableSet.generate(30, seed=1)
    model = shard_mlp_model()
    devices = [i % 4 for i in range(30)]
    with torch.no_grad():
        costs = model(ts.features(), one_hot(devices, 5))
        a = torch.softmax(torch.randn(3, 30, 5), dim=-1)
        batched = model(ts.features(), a)
        single = torch.stack([model(ts.features(), a[i]) for i in range(3)])
    torch.testing.assert_close(costs, model.device_head_costs(ts, devices, 5))
    torch.testing.assert_close(costs.sum(-1), model.device_costs(ts, devices, 5))
    torch.testing.assert_close(batched, single)
    assert float(costs[4].abs().sum()) == 0.0 and bool((costs[:4] > 0).all())


def test_shard_mlp_costs_do_not_add_but_stay_within_the_bounded_factor() -> None:
    ts = TableSet.generate(6, seed=2)
    model = shard_mlp_model()
    with torch.no_grad():
        together = model(ts.features(), one_hot([0] * 6, 1))[0]
        additive = model.table_costs(ts.features()).sum(0) + model.shard_overhead()
    ratio = together / additive
    assert not torch.allclose(together, additive, rtol=1e-3)
    bound = math.exp(model.max_correction)
    assert bool((ratio <= bound * (1 + 1e-5)).all()) and bool((ratio >= (1 - 1e-5) / bound).all())


def test_shard_mlp_extrapolates_to_shards_larger_than_the_fitted_ones() -> None:
    """The count features are clamped to the fitted shards' range (here <= 10 tables), so the
    factor stops changing beyond it and the cost grows like the sum of the tables."""
    ts = TableSet.generate(400, seed=3)
    model = shard_mlp_model()
    feats, index = cm.shard_batch([TableSet(ts.tables[i:i + 10]) for i in range(0, 100, 10)])
    model.set_normalisation(feats, index)
    state = model.table_state(ts.features()).detach()
    rows = torch.stack([state[:n].sum(0) for n in (50, 100, 200, 400)])
    with torch.no_grad():
        costs = model.shard_costs(rows).sum(-1)
        factor = model.shard_factor(rows)
        additive = rows[:, :3].sum(-1) + model.shard_overhead().sum()
    assert bool(costs.isfinite().all()) and bool((costs[1:] > costs[:-1]).all())
    ratio = costs / additive
    assert float(ratio.max() / ratio.min()) < 1.5  # the same tables' mix: about the same factor
    assert bool((factor <= math.exp(model.max_correction) * (1 + 1e-5)).all())


def _superadditive_shards(n: int, seed: int) -> tuple[list[TableSet], torch.Tensor]:
    """Shards of 1-30 generated tables whose (synthetic) cost is the sum of per-table costs
    times 1 + 0.1 (tables - 1) per head (backward-like: neighbours slow each other down)."""
    rng = random.Random(seed)
    shards, targets = [], []
    for i in range(n):
        k = rng.choice([1, 2, 3, 5, 8, 13, 20, 30])
        ts = TableSet.generate(k, seed=seed * 1000 + i, rows_range=(1e3, 1e6))
        f = ts.features()
        per_table = torch.stack([f[:, 1] * f[:, 2] / 500, f[:, 0].log10() * f[:, 1] / 400,
                                 f[:, 1] / 300], dim=-1).sum(0)
        shards.append(ts)
        targets.append((per_table + 0.05) * (1 + 0.1 * (k - 1)))
    return shards, torch.stack(targets)


def test_shard_mlp_fits_non_additive_costs_that_the_additive_model_cannot() -> None:
    train_shards, train_targets = _superadditive_shards(160, seed=1)
    test_shards, test_targets = _superadditive_shards(60, seed=2)
    errors = {}
    for kind in ("additive", "shard-mlp"):
        torch.manual_seed(0)
        model = ShardCostModel(hidden=16, kind=kind)
        fit(model, train_shards, train_targets, steps=400, lr=1e-2)
        with torch.no_grad():
            errors[kind] = mape(predict_shards(model, test_shards), test_targets)["total"]
    assert errors["shard-mlp"] < 0.6 * errors["additive"], errors


def test_shard_mlp_save_load_round_trip(tmp_path: Path) -> None:
    ts = TableSet.generate(12, seed=5)
    model = shard_mlp_model(hidden=8)
    feats, index = cm.shard_batch([TableSet(ts.tables[:4]), TableSet(ts.tables[4:])])
    model.set_normalisation(feats, index)
    model.save(tmp_path)
    config = json.loads((tmp_path / "model.json").read_text())
    assert config["version"] == 2 and config["kind"] == "shard-mlp"
    loaded = ShardCostModel.load(tmp_path)
    assert loaded.kind == "shard-mlp" and loaded.max_correction == model.max_correction
    devices = [i % 3 for i in range(12)]
    torch.testing.assert_close(loaded.device_head_costs(ts, devices, 3),
                               model.device_head_costs(ts, devices, 3))


def test_version_1_files_still_load_as_additive(tmp_path: Path) -> None:
    """A file written before the shard-mlp kind (version 1, no kind): an additive model."""
    ts = TableSet.generate(10, seed=6)
    model = ShardCostModel(hidden=8)
    model.set_normalisation(ts.features())
    model.save(tmp_path)
    config = json.loads((tmp_path / "model.json").read_text())
    for key in ("kind", "max_correction"):
        del config[key]
    config["version"] = 1
    (tmp_path / "model.json").write_text(json.dumps(config))
    loaded = ShardCostModel.load(tmp_path)
    assert loaded.kind == "additive"
    devices = [i % 2 for i in range(10)]
    torch.testing.assert_close(loaded.device_costs(ts, devices, 2), model.device_costs(ts, devices, 2))


def test_bad_kind_and_version_name_the_file_and_key(tmp_path: Path) -> None:
    ShardCostModel(hidden=8).save(tmp_path)
    config = json.loads((tmp_path / "model.json").read_text())
    (tmp_path / "model.json").write_text(json.dumps({**config, "kind": "cubic"}))
    with pytest.raises(CostModelError, match=r"model\.json: kind: expected one of additive, shard-mlp"):
        ShardCostModel.load(tmp_path)
    (tmp_path / "model.json").write_text(json.dumps({**config, "version": 3}))
    with pytest.raises(CostModelError, match=r"model\.json: version: expected 1 or 2, got 3"):
        ShardCostModel.load(tmp_path)
    # a shard-mlp config over an additive model's weights: the weights do not fit
    (tmp_path / "model.json").write_text(json.dumps({**config, "kind": "shard-mlp"}))
    with pytest.raises(CostModelError, match=r"model\.safetensors: does not fit .*model\.json"):
        ShardCostModel.load(tmp_path)
    with pytest.raises(ValueError, match="kind: expected one of"):
        ShardCostModel(kind="cubic")
