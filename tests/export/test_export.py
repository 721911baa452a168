import hashlib
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from torchrec.datasets.utils import Batch
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from autorec.arch import ArchSpec, DotConfig, MLPConfig, TableSpec
from autorec.data import load_dataset
from autorec.export import (
    ARCH,
    CARD,
    FILES,
    MANIFEST,
    PREDICTIONS,
    PROGRAM,
    WEIGHTS,
    ExportError,
    export_model,
    export_trained,
    gather_state_dict,
    load_model,
    load_predictions,
    load_program,
    program_inputs,
)
from autorec.models import build_model
from autorec.presets import preset
from autorec.train.trainer import TrainConfig, Trainer

RETRAIN = "autorec train --data movielens100k --arch dlrm --dim 8 --epochs 1"


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A DLRM trained for 5 steps on MovieLens-100K, and its export."""
    ds = load_dataset("movielens100k")
    trainer = Trainer(preset("dlrm", ds.schema, dim=8), ds,
                      TrainConfig(epochs=1, max_steps_per_epoch=5, batch_size=256, progress=False))
    result = trainer.fit()
    out = export_trained(trainer, tmp_path_factory.mktemp("export") / "dlrm", metrics=result.to_dict(),
                         retrain_command=RETRAIN)
    return trainer, result, out


def test_export_writes_every_file_and_matches_the_trained_model(trained):
    trainer, result, out = trained
    assert sorted(p.name for p in out.iterdir()) == sorted(FILES)
    assert ArchSpec.load(out / ARCH) == trainer.spec
    # The trainer's sharded tables and data-parallel ones, gathered, are exactly the saved weights.
    weights = load_file(out / WEIGHTS)
    assert weights.keys() == build_model(trainer.spec).state_dict().keys()
    gathered = gather_state_dict(trainer.model)
    assert all(torch.equal(weights[k], gathered[k]) for k in weights)
    # Recorded at export: the plain copy gave the trained (sharded) model's logits.
    checks = json.loads((out / PREDICTIONS).read_text())["checks"]
    assert checks["trained_max_abs_diff"] <= 1e-5 and checks["program_max_abs_diff"] <= 1e-6
    manifest = json.loads((out / MANIFEST).read_text())
    assert manifest["metrics"]["test"]["auc"] == result.test["auc"]
    assert manifest["costs"]["forward_flops"] > 0 and manifest["retrain_command"] == RETRAIN
    for name, digest in manifest["files"].items():
        assert hashlib.sha256((out / name).read_bytes()).hexdigest() == digest


def test_model_card_has_metrics_costs_layers_and_the_retrain_command(trained):
    _, result, out = trained
    card = (out / CARD).read_text()
    assert card.startswith("# dlrm: autorec model card")
    assert f"| test.auc | {result.test['auc']:.6g} |" in card
    assert "| forward_flops |" in card and "| embedding_bytes |" in card
    for row in ("| dense_arch | mlp |", "| layers.0 | dlrm |", "| over_arch | mlp |",
                "| t_user_id | user_id |"):
        assert row in card
    assert f"```sh\n{RETRAIN}\n```" in card


FRESH_PROCESS = textwrap.dedent("""
    import json, sys
    import torch
    from torchrec.sparse.jagged_tensor import KeyedJaggedTensor
    from autorec.export import load_model, load_predictions, load_program

    out = sys.argv[1]
    model, program, sample = load_model(out), load_program(out), load_predictions(out)
    with torch.no_grad():
        eager = model(sample.dense, sample.kjt())
        compiled = program.module()(sample.dense, sample.values, sample.lengths)
        # Another batch size and other jagged lengths (zero included) than at export time.
        g = torch.Generator().manual_seed(1)
        rows = [t.num_embeddings for t in model.spec.tables for _ in t.features]
        lengths = torch.randint(0, 5, (len(rows), 7), generator=g)
        values = torch.cat([torch.randint(0, n, (int(k.sum()),), generator=g) for n, k in zip(rows, lengths)])
        dense = torch.rand(7, model.spec.n_dense, generator=g)
        kjt = KeyedJaggedTensor(keys=list(sample.features), values=values, lengths=lengths.flatten())
        other_eager = model(dense, kjt)
        other_compiled = program.module()(dense, values, lengths)
    print(json.dumps({
        "eager_equal": torch.equal(eager, sample.logits),
        "program_diff": (compiled - sample.logits).abs().max().item(),
        "other_shape": list(other_compiled.shape),
        "other_diff": (other_compiled - other_eager).abs().max().item(),
        "values": [values.numel(), sample.values.numel()],
    }))
""")


def test_a_fresh_process_reproduces_the_recorded_predictions(trained):
    _, _, out = trained
    proc = subprocess.run([sys.executable, "-c", FRESH_PROCESS, str(out)], capture_output=True, text=True,
                          timeout=300, cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["eager_equal"]
    assert result["program_diff"] <= 1e-6
    assert result["other_shape"] == [7] and result["other_diff"] <= 1e-6
    assert result["values"][0] != result["values"][1]


# ---- plain models, no trainer ----------------------------------------------------------------
def narrow_spec() -> ArchSpec:
    """No dense features, tables narrower and wider than D (projections), two layers."""
    return ArchSpec(name="narrow", dim=8, over_arch=(16,),
                    tables=(TableSpec(name="a", features=("a1", "a2"), num_embeddings=20, dim=4),
                            TableSpec(name="b", features=("b",), num_embeddings=30, dim=16)),
                    layers=(DotConfig(n_passthrough=0, self_interaction=True),
                            MLPConfig(hidden=(16,), n_out=2)))


def random_batch(spec: ArchSpec, size: int, seed: int, extra: bool = False) -> Batch:
    g = torch.Generator().manual_seed(seed)
    names = list(spec.feature_names)
    lengths = torch.randint(0, 4, (len(names), size), generator=g)
    values = torch.randint(0, 20, (int(lengths.sum()),), generator=g)
    if extra:  # a feature the model does not use, first: program_inputs must skip it
        names, lengths = ["unused", *names], torch.cat([torch.ones(1, size, dtype=torch.int64), lengths])
        values = torch.cat([torch.zeros(size, dtype=torch.int64), values])
    sparse = KeyedJaggedTensor(keys=names, values=values, lengths=lengths.flatten())
    return Batch(dense_features=torch.rand(size, spec.n_dense, generator=g), sparse_features=sparse,
                 labels=torch.zeros(size))


@pytest.fixture(scope="module")
def plain_export(tmp_path_factory):
    """An export of an untrained model (no trainer): what the malformed-directory tests break."""
    torch.manual_seed(0)
    spec = narrow_spec()
    return export_model(build_model(spec), tmp_path_factory.mktemp("plain") / "narrow",
                        sample_batch=random_batch(spec, 4, seed=0))


def broken_copy(out: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "broken"
    shutil.copytree(out, copy)
    return copy


@pytest.mark.parametrize("name", [ARCH, WEIGHTS])
def test_load_model_names_a_missing_file(plain_export, tmp_path, name):
    copy = broken_copy(plain_export, tmp_path)
    (copy / name).unlink()
    with pytest.raises(ExportError, match=rf"{name}: missing from the export directory"):
        load_model(copy)


def test_load_program_names_a_missing_or_corrupt_program(plain_export, tmp_path):
    copy = broken_copy(plain_export, tmp_path)
    (copy / PROGRAM).write_bytes(b"not a zip archive")
    with pytest.raises(ExportError, match=rf"{PROGRAM}: not a readable torch.export program"):
        load_program(copy)
    (copy / PROGRAM).unlink()
    with pytest.raises(ExportError, match=rf"{PROGRAM}: missing"):
        load_program(copy)


def test_corrupt_or_mismatched_files_are_named(plain_export, tmp_path):
    out = plain_export
    copy = broken_copy(out, tmp_path)
    (copy / ARCH).write_text('{"dim": 8, "tables": [')
    with pytest.raises(ExportError, match=r"arch\.json:1:\d+: invalid JSON"):
        load_model(copy)
    (copy / ARCH).write_text(json.dumps({**json.loads((out / ARCH).read_text()), "dim": "eight"}))
    with pytest.raises(ExportError, match=r"arch\.json: dim: expected an integer"):
        load_model(copy)
    # Another architecture than the weights were exported with.
    (copy / ARCH).write_text(ArchSpec.load(out / ARCH).replace(over_arch=(64,)).to_json())
    with pytest.raises(ExportError, match=r"weights\.safetensors: the weights were exported for another"):
        load_model(copy)
    shutil.copy(out / ARCH, copy / ARCH)
    (copy / WEIGHTS).write_bytes((out / WEIGHTS).read_bytes()[:1000])
    with pytest.raises(ExportError, match=r"weights\.safetensors: not a readable safetensors file"):
        load_model(copy)
    (copy / PREDICTIONS).write_text('{"features": []}')
    with pytest.raises(ExportError, match=r"predictions\.json: malformed"):
        load_predictions(copy)
    with pytest.raises(ExportError, match="not an export directory"):
        load_model(tmp_path / "nowhere")


def test_export_model_round_trip_with_projections_and_no_dense(tmp_path):
    torch.manual_seed(0)
    spec = narrow_spec()
    model = build_model(spec).eval()
    out = export_model(model, tmp_path / "narrow", sample_batch=random_batch(spec, 4, seed=0, extra=True))
    loaded, program = load_model(out), load_program(out)
    assert loaded.spec == spec and not loaded.training
    with torch.no_grad():
        for size, seed in ((1, 1), (9, 2)):
            batch = random_batch(spec, size, seed, extra=True)
            expected = model(batch.dense_features, batch.sparse_features)
            assert torch.equal(loaded(batch.dense_features, batch.sparse_features), expected)
            got = program.module()(*program_inputs(spec, batch.dense_features, batch.sparse_features))
            assert got.shape == (size,) and (got - expected).abs().max() <= 1e-6
    assert "(none recorded)" in (out / CARD).read_text()  # no metrics given


def test_export_refuses_weights_that_disagree_with_the_trained_model(tmp_path):
    spec = narrow_spec()
    model = build_model(spec).eval()
    batch = random_batch(spec, 4, seed=0)
    with torch.no_grad():
        logits = model(batch.dense_features, batch.sparse_features)
    with pytest.raises(ExportError, match="differ from the trained model's by up to 1"):
        export_model(model, tmp_path / "x", sample_batch=batch, trained_logits=logits + 1)


def test_program_inputs_name_missing_features():
    spec = narrow_spec()
    batch = random_batch(spec.replace(tables=spec.tables[:1], layers=()), 2, seed=0)  # a1 and a2 only
    with pytest.raises(ValueError, match=r"lacks features \['b'\]"):
        program_inputs(spec, batch.dense_features, batch.sparse_features)


def test_export_of_a_hashed_table_folds_ids_in_the_program(tmp_path):
    torch.manual_seed(0)
    base = narrow_spec()
    hashed = TableSpec(name="b", features=("b",), num_embeddings=7, dim=16, hash_from=1000)
    spec = base.replace(tables=(base.tables[0], hashed), dropped=("c",))
    model = build_model(spec).eval()
    out = export_model(model, tmp_path / "hashed", sample_batch=random_batch(spec, 4, seed=0, extra=True))
    loaded, program = load_model(out), load_program(out)
    assert loaded.spec == spec
    batch = random_batch(spec, 6, seed=3)
    by_name = batch.sparse_features.to_dict()
    big = KeyedJaggedTensor.from_jt_dict({**by_name, "b": type(by_name["b"])(
        values=by_name["b"].values() * 37 + 500, lengths=by_name["b"].lengths())})  # ids up to ~1200
    with torch.no_grad():
        expected = model(batch.dense_features, big)
        got = program.module()(*program_inputs(spec, batch.dense_features, big))
    assert (got - expected).abs().max() <= 1e-6
