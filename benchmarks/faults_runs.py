"""Issue 24's fault rows "kill -9 mid-search" and "N workers x M trials", as reusable steps.

The benchmark (:mod:`benchmarks.faults_kill`) and the tests (``tests/faults/``) share them: write
a tiny study, start the real ``autorec search`` (or ``autorec scale``) process, kill it with
SIGKILL at a seeded point found by watching its storage, rerun the same command, and compare the
resumed study's trials with those before the cut and with an uncut run of the same seed.

Example:
    >>> point = KillPoint("random", "training", trial=1, delay=0.1)
    >>> point.label
    'random/training@1+0.10s'
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna
import yaml
from optuna.trial import FrozenTrial, TrialState

ROOT = Path(__file__).resolve().parents[1]
SPACE = ROOT / "search_spaces" / "zoo.yaml"
DATA = {"name": "synthetic", "options": {"preset": "tiny", "num_samples": 3000}, "seed": 0}
TIMEOUT_S = 600  # one process of a tiny study takes seconds; this only ends a hung one
# Options of a one-shot study whose every stage takes a second or so on a tiny data set.
ONESHOT = {"steps": 40, "batch_size": 64, "checkpoint_every": 4, "candidates": 6,
           "selection_samples": 200, "rerank": 2, "calibrate": 1, "final_epochs": 1}


def study_file(folder: Path, strategy: str, trials: int = 4, storage: str | None = None,
               name: str = "f", steps: int = 3) -> Path:
    """Write ``folder``/study.yaml: a tiny study of ``strategy`` (random, tpe, nsga2, oneshot or
    ladder) on synthetic data. ``steps`` caps each training's steps (longer windows to kill in)."""
    options: dict[str, Any] = {}
    if strategy == "oneshot":
        options = ONESHOT
    elif strategy == "tpe":
        options = {"n_startup_trials": 2}
    elif strategy == "ladder":
        options = {"families": ["dcnv2", "wukong"], "rungs": 4, "dim": 4}
    config: dict[str, Any] = {
        "name": name, "data": DATA, "strategy": {"name": strategy, "options": options},
        "objectives": ["val_auc"], "pruner": "none", "seed": 0,
        "budget": {"trials": trials if strategy != "oneshot" else 1, "epochs": 1, "batch_size": 64,
                   "max_steps_per_epoch": steps},
    }
    if strategy != "ladder":
        config["space"] = str(SPACE)
    if storage is not None:
        config["storage"] = storage
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def command(path: Path, workers: int | None = None) -> list[str]:
    """The real command that runs the study of ``path``: ``autorec scale`` for a ladder, else
    ``autorec search``."""
    ladder = yaml.safe_load(path.read_text())["strategy"]["name"] == "ladder"
    args = ["scale", str(path), "--json", "--bootstrap", "5"] if ladder else ["search", str(path), "--json"]
    if workers is not None:
        args += ["--workers", str(workers)]
    return [sys.executable, "-m", "autorec.cli", *args]


def start(path: Path, workers: int | None = None) -> subprocess.Popen:
    """Start the study's command; its output goes to run.log beside the study file."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "OMP_NUM_THREADS": "1"}
    with (path.parent / "run.log").open("a") as log:  # the child keeps its own descriptor
        return subprocess.Popen(command(path, workers), env=env, stdout=log, stderr=log, cwd=ROOT)


def finish(proc: subprocess.Popen, path: Path) -> None:
    """Wait for ``proc``; a nonzero exit is an error that shows the end of its log."""
    code = proc.wait(timeout=TIMEOUT_S)
    if code:
        tail = (path.parent / "run.log").read_text()[-3000:]
        raise RuntimeError(f"{' '.join(command(path))} exited with {code}:\n{tail}")


def run(path: Path, workers: int | None = None) -> None:
    """Run the study of ``path`` to its end in a fresh process."""
    finish(start(path, workers), path)


def storage_url(path: Path) -> str:
    from autorec.study import StudyConfig

    return StudyConfig.load(path).storage_url


def trials_of(path: Path) -> list[FrozenTrial]:
    """Every trial of the study of ``path``, by number."""
    from autorec.study import open_storage

    name = yaml.safe_load(path.read_text())["name"]
    study = optuna.load_study(study_name=name, storage=open_storage(storage_url(path)))
    return sorted(study.get_trials(deepcopy=False), key=lambda t: t.number)


def table(trials: list[FrozenTrial]) -> list[tuple[str, str]]:
    """The final table of a study: each COMPLETE trial's parameters and values (and its stage in a
    one-shot study), in the order of their numbers. Trial numbers themselves are left out: the
    retry of a cut trial has the next free one."""
    return [(json.dumps({**t.params, "stage": t.user_attrs.get("stage")}, sort_keys=True),
             json.dumps(t.values)) for t in trials if t.state == TrialState.COMPLETE]


@dataclass(frozen=True)
class KillPoint:
    """Where to kill a run: in ``phase`` of the ``trial``-th trial the process starts (0: its
    first), ``delay`` seconds after the phase is seen.

    Phases: ``training`` (the trial has recorded its architecture and trains: a search trial, a
    one-shot candidate or a ladder's rung), ``write`` (its metrics are recorded but not yet its
    state: the result is being written), ``between`` (it is COMPLETE and the next one has not
    started training), ``supernet`` (a one-shot study's supernet wrote a checkpoint in this
    process and trains on).
    """

    strategy: str
    phase: str
    trial: int = 0
    delay: float = 0.0

    @property
    def label(self) -> str:
        return f"{self.strategy}/{self.phase}@{self.trial}+{self.delay:.2f}s"


def _rows(db: Path, sql: str) -> list[tuple]:
    """Rows of ``sql`` on the SQLite study at ``db``, read-only (none while its tables do not
    exist: a poller must not open an Optuna storage while the run under test creates them)."""
    if not db.exists():
        return []
    try:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)) as con:
            return con.execute(sql).fetchall()
    except sqlite3.OperationalError:  # no such table yet, or locked for a moment
        return []


def _supernet_step(folder: Path) -> str:
    """What the one-shot study's supernet checkpoint pointer names ("" before the first)."""
    from autorec.train.checkpoints import LATEST

    pointer = folder / "oneshot" / "supernet" / LATEST
    try:
        return pointer.read_text()
    except OSError:
        return ""


@dataclass
class _Watch:
    """What a run had when its process started, and how to see ``point`` in it."""

    point: KillPoint
    db: Path
    first: int  # the number of the first trial this process starts
    pointer: str  # the supernet checkpoint pointer at the start

    def seen(self) -> bool:
        if self.point.phase == "supernet":
            return _supernet_step(self.db.parent) not in ("", self.pointer)
        number = self.first + self.point.trial
        rows = _rows(self.db, "SELECT t.number, t.state, a.key FROM trials t LEFT JOIN "
                              "trial_user_attributes a ON a.trial_id = t.trial_id "
                              f"WHERE t.number >= {number}")
        keys: dict[tuple[int, str], set[str]] = {}
        for n, state, key in rows:
            keys.setdefault((n, state), set()).add(key)
        if self.point.phase == "between":
            return any(state == "COMPLETE" for _, state in keys)
        wanted = "metrics" if self.point.phase == "write" else "arch"
        return any(state == "RUNNING" and wanted in attrs for (_, state), attrs in keys.items())


@dataclass
class KillOutcome:
    """What one kill and the reruns after it did to the study."""

    point: KillPoint
    killed: bool  # False: the run ended before the point was reached
    cut: list[int] = field(default_factory=list)  # trials RUNNING when it was killed
    lost: int = 0  # finished trials changed or missing after the rerun, cut ones never retried
    repeated: int = 0  # finished trials run again, cut ones retried more than once
    problems: list[str] = field(default_factory=list)


def study_db(path: Path) -> Path:
    return path.parent / yaml.safe_load(path.read_text())["name"] / "study.db"


def kill_at(path: Path, point: KillPoint, poll_s: float = 0.005) -> bool:
    """Start the study's command (on the study as it is), kill it with SIGKILL at ``point``;
    False if it ended first."""
    db = study_db(path)
    count = _rows(db, "SELECT count(*) FROM trials")
    watch = _Watch(point, db, count[0][0] if count else 0, _supernet_step(db.parent))
    proc = start(path)
    deadline = time.monotonic() + TIMEOUT_S
    while not watch.seen():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            return False
        time.sleep(poll_s)
    time.sleep(point.delay)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    return True


def _retries(trials: list[FrozenTrial], number: int) -> list[FrozenTrial]:
    return [t for t in trials if t.user_attrs.get("retry_of") == number]


def judge(point: KillPoint, before: list[FrozenTrial], after: list[FrozenTrial]) -> KillOutcome:
    """What the kill at ``point`` (which left the study ``before``) cost in the end (``after``):
    finished trials must be kept as they were and run once; each cut one must be marked
    interrupted and retried once with its parameters (a retry cut again, by a later kill, passes
    the duty to its own retry)."""
    from autorec.study import INTERRUPTED_ATTR

    out = KillOutcome(point, killed=True, cut=[t.number for t in before if t.state == TrialState.RUNNING])
    by_number = {t.number: t for t in after}
    for t in before:
        if not t.state.is_finished():
            continue
        now = by_number.get(t.number)
        if now is None or now.state != t.state or now.values != t.values or now.params != t.params:
            out.lost += 1
            out.problems.append(f"{point.label}: finished trial {t.number} changed or vanished")
        if not t.user_attrs.get(INTERRUPTED_ATTR):
            out.repeated += len(_retries(after, t.number))
    for number in out.cut:
        now = by_number.get(number)
        while now is not None and now.user_attrs.get(INTERRUPTED_ATTR):
            retries = _retries(after, now.number)
            out.repeated += max(0, len(retries) - 1)
            params, now = now.params, (retries[0] if retries else None)
            if now is not None and now.params != params:
                out.problems.append(f"{point.label}: retry {now.number} has other parameters")
                now = None
        if now is None or now.state != TrialState.COMPLETE:
            out.lost += 1
            out.problems.append(f"{point.label}: cut trial {number} was not retried to the end")
    return out


@dataclass
class ChainResult:
    """Kills one after another on one study (each rerun killed by the next), then a rerun to
    its end, judged against an uncut run of the same seed."""

    outcomes: list[KillOutcome]
    lost: int  # over all kills, and complete trials short of the uncut run's
    repeated: int  # over all kills, and complete trials beyond the uncut run's
    numbers_ok: bool  # numbers 0..n-1, none reused
    table_equal: bool  # the final table is the uncut run's
    problems: list[str]


Cut = tuple[KillPoint, bool, list[FrozenTrial]]  # a kill point, whether it was reached, the study it left


def kill_all(path: Path, points: list[KillPoint]) -> list[Cut]:
    """Kill the study of ``path`` at each of ``points`` in turn (each kill in a fresh run of the
    same command on the study as the last kill left it); then rerun it to its end (:func:`run`)
    and judge it (:func:`verdict`)."""
    cuts = []
    for point in points:
        killed = kill_at(path, point)
        cuts.append((point, killed, trials_of(path) if _rows(study_db(path), "SELECT 1 FROM trials") else []))
    return cuts


def verdict(cuts: list[Cut], after: list[FrozenTrial], reference: list[tuple[str, str]],
            ordered: bool = True) -> ChainResult:
    """Judge the study ``after`` its ``cuts`` and the rerun: each kill (:func:`judge`), the trial
    numbers, and the final table against the uncut run's ``reference`` (in order, or as a
    multiset where ``ordered`` is False: a grid's order)."""
    outcomes = [judge(point, before, after) if killed else
                KillOutcome(point, killed=False, problems=[f"{point.label}: the run ended before it"])
                for point, killed, before in cuts]
    problems = [p for o in outcomes for p in o.problems]
    numbers = [t.number for t in after]
    numbers_ok = numbers == list(range(len(after)))
    if not numbers_ok:
        problems.append(f"trial numbers {numbers}")
    got = table(after)
    short, extra = max(0, len(reference) - len(got)), max(0, len(got) - len(reference))
    if short or extra:
        problems.append(f"{len(got)} complete trials, the uncut run {len(reference)}")
    equal = got == reference if ordered else sorted(got) == sorted(reference)
    if not equal:
        problems.append("the final table differs from the uncut run's")
    return ChainResult(outcomes, sum(o.lost for o in outcomes) + short,
                       sum(o.repeated for o in outcomes) + extra, numbers_ok, equal, problems)


def kill_chain(path: Path, points: list[KillPoint], reference: list[tuple[str, str]],
               ordered: bool = True) -> ChainResult:
    """:func:`kill_all` at ``points``, the rerun to the end, and the :func:`verdict`."""
    cuts = kill_all(path, points)
    run(path)
    return verdict(cuts, trials_of(path), reference, ordered)


@dataclass
class WorkersOutcome:
    """What ``workers`` processes left in one storage after a study of ``workers`` x ``trials``."""

    storage: str
    records: int  # trial records in the storage
    complete: int
    duplicates: int  # records whose parameters another record has too (none marked reused)
    numbers_ok: bool  # numbers 0..n-1, each once
    processes: int  # distinct worker processes that ran trials


def workers_run(folder: Path, storage: str, workers: int = 4, trials: int = 10) -> WorkersOutcome:
    """Run ``autorec search --workers N`` on a study of N x M cheap trials (one training step
    each) in ``storage`` (sqlite, journal or a database URL) and count what it recorded. A
    database study gets a name of its own (the server is shared), deleted afterwards."""
    from autorec.study import REUSED_ATTR, open_storage

    name = f"w{os.getpid()}_{time.time_ns()}" if "://" in storage else "w"
    path = study_file(folder, "random", trials=workers * trials, storage=storage, name=name, steps=1)
    run(path, workers=workers)
    records = trials_of(path)
    keys = [json.dumps(t.params, sort_keys=True) for t in records if not t.user_attrs.get(REUSED_ATTR)]
    outcome = WorkersOutcome(
        storage=storage if "://" not in storage else "postgresql", records=len(records),
        complete=sum(t.state == TrialState.COMPLETE for t in records), duplicates=len(keys) - len(set(keys)),
        numbers_ok=[t.number for t in records] == list(range(len(records))),
        processes=len({t.user_attrs.get("worker", {}).get("pid") for t in records}))
    if "://" in storage:
        optuna.delete_study(study_name=name, storage=open_storage(storage_url(path)))
    return outcome
