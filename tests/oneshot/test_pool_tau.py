"""benchmarks/pool_tau.py: the report's tau over the pool, read from a tau-parts results file."""

from __future__ import annotations

import json

import pytest

from benchmarks.pool_tau import pool_taus, read_tau_parts


def test_each_seed_and_the_worst_read_through_the_shared_over_arch_where_scored_so():
    figures = {"k57_seed0_tau_joint_shared": 0.59, "k57_seed0_tau_joint": 0.2, "k57_seed0_pairs": 72,
               "k57_seed0_tau_predicted_nonnegative_shared": 0.76,
               "k57_seed1_tau_joint": 0.48, "k57_seed1_pairs": 72,
               "k57_seed1_tau_predicted_nonnegative": 0.64}
    out = pool_taus(figures, "_k57", [0, 1], "f.json")
    assert out["oneshot_seed0_kendall_tau_pool"] == 0.59  # the _shared keys, where the file has them
    assert out["oneshot_seed1_kendall_tau_pool"] == 0.48
    assert out["kendall_tau_pool_min"] == 0.48 and out["kendall_tau_predicted_min"] == 0.64
    # no seed trained its own draws: the pool's tau is the report's, its source named
    assert out["kendall_tau_min"] == 0.48 and out["kendall_tau_source"] == "pool (f.json)"
    # the seeds' own tau stands where they have one
    own = pool_taus(figures, "_k57", [0, 1], "f.json", own_min=0.3)
    assert "kendall_tau_min" not in own and "kendall_tau_source" not in own
    # a seed without a fitted predictor: no worst-of-seeds predictor figure
    del figures["k57_seed1_tau_predicted_nonnegative"]
    out = pool_taus(figures, "_k57", [0, 1], "f.json")
    assert out["kendall_tau_predicted_min"] is None and "oneshot_seed1_kendall_tau_predicted" not in out


def test_a_seed_the_file_did_not_score_and_a_bad_file_are_named(tmp_path):
    with pytest.raises(SystemExit, match=r"f.json has no k57_seed2_tau_joint .*--tag _k57"):
        pool_taus({"k57_seed0_tau_joint": 0.5}, "_k57", [0, 2], "f.json")
    with pytest.raises(SystemExit, match="no file at"):
        read_tau_parts(tmp_path / "absent.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(SystemExit, match=r"bad\.json is not JSON"):
        read_tau_parts(bad)
    bad.write_text(json.dumps([1, 2]))
    with pytest.raises(SystemExit, match="holds a list, expected a JSON object"):
        read_tau_parts(bad)
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"k57_seed0_tau_joint": 0.5}))
    assert read_tau_parts(good) == {"k57_seed0_tau_joint": 0.5}
