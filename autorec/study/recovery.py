"""Crash safety: trials whose worker died are failed and queued again; only real ones use the budget.

Each trial records the host and pid of the process running it (``WORKER_ATTR``). When a study
resumes on the same host, RUNNING trials whose process is gone were cut short (kill -9, a lost
machine): :func:`recover_interrupted` fails them through the storage's public API and enqueues a
retry with the same parameters. Workers on other hosts are covered by the RDB heartbeat
(:func:`autorec.study.storage.open_storage`), whose ``RetryHeartbeatStaleTrialCallback`` does the
same for trials whose heartbeat stopped.

The budget loop counts trials with :func:`finished_count` rather than Optuna's
``MaxTrialsCallback``: that callback counts by state alone, and an interrupted trial is FAIL like
a trial that failed on its own, yet must not use the budget since its retry runs again. Local
workers count and claim under a :class:`BudgetClaim`, so together they run the budget exactly.
"""

from __future__ import annotations

import datetime
import fcntl
import os
import socket
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING

import optuna
from optuna.trial import TrialState

from autorec.study.reuse import FREE_ATTR

if TYPE_CHECKING:
    from autorec.study.config import StudyConfig

WORKER_ATTR = "worker"  # trial user attr: {host, pid} of the process running it
INTERRUPTED_ATTR = "interrupted"  # trial user attr: cut short (not its own failure), retried
RETRY_ATTR = "retry_of"  # trial user attr: the number of the cut trial this one retries
UNMARKED_GRACE_S = 60.0  # a RUNNING trial with no worker mark this old was cut before its start
UNMARKED_CLAIMED_S = 2.0  # the same, seen under the budget claim (no local worker is creating one)


def worker_mark() -> dict[str, str | int]:
    """The ``WORKER_ATTR`` value of a trial this process runs: its host and pid."""
    return {"host": socket.gethostname(), "pid": os.getpid()}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def recover_interrupted(study: optuna.Study, storage: optuna.storages.BaseStorage,
                        claimed: bool = False) -> list[int]:
    """Fail the RUNNING trials whose worker process on this host is gone, and queue a retry of
    each with the same parameters. Returns the numbers of the trials failed. ``storage`` is the
    study's (the one it was created or loaded with): only the storage can end another process's
    trial. A trial whose worker died between creating and marking it carries no mark: it is
    failed once it is :data:`UNMARKED_GRACE_S` old; when ``claimed`` (the caller holds the
    :class:`BudgetClaim` under which local workers create their trials) it is waited out until
    :data:`UNMARKED_CLAIMED_S` old, then failed if still unmarked.

    (Workers on other hosts are covered by the RDB heartbeat: their trials go stale and
    Optuna's retry callback requeues them.)
    """
    host, failed = socket.gethostname(), []
    study_id = storage.get_study_id_from_name(study.study_name)
    if claimed:  # a young unmarked trial is waited out, not skipped: a rerun right after a kill
        _wait_out_unmarked(study)  # would otherwise leave it RUNNING, its rung or budget slot lost
    now = datetime.datetime.now()
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        worker = trial.user_attrs.get(WORKER_ATTR)
        if not worker:  # killed between its creation and its worker's mark (milliseconds apart)
            started = trial.datetime_start or now
            if (now - started).total_seconds() < (UNMARKED_CLAIMED_S if claimed else UNMARKED_GRACE_S):
                continue  # (or a worker is marking it right now)
            reason = "interrupted: its worker died before it started"
        elif worker.get("host") != host or _alive(int(worker.get("pid", -1))):
            continue
        else:
            reason = f"interrupted: worker pid {worker.get('pid')} on {host} died"
        trial_id = storage.get_trial_id_from_study_id_trial_number(study_id, trial.number)
        storage.set_trial_user_attr(trial_id, INTERRUPTED_ATTR, True)
        storage.set_trial_user_attr(trial_id, "fail_reason", reason)
        if trial.params:  # (one cut before its first suggestion has nothing to retry)
            study.enqueue_trial(trial.params, user_attrs={RETRY_ATTR: trial.number})
        storage.set_trial_state_values(trial_id, TrialState.FAIL)
        failed.append(trial.number)
    return failed


def _wait_out_unmarked(study: optuna.Study) -> None:
    """Sleep until every RUNNING trial without a worker mark is :data:`UNMARKED_CLAIMED_S` old
    (a worker that is alive marks its trial milliseconds after creating it)."""
    now = datetime.datetime.now()
    ages = [(now - (t.datetime_start or now)).total_seconds()
            for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
            if not t.user_attrs.get(WORKER_ATTR)]
    if ages:
        time.sleep(max(0.0, UNMARKED_CLAIMED_S - min(ages)) + 0.05)


def adopt_cut_training(trial: optuna.Trial, folder: Path) -> bool:
    """Give a retry the training its cut trial had begun: the cut trial's checkpoint folder
    (``folder``'s sibling named by its number) becomes ``folder``, and True says to resume from
    its last checkpoint (a long ladder rung cut at 90% goes on from there, not from step 0).
    False, to start afresh, when ``trial`` retries none or the cut one left nothing to resume."""
    from optuna.storages import RetryFailedTrialCallback

    from autorec.train.checkpoints import LATEST

    cut = trial.user_attrs.get(RETRY_ATTR)
    if cut is None:  # a retry after a stale heartbeat: Optuna's own record
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            frozen = next(t for t in trial.study.get_trials(deepcopy=False) if t.number == trial.number)
            cut = RetryFailedTrialCallback.retried_trial_number(frozen)
    if cut is None:
        return False
    source = folder.parent / str(cut)
    if (source / LATEST).exists():
        if folder.exists():
            import shutil

            shutil.rmtree(folder)
        os.replace(source, folder)
    return (folder / LATEST).exists()  # (asked again for the same trial: adopted already)


def mark_interrupted(trial: optuna.Trial, reason: str) -> None:
    """Record that a running trial was cut short (not its own failure), so it does not use the
    budget, and queue a retry with the same parameters."""
    trial.set_user_attr(INTERRUPTED_ATTR, True)
    trial.set_user_attr("fail_reason", reason)
    trial.study.enqueue_trial(trial.params, user_attrs={RETRY_ATTR: trial.number})


def finished_count(study: optuna.Study) -> int:
    """Trials that used the budget: complete, pruned, or failed for a reason of their own
    (interrupted trials are retried, and reused ones took another's training: neither counts)."""
    count = 0
    for t in study.get_trials(deepcopy=False):
        if t.user_attrs.get(FREE_ATTR):  # took another trial's training, for free
            continue
        if t.state in (TrialState.COMPLETE, TrialState.PRUNED):
            count += 1
        elif t.state == TrialState.FAIL and not t.user_attrs.get(INTERRUPTED_ATTR):
            count += 1
    return count




class BudgetClaim:
    """A lock file that makes a local worker's budget check and the creation of its trial one
    step: while one worker holds it, the others wait to count (without it, two workers can both
    see one trial left and both start one). The worker releases it as soon as its trial exists
    (the objective's first line), not when the trial ends; the kernel releases it when the
    process dies. Workers on other hosts do not share the file and can overshoot the budget.

    Example:
        >>> import tempfile
        >>> claim = BudgetClaim(Path(tempfile.mkdtemp()) / "budget.lock")
        >>> claim.acquire(); claim.release(); claim.release()  # releasing twice is harmless
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.held: IO[str] | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.held = self.path.open("a")
        fcntl.flock(self.held, fcntl.LOCK_EX)

    def release(self) -> None:
        if self.held is not None:
            fcntl.flock(self.held, fcntl.LOCK_UN)
            self.held.close()
            self.held = None


def requeue_lost(config: StudyConfig, study: optuna.Study, log: Callable[[str], None]) -> None:
    """Queue again what the study's strategy would otherwise never propose after a resume
    (:meth:`~autorec.strategies.base.Strategy.requeue_lost`: a ladder's grid points whose trial
    was cut before it suggested them), saying so in ``log``."""
    from autorec.strategies import make_strategy

    lost = make_strategy(config.strategy.name, config.seed, **config.strategy.options).requeue_lost(study)
    if lost:
        log(f"resumed: queued again {lost}, cut before their trials could suggest them")
