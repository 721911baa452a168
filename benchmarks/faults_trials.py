"""Issue 24's fault rows "bad trials" and "a killed rank": real searches and trainings that fail.

    .venv/bin/python -m benchmarks.faults_trials        # prints the figures as JSON

:func:`measure` gives flat figures (``benchmarks/faults.py`` merges them into faults.json), and
the tests (``tests/faults/test_bad_trials.py``, ``test_rank_kill.py``) run the same steps.

Bad trials: three tiny studies in one SQLite storage, each searched by the real ``autorec search``
process, fail trials in four real ways:

* ``raises``: trial 2's checkpoint folder is taken by a plain file, so its first checkpoint
  save raises the operating system's error;
* ``oom``: the space offers an over-arch of 40000 x 40000 (6.4 GB of weights) and the study
  caps each worker at 4 GiB (``budget.memory_gb``, RLIMIT_AS): its allocation fails;
* ``nan``: absurd learning rates (``train: {dense_lr: 1e30}``) make the loss NaN at step 1;
* ``time_limit``: 1000 epochs against ``budget.trial_time_limit_s: 1``.

Each bad trial must be FAIL with its reason and kind (``fail_reason``, ``fail_kind``), the
search must exit 0 having used its whole budget, and the real optuna-dashboard must show the
failed trials with their reasons. The killed rank is :mod:`benchmarks.faults_ranks`.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT_S = 600  # a tiny search takes seconds; this only ends a hung one
HUGE = [40000, 40000]  # over-arch widths whose weights (6.4 GB) exceed the 4 GiB cap, not the machine
SPACE = {
    "name": "faults", "description": "a small DLRM, its over-arch small or too wide for the memory cap",
    "dim": [8], "embedding": {"dim_ratio": [1], "groups": "per_feature", "precision": ["fp32"]},
    "dense_arch": [[16]], "over_arch": [[16]],
    "layers": {"num": {"low": 1, "high": 1}, "kinds": ["dlrm"], "precision": ["fp32"],
               "dlrm": {"n_passthrough": [1], "self_interaction": [False]}},
}
# Its checkpoint folder is a plain file. Under seed 0 the sampler gives trials 0 and 1 the huge
# over-arch and trial 2 the small one (its first training: later ones reuse the result).
BLOCKED_TRIAL = 2


@dataclass(frozen=True)
class Study:
    """One bad-trial study: its file's changes to the base study, and the fault classes it shows."""

    name: str
    changes: dict[str, Any]
    classes: tuple[str, ...]


STUDIES = (
    Study("mixed", {"budget": {"trials": 6, "memory_gb": 4}}, ("raises", "oom")),
    Study("nan", {"budget": {"trials": 2}, "train": {"dense_lr": 1e30, "embedding_lr": 1e30}}, ("nan",)),
    Study("time_limit", {"budget": {"trials": 2, "epochs": 1000, "patience": 1000, "batch_size": 64,
                                    "max_steps_per_epoch": None, "trial_time_limit_s": 1}},
          ("time_limit",)),
)
KINDS = {"raises": "error", "oom": "out_of_memory", "nan": "diverged", "time_limit": "time_limit"}


def write_study(folder: Path, study: Study) -> Path:
    """Write ``folder/<name>.yaml`` (and its space file); every study shares
    ``folder/faults.db``, so one dashboard serves them all."""
    folder.mkdir(parents=True, exist_ok=True)
    space = folder / f"{study.name}-space.yaml"
    # Only a study that caps its workers' memory may propose the huge over-arch: uncapped, its
    # training would take ~25 GB of the machine before failing.
    huge = "memory_gb" in study.changes.get("budget", {})
    space.write_text(yaml.safe_dump({**SPACE, "over_arch": [[16], HUGE] if huge else [[16]]}))
    config: dict[str, Any] = {
        "name": study.name, "space": str(space), "strategy": "random", "objectives": ["val_auc"],
        "data": {"name": "synthetic", "options": {"preset": "tiny", "num_samples": 2000}, "seed": 0},
        "storage": f"sqlite:///{folder / 'faults.db'}", "pruner": "none", "seed": 0,
    }
    budget = {"trials": 2, "epochs": 1, "batch_size": 256, "max_steps_per_epoch": 3,
              **study.changes.get("budget", {})}
    config.update({**study.changes, "budget": {k: v for k, v in budget.items() if v is not None}})
    path = folder / f"{study.name}.yaml"
    path.write_text(yaml.safe_dump(config))
    if "raises" in study.classes:
        blocked = folder / study.name / "trials" / str(BLOCKED_TRIAL)
        blocked.parent.mkdir(parents=True, exist_ok=True)
        blocked.write_text("not a folder: the trial's checkpoints cannot be written here\n")
    return path


def search(path: Path) -> tuple[int, dict[str, Any] | None, str]:
    """Run the real ``autorec search PATH --json``: (exit code, its summary or None, stderr's tail)."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "autorec.cli", "search", str(path), "--json"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    lines = proc.stdout.strip().splitlines()
    summary = json.loads(lines[-1]) if proc.returncode == 0 and lines else None
    return proc.returncode, summary, proc.stderr[-3000:]


def bad_trials(summary: dict[str, Any], fault: str) -> list[dict[str, Any]]:
    """The summary's trials that ``fault`` should have failed."""
    trials = summary["trials"]
    if fault == "raises":
        return [t for t in trials if t["number"] == BLOCKED_TRIAL]
    if fault == "oom":
        return [t for t in trials if t["costs"].get("dense_params", 0) > HUGE[0] * HUGE[1]]
    return trials


def judge(study: Study, code: int, summary: dict[str, Any] | None) -> dict[str, Any]:
    """Per fault class of ``study``: its bad trials (at least one) are all FAIL with the class's
    kind and a reason, and the study exited 0 after using its whole budget, every other trial
    complete."""
    out: dict[str, Any] = {}
    if code != 0 or summary is None:
        return {fault: {"failed": False, "completed": False, "why": f"exit code {code}"}
                for fault in study.classes}
    bad_numbers = {t["number"] for fault in study.classes for t in bad_trials(summary, fault)}
    others_ok = all(t["state"] == "COMPLETE" for t in summary["trials"] if t["number"] not in bad_numbers)
    # A proposal that repeats an architecture already trained reuses its result for free.
    used = sum(t["reused_from"] is None for t in summary["trials"]) == study.changes["budget"]["trials"]
    for fault in study.classes:
        bad = bad_trials(summary, fault)
        failed = bool(bad) and all(t["state"] == "FAIL" and t["fail_kind"] == KINDS[fault]
                                   and t["fail_reason"] for t in bad)
        out[fault] = {"failed": failed, "completed": used and others_ok, "trials": bad,
                      "why": "" if failed else f"bad trials {bad}"}
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dashboard_trials(study_file: Path, timeout_s: float = 120.0) -> dict[str, list[dict[str, Any]]]:
    """Start the real ``autorec dashboard`` on the study file's storage and read every study's
    trials from optuna-dashboard's HTTP API: {study name: [{number, state, user_attrs}]}."""
    port = free_port()
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    proc = subprocess.Popen([sys.executable, "-m", "autorec.cli", "dashboard", str(study_file),
                             "--port", str(port)], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base, deadline = f"http://127.0.0.1:{port}/api/studies", time.monotonic() + timeout_s
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"autorec dashboard exited with code {proc.returncode}")
            try:
                summaries = _get(base)["study_summaries"]
                break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"no answer from {base} in {timeout_s:.0f} s") from None
                time.sleep(0.3)
        return {s["study_name"]: [{"number": t["number"], "state": t["state"],
                                   "user_attrs": {a["key"]: a["value"] for a in t["user_attrs"]}}
                                  for t in _get(f"{base}/{s['study_id']}")["trials"]]
                for s in summaries}
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def shown(dashboard: dict[str, list[dict[str, Any]]], study: str, trials: list[dict[str, Any]]) -> bool:
    """True when the dashboard lists each of ``trials`` as failed, with its reason and kind."""
    rows = {t["number"]: t for t in dashboard.get(study, [])}
    return bool(trials) and all(
        t["number"] in rows and rows[t["number"]]["state"] == "Fail"
        and rows[t["number"]]["user_attrs"].get("fail_reason") == t["fail_reason"]
        and rows[t["number"]]["user_attrs"].get("fail_kind") == t["fail_kind"] for t in trials)


def run_bad_trials(folder: Path) -> dict[str, dict[str, Any]]:
    """Every study searched and judged, then read back through the dashboard: per fault class
    {failed, completed, shown, trials, why}."""
    results: dict[str, dict[str, Any]] = {}
    for study in STUDIES:
        code, summary, stderr = search(write_study(folder, study))
        for fault, verdict in judge(study, code, summary).items():
            results[fault] = {**verdict, "study": study.name, "stderr": stderr if code else ""}
    dashboard = dashboard_trials(folder / f"{STUDIES[0].name}.yaml")
    for verdict in results.values():
        verdict["shown"] = shown(dashboard, verdict["study"], verdict.get("trials", []))
    return results


def bad_trial_figures(results: dict[str, dict[str, Any]]) -> dict[str, int]:
    """Flat figures: per class (1/0) and totals over the classes."""
    figures = {f"bad_trial_{fault}_recorded_failed": int(v["failed"] and v["shown"])
               for fault, v in results.items()}
    figures.update({
        "bad_trials_tested": len(results),
        "bad_trials_recorded_failed": sum(int(v["failed"]) for v in results.values()),
        "bad_trials_study_completed": sum(int(v["completed"]) for v in results.values()),
        "bad_trials_dashboard_shown": sum(int(v["shown"]) for v in results.values()),
    })
    return figures


def measure() -> dict[str, Any]:
    """Issue 24's figures of these two rows: the bad-trial classes and ``rank_kill_resumed``."""
    import tempfile

    from benchmarks.faults_ranks import kill_one_rank, matches_uncut

    with tempfile.TemporaryDirectory(prefix="autorec-faults-") as tmp:
        figures: dict[str, Any] = bad_trial_figures(run_bad_trials(Path(tmp) / "trials"))
        killed = kill_one_rank(Path(tmp) / "ranks")
        figures["rank_kill_resumed"] = int(killed.resumed and matches_uncut(killed, Path(tmp) / "ranks"))
    return figures


if __name__ == "__main__":
    print(json.dumps(measure()))
