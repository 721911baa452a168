"""serve_bench and ``autorec serve-bench``: percentiles from real timed requests, AUC per form."""

import json

import pytest

from autorec.cli.main import main
from autorec.serving import measure, serve_bench
from autorec.serving.bench import requests


def test_serve_bench_measures_every_form_at_every_size(compiled_export, movielens):
    result = serve_bench(compiled_export, movielens, batch_sizes=(1, 64), repeats=10, warmup=2)
    assert set(result["latency"]) == {"eager", "exported", "compiled", "int8"}
    for rows in result["latency"].values():
        assert set(rows) == {"batch_1", "batch_64"}
        for row in rows.values():
            assert 0 < row["p50_ms"] <= row["p99_ms"] and row["requests"] == 10
            assert row["samples_per_s"] == pytest.approx(row["batch_size"] / row["mean_ms"] * 1e3, rel=1e-3)
    quality = result["quality"]
    assert quality["eager"]["auc_change"] == 0.0
    assert abs(quality["compiled"]["auc_change"]) < 1e-4 and abs(quality["exported"]["auc_change"]) < 1e-6
    assert quality["int8"]["n"] == movielens.num_rows("val") and abs(quality["int8"]["auc_change"]) < 0.02


def test_requests_are_full_batches_of_real_rows(compiled_export, movielens):
    found = requests(compiled_export, movielens, 64, count=3)
    assert len(found) == 3 and all(dense.shape[0] == 64 for dense, _, _ in found)
    with pytest.raises(ValueError, match="fewer than 1000000 rows"):
        requests(compiled_export, movielens, 1_000_000)


def test_measure_refuses_nothing_to_replay():
    with pytest.raises(ValueError, match="no requests"):
        measure(lambda: None, [], batch_size=1)


def test_the_command_prints_a_table_and_writes_json(compiled_export, tmp_path, capsys):
    out = tmp_path / "serve.json"
    assert main(["serve-bench", str(compiled_export), "--batch-sizes", "1,8", "--repeats", "5",
                 "--forms", "eager,compiled", "--json", str(out)]) == 0
    table = capsys.readouterr().out
    assert "| compiled | 8 |" in table and "| eager | 1 |" in table
    assert set(json.loads(out.read_text())["latency"]) == {"eager", "compiled"}


@pytest.mark.parametrize("argv, message", [
    (["--batch-sizes", "1,x"], "--batch-sizes: expected comma-separated integers"),
    (["--batch-sizes", "0"], "--batch-sizes: expected positive integers"),
    (["--forms", "fp4"], "--forms: unknown fp4"),
    (["--repeats", "0"], "--repeats: expected a positive integer"),
])
def test_bad_flags_are_named(compiled_export, capsys, argv, message):
    assert main(["serve-bench", str(compiled_export), *argv]) == 2
    assert message in capsys.readouterr().err


def test_a_missing_export_is_named(tmp_path, capsys):
    assert main(["serve-bench", str(tmp_path / "nowhere")]) == 2
    assert "nowhere: no such export directory" in capsys.readouterr().err
