"""The sharding profiler: real fbgemm kernels on tiny shards, a real 2-process gloo all-to-all,
profile files and their errors, the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autorec.cli import main
from autorec.sharding.profiler import (
    ProfileError,
    ShardProfile,
    append_profiles,
    build_tbe,
    load_profiles,
    measure_comm,
    measure_compute,
    random_shards,
    shard_batch_inputs,
)
from autorec.sharding.tables import TableSet


def tiny(n: int = 3, seed: int = 0) -> TableSet:
    return TableSet.generate(n, seed=seed, rows_range=(1e3, 5e3), dim_range=(4, 32))


def test_batch_inputs_follow_pooling() -> None:
    import numpy as np

    ts = tiny()
    indices, offsets = shard_batch_inputs(ts, 256, np.random.default_rng(0))
    assert offsets.shape == (3 * 256 + 1,) and int(offsets[-1]) == indices.numel()
    per_table = (offsets[256::256] - offsets[:-1:256][: 3]).double() / 256
    for t, mean in zip(ts.tables, per_table.tolist(), strict=True):
        assert mean == pytest.approx(max(t.pooling, 1.0), rel=0.25, abs=0.2)
    bounds = [0, *(256 * (i + 1) for i in range(3))]
    for i, t in enumerate(ts.tables):
        ids = indices[offsets[bounds[i]]:offsets[bounds[i + 1]]]
        assert int(ids.min()) >= 0 and int(ids.max()) < t.rows


def test_tbe_is_the_fused_kernel_and_trains() -> None:
    import numpy as np
    import torch

    ts = tiny()
    tbe = build_tbe(ts)
    indices, offsets = shard_batch_inputs(ts, 32, np.random.default_rng(1))
    out = tbe(indices, offsets)
    assert out.shape == (32, sum(t.dim for t in ts.tables))
    before = tbe.split_embedding_weights()[0].clone()
    out.backward(torch.ones_like(out))  # the fused row-wise Adagrad updates the looked-up rows
    assert not torch.equal(before, tbe.split_embedding_weights()[0])


def test_measure_compute_grows_with_work() -> None:
    small = tiny(1, seed=4)
    fwd, bwd = measure_compute(small, batch_size=64, repeats=2)
    assert fwd > 0 and bwd > 0
    # 40x the lookups (more tables, wider, higher pooling, bigger batch): clearly slower
    big = TableSet.generate(8, seed=5, rows_range=(1e4, 2e4), dim_range=(128, 128), max_pooling=20)
    big_fwd, _ = measure_compute(big, batch_size=512, repeats=2)
    assert big_fwd > fwd


def test_measure_comm_two_gloo_processes() -> None:
    ms = measure_comm([8, 2048], batch_size=512, repeats=2, world_size=2)
    assert len(ms) == 2 and all(m > 0 for m in ms)


def test_random_shards_fit_the_memory_cap() -> None:
    shards = random_shards(20, seed=1, max_tables=30, max_shard_bytes=64 << 20)
    assert len(shards) == 20
    assert all(s.total_bytes <= 64 << 20 for s in shards)
    assert max(len(s) for s in shards) > 5


def profile(n: int = 1) -> ShardProfile:
    return ShardProfile(tiny(n), 64, "cpu", 2, 0.5, 0.7, 0.2, repeats=3)


def test_profile_file_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    append_profiles(path, [profile(1), profile(2)])
    append_profiles(path, [profile(3)])
    loaded = load_profiles(path)
    assert [len(p.tables) for p in loaded] == [1, 2, 3] and loaded[1] == profile(2)


def test_bad_profile_files(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    good = json.dumps(profile().to_dict())
    path.write_text(good + "\n{not json\n")
    with pytest.raises(ProfileError, match=r"bad.jsonl:2: not valid JSON"):
        load_profiles(path)
    doc = profile().to_dict()
    del doc["comm_ms"]
    path.write_text(good + "\n\n" + json.dumps(doc) + "\n")
    with pytest.raises(ProfileError, match=r"bad.jsonl:3: missing key 'comm_ms'"):
        load_profiles(path)
    doc = profile().to_dict()
    doc["forward_ms"] = -1
    path.write_text(json.dumps(doc) + "\n")
    with pytest.raises(ProfileError, match=r"bad.jsonl:1: forward_ms: expected a positive"):
        load_profiles(path)
    doc = profile().to_dict()
    del doc["tables"][0]["rows"]  # type: ignore[index]
    path.write_text(json.dumps(doc) + "\n")
    with pytest.raises(ProfileError, match=r"bad.jsonl:1: tables\[0\]: missing key 'rows'"):
        load_profiles(path)
    with pytest.raises(ProfileError, match="no such profile file"):
        load_profiles(tmp_path / "missing.jsonl")


def test_cli_rejects_bad_flags(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "sharding", "--world-size", "1"]) == 2
    assert "--world-size" in capsys.readouterr().err
    assert main(["profile", "sharding", "--shards", "0"]) == 2
    assert "--shards: expected a positive integer, got 0" in capsys.readouterr().err
    assert main(["profile", "sharding", "--batch-size", "3"]) == 2
    assert "must divide by --world-size" in capsys.readouterr().err
    assert main(["profile", "sharding", "--max-rows", "10"]) == 2
    assert "--max-rows: expected at least 1000, got 10" in capsys.readouterr().err


@pytest.mark.slow
def test_cli_profiles_into_a_file(tmp_path: Path) -> None:
    assert main(["profile", "sharding", "--out", str(tmp_path), "--shards", "3", "--repeats", "2",
                 "--batch-size", "128", "--max-tables", "4", "--max-shard-mb", "32"]) == 0
    loaded = load_profiles(tmp_path / "profiles.jsonl")
    assert len(loaded) == 3 and all(p.world_size == 2 and p.comm_ms > 0 for p in loaded)
