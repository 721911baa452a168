"""benchmarks/oneshot_tau_parts.py splits the proxy of tau's architectures into layers and embeddings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.oneshot_cross_scores import pooled_pairs, winners
from benchmarks.oneshot_tau_parts import (
    PARTS,
    feature_settings,
    main,
    proxy_parts,
    reference_setting,
    setting_of,
    tau_parts,
)
from benchmarks.oneshot_tpe_proxy import load_supernet
from tests.studyfiles import run_micro_oneshot


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return run_micro_oneshot(tmp_path_factory.mktemp("parts"), "_p", (0, 1), calibrate=2)


def test_the_parts_add_up_and_the_reference_embedding_costs_nothing(root):
    pairs = pooled_pairs(["_p"], [0, 1], root)
    loaded = load_supernet("_p", 0, 256, root)
    names = loaded.search.names
    reference = reference_setting(names)
    assert reference and all(float(v) == max(float(x) for x in names[n]) for n, v in reference.items())
    layers = {n: v for n, v in winners("_p", [0], root)[0]["params"].items() if not n.startswith("emb.")}
    at_reference = {**pairs[0][0], **reference}  # one architecture already at the reference embedding
    parts = proxy_parts(loaded, [*pairs, (at_reference, 0.5)], layers, 256)
    assert set(parts) == set(PARTS)
    for i in range(len(pairs) + 1):
        assert parts["additive"][i] == pytest.approx(parts["layers"][i] + parts["features"][i])
        assert parts["own_features"][i] == pytest.approx(parts["joint"][i] - parts["layers"][i])
        assert 0.0 < parts["joint"][i] < 1.0 and 0.0 < parts["layers"][i] < 1.0
    assert parts["features"][-1] == 0.0
    assert parts["joint"][-1] == pytest.approx(parts["layers"][-1])
    # a drawn architecture that differs from the reference in its embeddings has a feature part
    drawn = [i for i, (p, _) in enumerate(pairs) if any(str(p[n]) != v for n, v in reference.items())]
    assert drawn and any(parts["features"][i] != 0.0 for i in drawn)


def test_each_setting_is_scored_once_and_read_back_by_its_architecture():
    names = {"emb.a": ["0", "4", "8"], "emb.a.hash": ["1", "0.5"], "emb.b": ["0", "4", "8"],
             "emb.b.hash": ["1", "0.5"], "layer0.kind": ["dlrm", "dcnv2"]}
    settings = feature_settings(names)
    assert len(settings) == 2 * (1 + 2 + 1)  # per feature: dropped once, width 4 twice, width 8 hashed
    assert len(set(settings)) == len(settings)
    reference = reference_setting(names)
    params = {"emb.a": "0", "emb.a.hash": "0.5", "emb.b": "4", "emb.b.hash": "0.5", "layer0.kind": "dlrm"}
    assert setting_of(params, "emb.a", reference) == ("0", None)  # a dropped feature's hash is moot
    assert setting_of(params, "emb.b", reference) == ("4", "0.5")
    assert ("emb.a", "0", None) in settings and ("emb.b", "4", "0.5") in settings


def test_figures_per_supernet_and_the_command_line(root, tmp_path, capsys):
    figures = tau_parts("_p", ["_p"], [1], 256, root, [0, 1])
    assert figures["p_seed1_pairs"] == len(pooled_pairs(["_p"], [0, 1], root))
    for part in PARTS:
        assert -1.0 <= figures[f"p_seed1_tau_{part}"] <= 1.0 or figures[f"p_seed1_tau_{part}"] != \
            figures[f"p_seed1_tau_{part}"]  # NaN where a part scores every architecture alike
        assert figures[f"p_seed1_sd_{part}"] >= 0.0
    out = tmp_path / "parts.json"
    main(["--tag", "_p", "--tau-from", "_p", "--seeds", "0", "--pool-seeds", "0,1", "--samples", "256",
          "--root", str(root), "--out", str(out)])
    record = json.loads(out.read_text())
    assert record["p_samples"] == 256 and "p_seed0_tau_joint" in record and "p_commit" in record
    for bad, message in ((["--tag", "p"], "--tag: expected a run's tag"),
                         (["--tag", "_p", "--seeds", "0;1"], "--seeds: expected integers"),
                         (["--tag", "_p", "--pool-seeds", "x"], "--pool-seeds: expected integers"),
                         (["--tag", "_p", "--samples", "0"], "--samples: expected a positive number")):
        with pytest.raises(SystemExit):
            main([*bad, "--tau-from", "_p", "--root", str(root), "--out", str(out)])
        assert message in capsys.readouterr().err
    with pytest.raises(SystemExit, match="oneshot_q_seed0"):  # a run that is not there is named
        main(["--tag", "_q", "--tau-from", "_p", "--seeds", "0", "--pool-seeds", "0,1", "--root", str(root),
              "--out", str(out)])
