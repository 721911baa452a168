"""benchmarks/oneshot_tau_parts.py: each supernet's tau split into layers and embeddings, over a pool."""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest

from autorec.oneshot.parts import PARTS
from benchmarks.oneshot_cross_scores import pooled_pairs
from benchmarks.oneshot_tau_parts import main, tau_parts
from tests.studyfiles import MICRO_BUDGET, run_micro_oneshot, write_study


def test_figures_per_supernet_and_the_command_line(micro_runs, tmp_path, capsys):
    figures = tau_parts("_m", ["_m"], [1], 256, micro_runs, [0, 1])
    assert figures["m_seed1_pairs"] == len(pooled_pairs(["_m"], [0, 1], micro_runs))
    for part in PARTS:  # None where a part scores every architecture alike
        assert figures[f"m_seed1_tau_{part}"] is None or -1.0 <= figures[f"m_seed1_tau_{part}"] <= 1.0
        assert figures[f"m_seed1_sd_{part}"] >= 0.0
    assert figures["m_seed1_tau_joint"] is not None
    pool = pooled_pairs(["_m"], [0, 1], micro_runs)
    for kind in {str(p["layer0.kind"]) for p, _ in pool}:  # each first kind's means, of its own rows
        own = [v for p, v in pool if str(p["layer0.kind"]) == kind]
        assert figures[f"m_seed1_trained_mean_{kind}"] == pytest.approx(sum(own) / len(own))
        assert 0.0 < figures[f"m_seed1_layers_mean_{kind}"] < 1.0
    shared = tau_parts("_m", ["_m"], [1], 256, micro_runs, [0, 1], heads=False)
    assert "m_seed1_tau_joint_shared" in shared and "m_seed1_tau_joint" not in shared
    out = tmp_path / "parts.json"
    main(["--tag", "_m", "--tau-from", "_m", "--seeds", "0", "--pool-seeds", "0,1", "--samples", "256",
          "--root", str(micro_runs), "--out", str(out)])
    record = json.loads(out.read_text())
    assert record["m_samples"] == 256 and "m_seed0_tau_joint" in record and "m_commit" in record
    for bad, message in ((["--tag", "p"], "--tag: expected a run's tag"),
                         (["--tag", "_m", "--seeds", "0;1"], "--seeds: expected integers"),
                         (["--tag", "_m", "--pool-seeds", "x"], "--pool-seeds: expected integers"),
                         (["--tag", "_m", "--samples", "0"], "--samples: expected a positive number")):
        with pytest.raises(SystemExit):
            main([*bad, "--tau-from", "_m", "--root", str(micro_runs), "--out", str(out)])
        assert message in capsys.readouterr().err
    with pytest.raises(SystemExit, match="oneshot_q_seed0"):  # a run that is not there is named
        main(["--tag", "_q", "--tau-from", "_m", "--seeds", "0", "--pool-seeds", "0,1",
              "--root", str(micro_runs), "--out", str(out)])


def test_a_study_with_kind_heads_is_scored_through_them(micro_runs, tmp_path):
    from benchmarks.oneshot_tpe_proxy import load_supernet, use_kind_heads

    root = run_micro_oneshot(tmp_path, "_h", (0,), kind_heads=3)
    loaded = load_supernet("_h", 0, 256, root)
    assert loaded.search.heads is None and use_kind_heads(loaded)
    assert loaded.search.heads is not None and loaded.search.heads.kinds  # its heads, read back
    plain = load_supernet("_h", 0, 256, root)  # the same supernet through its one over-arch
    names = loaded.search.names
    path = next({n: str(t.params[n]) for n in names}
                for t in loaded.oneshot.trials if set(names) <= set(t.params))
    through_heads = loaded.search.rescore(loaded.search.values_of(path), 256)["val_auc"]
    assert through_heads != plain.search.rescore(plain.search.values_of(path), 256)["val_auc"]
    without = load_supernet("_m", 0, 256, micro_runs)  # a study that trained none: left as it is
    assert not use_kind_heads(without) and without.search.heads is None


def _archived_random_study(archive_dir: Path, space: Path, name: str, trials: int) -> int:
    """A random multi-trial study of ``trials`` on ``space`` archived as ``<name>.jsonl``; its
    complete trials."""
    from autorec.study import StudyConfig, run_study
    from benchmarks.study_archive import archive

    folder = archive_dir / f"{name}_run"
    folder.mkdir(parents=True)
    budget = {**MICRO_BUDGET, "trials": trials}
    config = StudyConfig.load(write_study(folder, name=name, space=str(space), budget=budget))
    run_study(config, log=lambda *_: None)
    archive(name, config.storage_url, archive_dir / f"{name}.jsonl")
    return len(optuna.load_study(study_name=name, storage=config.storage_url).get_trials(
        states=(optuna.trial.TrialState.COMPLETE,)))


def test_a_predictor_fitted_on_another_studys_trials_ranks_the_pool(micro_runs, tmp_path):
    archive_dir = tmp_path / "archive"
    complete = _archived_random_study(archive_dir, micro_runs / "micro.yaml", "rnd", 6)
    figures = tau_parts("_m", ["_m"], [1], 256, micro_runs, [0, 1], archive_dir=archive_dir,
                        fit_on=["rnd"], scores_out=tmp_path / "scores.json")
    kept = json.loads((tmp_path / "scores.json").read_text())
    assert {"machine", "commit"} <= kept.keys()
    rows = kept["m_seed1"]  # each architecture's scores
    assert [r["set"] for r in rows] == ["pool"] * figures["m_seed1_pairs"] + ["fit"] * complete
    assert all(set(PARTS) <= set(r) and 0.0 < r["trained"] < 1.0 for r in rows)
    assert figures["m_seed1_predictor_pairs"] == complete >= 4
    for key in ("tau_predicted", "predictor_fit_tau"):
        assert -1.0 <= figures[f"m_seed1_{key}"] <= 1.0
    assert {"m_seed1_predictor_weight_layers", "m_seed1_predictor_weight_features"} <= figures.keys()
    # the pool's own figures are the run's without a predictor: the fit's trials are scored apart
    plain = tau_parts("_m", ["_m"], [1], 256, micro_runs, [0, 1])
    assert {k: v for k, v in figures.items() if "predict" not in k} == plain
    # a study on a space the supernet cannot score is refused, naming the file and the trial
    other = tmp_path / "other.yaml"
    other.write_text((micro_runs / "micro.yaml").read_text().replace("[[16]]", "[[32]]"))
    _archived_random_study(archive_dir, other, "wide", 4)
    with pytest.raises(ValueError, match=r"wide\.jsonl: trial 0's architecture does not derive back"):
        tau_parts("_m", ["_m"], [1], 256, micro_runs, [0, 1], archive_dir=archive_dir, fit_on=["wide"])
    with pytest.raises(SystemExit, match="no archive of study 'gone'"):
        tau_parts("_m", ["_m"], [1], 256, micro_runs, [0, 1], archive_dir=archive_dir, fit_on=["gone"])
