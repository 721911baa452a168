"""The precision probe: its verdicts match models built from the spec, the CLI, the slow
MovieLens check that it flags where MXFP4 hurts a trained Wukong."""

from __future__ import annotations

import json
from itertools import islice
from pathlib import Path

import numpy as np
import pytest
import torch

from autorec.cli import main
from autorec.cli.precision import rec_model
from autorec.data import load_dataset
from autorec.metrics import binary_metrics
from autorec.models import build_model
from autorec.precision.probe import ProbeResult, kurtosis, probe
from autorec.precision.recipes import with_precision
from autorec.presets import preset

FORMATS = ("mxfp8_e4m3", "mxfp4_e2m1")


@pytest.fixture(scope="module")
def movielens():
    return load_dataset("movielens100k", seed=0)


def _batches(dataset, rows: int) -> list:
    return list(islice(dataset.loader("val", 1000, shuffle=False, seed=0), rows // 1000))


def _logits(model: torch.nn.Module, batches: list) -> torch.Tensor:
    model.eval()
    with torch.no_grad():
        return torch.cat([model(b.dense_features, b.sparse_features).double() for b in batches])


def _check_against_built_models(result: ProbeResult, model: torch.nn.Module, batches: list) -> None:
    """Each part's numbers equal those of a model built from the spec with that part in the format."""
    base = _logits(model, batches)
    labels = torch.cat([b.labels for b in batches]).numpy()
    auc = binary_metrics(labels, torch.sigmoid(base).numpy())["auc"]
    assert result.baseline_auc == pytest.approx(auc, abs=1e-12)
    for part in result.parts:
        for fmt in result.formats:
            built = build_model(with_precision(model.spec, fmt, [part.part]))
            built.load_state_dict(model.state_dict())
            logits = _logits(built, batches)
            error = float((logits - base).norm() / base.norm())
            drop = auc - binary_metrics(labels, torch.sigmoid(logits).numpy())["auc"]
            assert part.logit_error[fmt] == pytest.approx(error, rel=1e-6, abs=1e-9)
            assert part.auc_drop[fmt] == pytest.approx(drop, abs=1e-9)
            flagged = drop > result.auc_tolerance or error > result.error_tolerance
            assert part.unsafe[fmt] == flagged, (part.part, fmt)


def test_probe_verdicts_are_those_of_models_built_from_the_spec(movielens) -> None:
    torch.manual_seed(0)
    spec = preset("wukong", movielens.schema, dim=8)
    model = build_model(spec)
    batches = _batches(movielens, 2000)
    result = probe(model, batches, FORMATS)
    assert [p.part for p in result.parts] == ["dense_arch", "layers.0", "layers.1", "over_arch"]
    _check_against_built_models(result, model, batches)
    assert result.rows == 2000
    # Every site is measured, and MXFP4 errs more than MXFP8 at each.
    assert len(result.sites) == len([m for m in model.modules() if type(m) is torch.nn.Linear])
    assert all(s.error["mxfp4_e2m1"] > s.error["mxfp8_e4m3"] > 0 for s in result.sites)
    assert all(0 <= s.act_saturated["mxfp4_e2m1"] <= 1 for s in result.sites)
    json.dumps(result.to_dict())


def test_probe_restores_the_model_precisions(movielens) -> None:
    torch.manual_seed(0)
    spec = with_precision(preset("dlrm", movielens.schema, dim=8), "mxfp6_e2m3", ["over_arch"])
    model = build_model(spec)
    batches = _batches(movielens, 1000)
    before = _logits(model, batches)
    probe(model, batches, FORMATS)
    assert torch.equal(_logits(model, batches), before)
    assert model.over_arch[1].precision == "mxfp6_e2m3"


def test_kurtosis() -> None:
    gaussian = torch.randn(200_000, generator=torch.Generator().manual_seed(0))
    assert kurtosis(gaussian) == pytest.approx(3, abs=0.1)
    assert kurtosis(torch.ones(10)) == 0.0
    spiky = torch.zeros(1000)
    spiky[0] = 1
    assert kurtosis(spiky) > 900


def test_bad_format_is_named() -> None:
    with pytest.raises(ValueError, match="unknown precision 'fp7'"):
        probe(torch.nn.Linear(2, 2), [object()], ["fp7"])


def test_cli_json_and_html(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    html = tmp_path / "probe.html"
    code = main(["precision", "probe", "--arch", "dlrm", "--data", "movielens100k", "--epochs", "0",
                 "--rows", "2000", "--batch-size", "1000", "--formats", ",".join(FORMATS), "--json",
                 "--html", str(html)])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["formats"] == list(FORMATS) and out["rows"] == 2000
    assert {p["part"] for p in out["parts"]} == {"dense_arch", "layers.0", "over_arch"}
    text = html.read_text()
    assert "plotly" in text.lower() and "layers.0" in text and len(text) > 1_000_000  # plotly.js inlined


def test_cli_rejects_an_unknown_format(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["precision", "probe", "--arch", "dlrm", "--epochs", "0", "--rows", "1000",
                 "--formats", "fp7"])
    assert code == 2
    assert "unknown precision 'fp7'" in capsys.readouterr().err


@pytest.mark.slow
def test_probe_flags_where_mxfp4_hurts_a_trained_wukong(movielens) -> None:
    from autorec.train.trainer import TrainConfig, Trainer

    spec = preset("wukong", movielens.schema)
    trainer = Trainer(spec, movielens, TrainConfig(epochs=1, seed=0, progress=False))
    trainer.fit()
    model = rec_model(trainer.model)
    batches = _batches(movielens, 10000)
    result = probe(model, batches, FORMATS)
    flagged = result.unsafe_parts("mxfp4_e2m1")
    assert result.unsafe_parts("mxfp8_e4m3") == []
    assert flagged, "MXFP4 hurts some part of a trained Wukong"
    for part in result.parts:
        assert part.logit_error["mxfp4_e2m1"] > part.logit_error["mxfp8_e4m3"]
    # Flagged parts, quantised together, hurt more than the unflagged ones quantised together.
    labels = torch.cat([b.labels for b in batches]).numpy()

    def auc_with(parts: list[str]) -> float:
        built = build_model(with_precision(spec, "mxfp4_e2m1", parts))
        # World size 1: each sharded table's one local shard is the whole table.
        built.load_state_dict({k: v.local_shards()[0].tensor if hasattr(v, "local_shards") else v
                               for k, v in model.state_dict().items()})
        return binary_metrics(labels, torch.sigmoid(_logits(built, batches)).numpy())["auc"]

    safe = [p.part for p in result.parts if p.part not in flagged]
    assert result.baseline_auc - auc_with(flagged) > result.baseline_auc - auc_with(safe)
    assert np.isfinite(result.baseline_auc)
