import json
import re
import subprocess
import sys

import pytest

from autorec.cli import main


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autorec.cli", *args], capture_output=True, text=True,
                          timeout=600)


def test_train_json_on_movielens(tmp_path):
    proc = run("train", "--arch", "dlrm", "--epochs", "1", "--max-steps-per-epoch", "20", "--json",
               "--checkpoint-dir", str(tmp_path / "ck"))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["data"] == "movielens100k" and out["arch"] == "dlrm"
    assert 0.5 < out["test"]["auc"] < 1 and out["test"]["n"] == 10_000
    assert set(out["val"]) >= {"auc", "logloss", "ne"}
    assert (tmp_path / "ck" / "best").is_dir()


def test_train_an_arch_json(tmp_path, capsys):
    from autorec.data import load_dataset
    from autorec.presets import preset

    spec = preset("wukong", load_dataset("movielens100k").schema, dim=8)
    spec.save(tmp_path / "arch.json")
    code = main(["train", "--arch", str(tmp_path / "arch.json"), "--epochs", "1",
                 "--max-steps-per-epoch", "5", "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["arch"] == "wukong" and out["train_samples_per_s"] > 0 and 0 <= out["data_wait_share"] < 1
    # without --json, the line under the table says the throughput and the share lost to data
    assert main(["train", "--arch", str(tmp_path / "arch.json"), "--epochs", "1",
                 "--max-steps-per-epoch", "5"]) == 0
    assert re.search(r"[\d,]+ training samples/s, \d+\.\d% of the training time waiting for data",
                     capsys.readouterr().out)


@pytest.mark.parametrize("args, message", [
    (["train", "--arch", "missing.json"], "missing.json: cannot read"),
    (["train", "--arch", "resnet"], "--arch: 'resnet' is neither a preset"),
    (["train", "--data-opt", "oops"], "--data-opt: expected key=value, got 'oops'"),
    (["data", "describe", "movielens100k", "--data-opt", "x=1"], "takes no options"),
])
def test_bad_input_gives_a_clear_error(args, message, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("autorec: error:") and message in err


def test_bad_arch_json_names_the_key(tmp_path, capsys):
    from autorec.data import load_dataset
    from autorec.presets import preset

    data = json.loads(preset("dlrm", load_dataset("movielens100k").schema).to_json())
    data["layers"][0]["n_passthrough"] = -1
    (tmp_path / "arch.json").write_text(json.dumps(data))
    assert main(["train", "--arch", str(tmp_path / "arch.json")]) == 2
    assert "layers[0].n_passthrough: expected an integer >= 0, got -1" in capsys.readouterr().err


def test_data_describe_json(capsys):
    assert main(["data", "describe", "movielens100k", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["rows"] == {"train": 80_000, "val": 10_000, "test": 10_000}
    assert {"name": "genres", "num_embeddings": 20, "multi_hot": True} in info["sparse"]


def test_parse_options_names_the_flag_its_pairs_came_from():
    from autorec.cli import UsageError, parse_options

    assert parse_options(["a=1", "b=x", "c=[1, 2]"], "--opt") == {"a": 1, "b": "x", "c": [1, 2]}
    with pytest.raises(UsageError, match="--opt: expected key=value, got 'oops'"):
        parse_options(["oops"], "--opt")


def test_require_counts_names_the_flag_below_its_floor():
    import argparse

    from autorec.cli.common import UsageError, require_counts

    args = argparse.Namespace(batch_size=0, polish_steps=-1, repeats=0)
    with pytest.raises(UsageError, match="--batch-size: expected a positive integer, got 0"):
        require_counts(args, positive=["batch_size"])
    with pytest.raises(UsageError, match="--polish-steps: expected 0 or more, got -1"):
        require_counts(args, non_negative=["repeats", "polish_steps"])


@pytest.mark.parametrize("args, message", [
    (["precision", "probe", "--rows", "0"], "--rows: expected a positive integer, got 0"),
    (["precision", "probe", "--epochs", "-1"], "--epochs: expected 0 or more, got -1"),
])
def test_count_flags_give_one_line(args, message, capsys):
    assert main(args) == 2
    assert capsys.readouterr().err.strip() == f"autorec: error: {message}"
