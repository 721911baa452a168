import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import optuna
import pytest
import yaml
from optuna.trial import TrialState

from autorec.dashboard import FIGURE_PREFIX, SAVED_FIGURES_ATTR, prepare_dashboard, saved_figure_ids
from autorec.report import empty_figure
from autorec.study import StudyConfig, open_storage, run_study, trial_arch

ROOT = Path(__file__).resolve().parents[1]
PLOT_DATA = "dashboard:plot_data:"


@pytest.fixture(scope="module")
def config(tmp_path_factory) -> StudyConfig:
    """One real tiny study (3 trials on synthetic data) shared by the module."""
    tmp = tmp_path_factory.mktemp("dashboard")
    raw = {
        "name": "d", "data": {"name": "synthetic", "options": {"preset": "tiny", "num_samples": 2000}},
        "space": str(ROOT / "search_spaces" / "zoo.yaml"), "strategy": "random", "objectives": ["val_auc"],
        "budget": {"trials": 3, "epochs": 1, "batch_size": 256, "max_steps_per_epoch": 3},
        "pruner": "none", "seed": 0,
    }
    (tmp / "study.yaml").write_text(yaml.safe_dump(raw))
    loaded = StudyConfig.load(tmp / "study.yaml")
    run_study(loaded, log=lambda *_: None)
    return loaded


def load(config: StudyConfig) -> optuna.Study:
    return optuna.load_study(study_name=config.name, storage=open_storage(config.storage_url))


def plot_attrs(study: optuna.Study, config: StudyConfig) -> dict[str, str]:
    """optuna-dashboard's records of the saved figures (study system attrs, read from the storage)."""
    storage = open_storage(config.storage_url)
    attrs = storage.get_study_system_attrs(storage.get_study_id_from_name(study.study_name))
    return {k: v for k, v in attrs.items() if k.startswith(PLOT_DATA)}


def test_prepare_dashboard_replaces_its_figures_instead_of_adding_copies(config):
    study = load(config)
    ids = prepare_dashboard(study)
    assert ids == [f"{FIGURE_PREFIX}{key}" for key in ("history", "pareto", "importance", "best-arch")]
    first = plot_attrs(study, config)
    assert saved_figure_ids(study) == set(ids)
    assert prepare_dashboard(study) == ids
    assert plot_attrs(study, config).keys() == first.keys() and saved_figure_ids(study) == set(ids)
    # A figure an earlier run saved that this one no longer makes is blanked, not left stale (a
    # storage cannot delete it).
    from optuna_dashboard import save_plotly_graph_object

    save_plotly_graph_object(study, empty_figure("old", "stale"), graph_object_id=f"{FIGURE_PREFIX}old")
    study.set_user_attr(SAVED_FIGURES_ATTR, [*ids, f"{FIGURE_PREFIX}old"])
    prepare_dashboard(study)
    prefix = f"{PLOT_DATA}{FIGURE_PREFIX}old:"
    old = "".join(v for k, v in sorted(plot_attrs(study, config).items()) if k.startswith(prefix))
    assert "no longer produced" in json.loads(old)["layout"]["annotations"][0]["text"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str, timeout: float = 10.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        assert response.status == 200
        return response.read()


def wait_for(url: str, process: subprocess.Popen, timeout: float = 60.0) -> bytes:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"the dashboard exited with code {process.returncode}: "
                                 f"{process.stderr.read().decode()[-2000:]}")
        try:
            return get(url, timeout=5)
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.3)
    raise AssertionError(f"no answer from {url} in {timeout} s")


def test_the_real_optuna_dashboard_serves_the_study_figures_and_artifacts(config):
    study = load(config)
    ids = prepare_dashboard(study)
    port = free_port()
    code = ("from autorec.dashboard import serve_dashboard; "
            f"serve_dashboard({config.storage_url!r}, host='127.0.0.1', port={port}, "
            f"artifact_dir={str(config.directory / 'artifacts')!r})")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        base = f"http://127.0.0.1:{port}"
        summaries = json.loads(wait_for(f"{base}/api/studies", process))["study_summaries"]
        (summary,) = [s for s in summaries if s["study_name"] == config.name]
        detail = json.loads(get(f"{base}/api/studies/{summary['study_id']}"))
        trials = study.get_trials(states=(TrialState.COMPLETE,))
        assert len(detail["trials"]) == len(trials) == 3
        graphs = {g["id"]: json.loads(g["graph_object"]) for g in detail["plotly_graph_objects"]}
        assert set(ids) <= set(graphs) == saved_figure_ids(study)  # plus any blanked by the test above
        flops = [t.user_attrs["costs"]["flops"] for t in trials]
        assert graphs[f"{FIGURE_PREFIX}pareto"]["data"][0]["x"] == flops
        assert graphs[f"{FIGURE_PREFIX}history"]["data"][0]["y"] == [t.value for t in trials]
        # The trials' arch.json artifacts come from the artifact directory.
        first = detail["trials"][0]
        (artifact,) = first["artifacts"]
        body = get(f"{base}/artifacts/{summary['study_id']}/{first['trial_id']}/{artifact['artifact_id']}")
        assert json.loads(body) == trial_arch(study.trials[0]).to_dict()
        assert b"<html" in get(f"{base}/dashboard").lower()
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        process.stderr.close()
