"""The local runner: worker processes on this machine run a study to its budget.

One worker runs trials in its own process; several are spawned processes sharing the study's
storage (a journal file or a database). Each worker stops when the trials that used the budget
(:func:`autorec.study.recovery.finished_count`) plus those running reach it, or at the timeout.
Baseline presets are trained once per study with the trials' budget and kept in the study;
with ``budget.final_top`` the best trials and the presets are trained in full
(:mod:`autorec.study.final`).

Example:
    >>> from autorec.study import StudyConfig
    >>> summary = run_study(StudyConfig.load("studies/quickstart.yaml"))   # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import multiprocessing
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from autorec.study.config import StudyConfig, StudyConfigError
from autorec.study.final import check_final, full_budget, train_finals
from autorec.study.recovery import (
    WORKER_ATTR,
    BudgetClaim,
    finished_count,
    recover_interrupted,
    requeue_lost,
    worker_mark,
)
from autorec.study.results import StudySummary, summarize
from autorec.study.reuse import reused_count
from autorec.study.storage import create_study, open_storage
from autorec.study.trial import TrialRunner, cost_summary
from autorec.study.warm import enqueue_presets


def _work(config: StudyConfig, on_trial: Callable[[optuna.Study, FrozenTrial], None] | None = None,
          runner: TrialRunner | None = None, salt: int = 0) -> None:
    """One worker: run trials until the study's budget is used (shared with other workers).

    Local workers count the budget and start their trial under one lock file
    (:class:`~autorec.study.recovery.BudgetClaim`), so together they run it exactly; workers on
    other hosts can overshoot it by up to (workers - 1) trials. No trial is ever recorded twice.
    Reused trials (:mod:`autorec.study.reuse`) do not use the budget; after ``budget`` of them
    the worker stops (the space is as good as exhausted).
    """
    with memory_cap(config.budget.memory_gb):
        runner = runner or TrialRunner(config)
        study = create_study(config, salt=salt)  # each worker its own sampler stream
        budget, deadline = config.budget.trials, config.budget.timeout_s
        claim = BudgetClaim(config.directory / "budget.lock")

        def claimed(trial: optuna.Trial) -> float | list[float]:
            claim.release()  # the trial exists and counts as running: the next worker may count
            return runner(trial)

        start = time.monotonic()
        while deadline is None or time.monotonic() - start < deadline:
            claim.acquire()
            try:
                running = len(study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)))
                if finished_count(study) + running >= budget or reused_count(study) >= budget:
                    break
                study.optimize(claimed, n_trials=1, catch=(Exception,),
                               callbacks=[on_trial] if on_trial else None)
            finally:
                claim.release()


@contextlib.contextmanager
def memory_cap(gib: float | None) -> Iterator[None]:
    """Cap this process's address space at ``gib`` GiB (the soft RLIMIT_AS) while inside, so an
    allocation beyond it fails (MemoryError, or torch's "can't allocate memory") and fails its
    trial instead of exhausting the machine; the previous limit is restored on leaving."""
    if gib is None:
        yield
        return
    import resource

    cap = int(gib * 2**30)
    in_use = _address_space()
    if in_use is not None and in_use >= cap:
        raise StudyConfigError(f"budget.memory_gb: {gib:g} GiB is below what this worker process already "
                               f"maps ({in_use / 2**30:.1f} GiB of address space); give more")
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _address_space() -> int | None:
    """Bytes of address space this process maps (Linux), or None where /proc cannot tell."""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return None
    sizes = [int(line.split()[1]) * 1024 for line in status.splitlines() if line.startswith("VmSize:")]
    return sizes[0] if sizes else None


def label_studies(config: StudyConfig, strategy: Any) -> list[tuple[str, optuna.Study]]:
    """The studies the one-shot strategy's ``tau_predictor_from`` names, each with where it is
    (``<storage> (study <name>)``), opened before the supernet trains; a StudyConfigError naming
    the study file, the entry and its storage when one is not there."""
    out = []
    for i, source in enumerate(getattr(strategy, "tau_predictor_from", ())):
        url, name = source["storage"], source["study"]
        key = f"{config.source}: strategy.options.tau_predictor_from[{i}]"
        if url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).is_file():
            raise StudyConfigError(f"{key}: no database file at {url.removeprefix('sqlite:///')}")
        try:
            labelled = optuna.load_study(study_name=name, storage=open_storage(url))
        except (KeyError, ValueError, ImportError) as exc:
            raise StudyConfigError(f"{key}: no study {name!r} in {url} ({exc})") from None
        out.append((f"{url} (study {name!r})", labelled))
    return out


def _spawned_worker(config: StudyConfig, index: int) -> None:
    import warnings

    warnings.filterwarnings("ignore")
    _work(config, salt=index)


def train_baselines(config: StudyConfig, study: optuna.Study, log: Callable[[str], None] = print,
                    runner: TrialRunner | None = None) -> dict[str, dict[str, Any]]:
    """Train each baseline preset once per study (kept in the study): with the trials' budget, or
    with the full one when the best trials are retrained in full (``budget.final_top``)."""
    from autorec.presets import preset
    from autorec.train.trainer import Trainer

    done: dict[str, dict[str, Any]] = dict(study.user_attrs.get("baselines", {}))
    budget = "full" if config.budget.final_top > 0 else "trial"  # the winner's budget (final.py)
    todo = [b for b in config.baselines if done.get(b, {}).get("budget", "trial") != budget or b not in done]
    if not todo:
        return done
    runner = runner or TrialRunner(config)
    for name in todo:
        log(f"baseline {name}: training with the {'full' if budget == 'full' else 'trials'}' budget")
        spec = preset(name, runner.dataset.schema)
        train = runner.train_config(None)
        result = Trainer(spec, runner.dataset, full_budget(config, train) if budget == "full" else train
                         ).fit()
        done[name] = {"val": result.val, "test": result.test, "costs": cost_summary(spec),
                      "arch": spec.to_dict(), "budget": budget}
        study.set_user_attr("baselines", done)
    return done


def run_study(config: StudyConfig, workers: int | None = None,
              on_trial: Callable[[optuna.Study, FrozenTrial], None] | None = None,
              log: Callable[[str], None] = print) -> StudySummary:
    """Run (or resume) the study to its budget with ``workers`` local processes."""
    check_final(config)
    workers = workers or config.workers
    if config.space is not None:  # a malformed space is refused before the storage is touched
        from autorec.space import SearchSpace

        SearchSpace.load(config.space)
    storage = open_storage(config.storage_url)
    study = create_study(config, storage)
    claim = BudgetClaim(config.directory / "budget.lock")
    claim.acquire()  # no local worker is between creating a trial and marking it meanwhile
    try:
        recovered = recover_interrupted(study, storage, claimed=True)
        requeue_lost(config, study, log)
    finally:
        claim.release()
    if recovered:
        log(f"resumed: trials {recovered} were interrupted; marked failed and queued again")
    oneshot = config.strategy.name == "oneshot"
    if oneshot and workers > 1:
        raise StudyConfigError(f"{config.source}: workers: a oneshot study trains one supernet in one "
                               f"process; got workers={workers}")
    runner = TrialRunner(config) if workers == 1 else None  # loads the data once for both
    if config.warm_start:
        runner = runner or TrialRunner(config)
        enqueue_presets(config, study, runner, log)
    train_baselines(config, study, log, runner)
    if oneshot:
        from autorec.oneshot.run import run_oneshot

        run_oneshot(config, study, runner, log,
                    {WORKER_ATTR: worker_mark()}, on_trial, label_studies(config, runner.strategy))
    elif workers == 1:
        _work(config, on_trial, runner)
    else:
        context = multiprocessing.get_context("spawn")
        processes = [context.Process(target=_spawned_worker, args=(config, k)) for k in range(workers)]
        for p in processes:
            p.start()
        for p in processes:
            p.join()
        bad = [p.exitcode for p in processes if p.exitcode]
        if bad:
            raise RuntimeError(f"{len(bad)} of {workers} workers exited with codes {bad}")
    if config.budget.final_top:
        train_finals(config, study, runner or TrialRunner(config), log)
    return summarize(create_study(config), config)


