"""The Ray Tune backend of a study: the local backend's storage, trials and records, with Ray
scheduling the trials on a cluster (ASHA stops weak ones early in studies of validation AUC).

Ray Tune's OptunaSearch asks the study's own sampler for each Tune trial, through a
define-by-run function over the SearchSpace (so parameter names are the local backend's), and
keeps the Optuna trial it asked for. It runs in the driver, and so does everything that writes
to the study: the arch, its artifact and costs are recorded on that Optuna trial when it is
proposed, the metrics and checkpoint when the trainable's final report arrives. Trainables
never open the storage, so workers on other nodes need no access to it.

Ray is optional: ``pip install "ray[tune]==2.60.0"``.

Example:
    >>> from autorec.study import StudyConfig
    >>> summary = run_study_ray(StudyConfig.load("studies/quickstart.yaml"))   # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import functools
import json
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import optuna
from optuna.trial import TrialState

from autorec.arch import ArchSpec
from autorec.study.config import StudyConfig, StudyConfigError
from autorec.study.final import check_final, train_finals
from autorec.study.local import train_baselines
from autorec.study.ray_trial import (
    ARCH_KEY,
    FAIL_KEY,
    FAIL_KIND_KEY,
    NODE_KEY,
    NUMBER_KEY,
    OUTCOME_KEY,
    PROPOSAL_ERROR_KEY,
    TRAIN_KEY,
    train_trial,
)
from autorec.study.recovery import (
    WORKER_ATTR,
    adopt_cut_training,
    finished_count,
    mark_interrupted,
    recover_interrupted,
    requeue_lost,
    worker_mark,
)
from autorec.study.results import StudySummary, summarize
from autorec.study.reuse import REUSED_ATTR, TRAINED_KEY_ATTR, reuse, reused_count, trained_twin, training_key
from autorec.study.storage import create_study, open_storage
from autorec.study.trial import FAIL_KIND_ATTR, OVERRIDES_ATTR, TrialRunner, cost_summary

if TYPE_CHECKING:
    from autorec.data.schema import Schema
    from autorec.space import SearchSpace
    from autorec.strategies import Strategy

RAY_INSTALL = 'pip install "ray[tune]==2.60.0"'
REUSED_KEY = "autorec_reused_values"  # a proposal already trained: its twin's values (JSON); no Tune trial
ROUNDS = 4  # Tune runs at most: a round after the first retries trials cut by a lost node
OBJECT_STORE_BYTES = 128 * 1024**2  # trials pass no large objects through Ray


class RayNotInstalledError(ImportError):
    """Ray Tune is missing; the message says what to install."""


def _import_ray() -> Any:
    try:
        import ray
        from ray import tune  # noqa: F401
        from ray.tune.search.optuna import OptunaSearch  # noqa: F401
    except ImportError as exc:
        raise RayNotInstalledError(f"the Ray backend needs Ray Tune: {RAY_INSTALL} ({exc})") from exc
    return ray


# ---- the driver side: proposals and records --------------------------------------------
class _Proposer:
    """OptunaSearch's define-by-run space: the strategy's proposal for an Optuna trial, recorded
    on that trial as TrialRunner records it before training (arch, arch.json artifact, costs)."""

    def __init__(self, config: StudyConfig, space: SearchSpace, strategy: Strategy, schema: Schema,
                 artifact_dir: Path, training_settings: Mapping[str, Any]) -> None:
        self.config, self.space, self.strategy, self.schema = config, space, strategy, schema
        self.artifact_dir, self.training_settings = artifact_dir, dict(training_settings)

    def __call__(self, trial: Any) -> dict[str, Any]:
        # `trial` is Ray's wrapper of the optuna.Trial; suggestions made through it become the
        # Tune config, the rest is forwarded to the Optuna trial it wraps.
        real: optuna.Trial = getattr(trial, "ot_trial", trial)
        # The driver is the process that owns the trial: recover_interrupted() fails and
        # requeues it if the driver dies.
        real.set_user_attr(WORKER_ATTR, worker_mark())
        try:
            spec = self.strategy.propose(trial, self.space, self.schema)
        except Exception as exc:
            reason = f"{type(exc).__name__}: {exc}"
            real.set_user_attr("fail_reason", reason)
            return {NUMBER_KEY: real.number, PROPOSAL_ERROR_KEY: reason}
        spec = spec.replace(name=f"{self.config.name}-trial{real.number}")
        overrides = self.strategy.train_overrides(real, self.config.budget.batch_size)
        if "arch" not in real.user_attrs:  # suggest() may be asked twice for one trial
            real.set_user_attr("arch", spec.to_dict())
            self._upload(real, spec)
            real.set_user_attr("costs", cost_summary(spec))
            if overrides:
                real.set_user_attr(OVERRIDES_ATTR, overrides)
            if not self.strategy.warm_starts(real):
                key = training_key(spec, {**self.training_settings, **overrides})
                twin = trained_twin(real.study, key)
                if twin is not None:  # the searcher tells it at once and proposes again
                    values = reuse(real, twin, free=not self.strategy.costly_proposals)
                    return {NUMBER_KEY: real.number, REUSED_KEY: json.dumps(values)}
                real.set_user_attr(TRAINED_KEY_ATTR, key)
        resume = adopt_cut_training(real, self.config.directory / "trials" / str(real.number))
        return {NUMBER_KEY: real.number, ARCH_KEY: spec.to_json(indent=None),
                TRAIN_KEY: json.dumps({**overrides, "resume": resume})}

    def _upload(self, trial: optuna.Trial, spec: ArchSpec) -> None:
        store = optuna.artifacts.FileSystemArtifactStore(str(self.artifact_dir))
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "arch.json"
            spec.save(path)
            optuna.artifacts.upload_artifact(artifact_store=store, file_path=str(path),
                                             study_or_trial=trial, mimetype="application/json")


def _make_search(config: StudyConfig, proposer: _Proposer, storage: optuna.storages.BaseStorage,
                 sampler: optuna.samplers.BaseSampler, log: Callable[[str], None],
                 deadline: float | None) -> Any:
    """An OptunaSearch on the study in ``storage`` with the study's ``sampler`` (seeded per
    trial: :func:`autorec.study.storage.create_study`) that records outcomes as the
    local backend does."""
    return _study_search_class()(config, proposer, storage, sampler, log, deadline)


@functools.cache
def _study_search_class() -> type:
    # Defined on first use since Ray is optional; its methods close over nothing, because Tune
    # pickles the searcher (and so this class) once at the start.
    from ray.tune.search import Searcher
    from ray.tune.search.optuna import OptunaSearch

    class StudySearch(OptunaSearch):
        """Tells Optuna how each Tune trial ended: COMPLETE with the trainable's final values
        and records, PRUNED when the scheduler stopped it, FAIL with the reason otherwise."""

        def __init__(self, config: StudyConfig, proposer: _Proposer, storage: optuna.storages.BaseStorage,
                     sampler: optuna.samplers.BaseSampler, log: Callable[[str], None],
                     deadline: float | None) -> None:
            objectives = list(config.objectives)
            modes = ["max" if d == "maximize" else "min" for d in config.directions]
            self._single = len(objectives) == 1
            super().__init__(space=proposer, sampler=sampler,
                             metric=objectives[0] if self._single else objectives,
                             mode=modes[0] if self._single else modes, study_name=config.name,
                             storage=storage)
            self._objectives, self._log, self._deadline = objectives, log, deadline
            self._budget = config.budget.trials  # at most this many reused trials (as locally)
            self._reported: dict[str, dict[str, Any]] = {}  # each trial's last result
            self._epochs: dict[str, set[int]] = {}  # epochs already reported to Optuna
            self._placed: set[str] = set()  # trials whose node is recorded

        def _say(self, line: str) -> None:
            (self._log or print)(line)

        def suggest(self, trial_id: str) -> dict[str, Any] | None:
            if self._deadline is not None and time.monotonic() >= self._deadline:
                return Searcher.FINISHED  # like the local backend: start no more, finish the running
            while True:
                with warnings.catch_warnings():  # asking a heartbeat storage outside optimize() is fine
                    warnings.filterwarnings("ignore", message="Heartbeat of storage")
                    proposal = super().suggest(trial_id)
                if not isinstance(proposal, dict) or REUSED_KEY not in proposal:
                    return proposal
                # Already trained (autorec.study.reuse): told at once, no Tune trial; ask again.
                trial = self._ot_trials.pop(trial_id)
                self._ot_study.tell(trial, json.loads(proposal[REUSED_KEY]))
                self._log_outcome(self._ot_study.get_trials(deepcopy=False)[trial.number])
                if reused_count(self._ot_study) >= self._budget or _remaining_of(self._ot_study,
                                                                                  self._budget) <= 0:
                    return Searcher.FINISHED

        def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
            self._reported[trial_id] = result
            self._report_epoch(trial_id, result)

        def _report_epoch(self, trial_id: str, result: dict[str, Any]) -> None:
            """The epoch's validation AUC as the trial's intermediate value, as TrialRunner does
            (Optuna keeps them for single-objective studies only)."""
            epochs, epoch = self._epochs.setdefault(trial_id, set()), result.get("epoch")
            if NODE_KEY in result and trial_id not in self._placed:  # where it runs, while it runs
                self._placed.add(trial_id)  # (and where it was if its node is lost)
                self._ot_trials[trial_id].set_user_attr("node", result[NODE_KEY])
            if self._single and FAIL_KEY not in result and epoch is not None and epoch not in epochs:
                epochs.add(epoch)
                self._ot_trials[trial_id].report(result["epoch_val_auc"], epoch)

        def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None,
                              error: bool = False) -> None:
            if trial_id in self._completed_trials or trial_id not in self._ot_trials:
                return
            self._completed_trials.add(trial_id)
            trial: optuna.Trial = self._ot_trials[trial_id]
            reported = self._reported.pop(trial_id, None)
            result = result or reported
            try:
                if result:  # Tune passes on no result that ends a trial
                    self._report_epoch(trial_id, result)
                state, values = self._record(trial, result, error)
                # COMPLETE unless a value is NaN (Optuna then fails the trial, as it does locally)
                self._ot_study.tell(trial, values, state=None if state == TrialState.COMPLETE else state)
                self._log_outcome(self._ot_study.get_trials(deepcopy=False)[trial.number])
            except Exception as exc:  # a storage hiccup must not end the whole run
                self._say(f"trial {trial.number}: could not record its outcome: {exc}")
                with contextlib.suppress(Exception):
                    self._ot_study.tell(trial, state=TrialState.FAIL, skip_if_finished=True)
            finally:
                self._epochs.pop(trial_id, None)
                self._placed.discard(trial_id)

        def _record(self, trial: optuna.Trial, result: dict[str, Any] | None,
                    error: bool) -> tuple[TrialState, list[float] | None]:
            """Writes the trial's user attrs; returns the state and values to tell."""
            if result and NODE_KEY in result:
                trial.set_user_attr("node", result[NODE_KEY])
            if result and FAIL_KEY in result:  # the trainable caught its own failure: the trial's
                trial.set_user_attr("fail_reason", result[FAIL_KEY])
                trial.set_user_attr(FAIL_KIND_ATTR, result.get(FAIL_KIND_KEY, "error"))
                return TrialState.FAIL, None
            if error:  # the trainable reports its exceptions, so its process or node was lost
                mark_interrupted(trial, "interrupted: its Ray worker or node was lost")
                return TrialState.FAIL, None
            if not result:  # stopped before it reported anything: it used none of the budget
                mark_interrupted(trial, "interrupted: stopped before its first report")
                return TrialState.FAIL, None
            if OUTCOME_KEY in result:
                outcome = json.loads(result[OUTCOME_KEY])
                for key in ("costs", "metrics", "checkpoint"):
                    trial.set_user_attr(key, outcome[key])
                return TrialState.COMPLETE, [float(result[o]) for o in self._objectives]
            # The scheduler stopped it after this epoch.
            trial.set_user_attr("pruned_at_epoch", int(result["epoch"]))
            return TrialState.PRUNED, None

        def _log_outcome(self, trial: optuna.trial.FrozenTrial) -> None:
            state = trial.state
            auc = trial.user_attrs.get("metrics", {}).get("val", {}).get("auc")
            reason = trial.user_attrs.get("fail_reason")
            twin = trial.user_attrs.get(REUSED_ATTR)
            self._say(f"trial {trial.number} {state.name.lower()}"
                      + (f": val AUC {auc:.4f}" if auc is not None else "")
                      + (f" (trial {twin}'s training, reused)" if twin is not None else "")
                      + (f" ({reason})" if reason and state == TrialState.FAIL else ""))

        def save(self, checkpoint_path: str) -> None:
            """The Optuna storage is this search's durable state (a rerun resumes from it), so
            Tune's experiment checkpoint keeps nothing of it."""

        def __getstate__(self) -> dict[str, Any]:
            # Tune pickles its config once at the start; the log may hold a console's stream.
            return {**self.__dict__, "_log": None}

    return StudySearch


# ---- running ---------------------------------------------------------------------------
def _remaining(config: StudyConfig, study: optuna.Study) -> int:
    if reused_count(study) >= config.budget.trials:  # the space is as good as exhausted (as locally)
        return 0
    return _remaining_of(study, config.budget.trials)


def _remaining_of(study: optuna.Study, budget: int) -> int:
    """Trials of ``budget`` not used yet: finished ones and running ones use it."""
    running = len(study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)))
    return budget - finished_count(study) - running


def _init_ray(ray: Any, address: str | None, workers: int) -> bool:
    """Connects to ``address`` or starts a small local cluster; True if this call started Ray."""
    if ray.is_initialized():
        return False
    if address:
        ray.init(address=address, log_to_driver=False)
    else:  # "local": never join a cluster someone else started on this machine
        ray.init(address="local", num_cpus=workers, object_store_memory=OBJECT_STORE_BYTES,
                 include_dashboard=False, log_to_driver=False)
    return True


def run_study_ray(config: StudyConfig, address: str | None = None, workers: int | None = None,
                  log: Callable[[str], None] = print) -> StudySummary:
    """Run (or resume) the study to its budget on Ray Tune, ``workers`` trials at a time.

    Args:
        config: the study.
        address: a Ray cluster to join (``ray://…`` or ``host:port``); default: start a local
            one with ``workers`` CPUs.
        workers: concurrent trials (default: the study's ``workers``), one CPU (and one GPU
            where the cluster has them) each.
        log: receives a line per finished trial.
    """
    if config.strategy.name == "oneshot":  # one supernet, then candidates scored in one process
        raise StudyConfigError(f"{config.source}: strategy: a oneshot study runs on the local backend "
                               "(autorec search without --backend ray)")
    check_final(config)
    if config.budget.memory_gb is not None:  # Ray's workers map its object store: RLIMIT_AS would break them
        raise StudyConfigError(f"{config.source}: budget.memory_gb: the Ray backend does not cap a worker's "
                               "memory; size the cluster's workers instead, or run on the local backend")
    if config.warm_start:
        raise StudyConfigError(f"{config.source}: warm_start: the Ray backend does not enqueue presets; "
                               "run on the local backend, or drop warm_start")
    ray = _import_ray()
    storage = open_storage(config.storage_url)
    study = create_study(config, storage)
    recovered = recover_interrupted(study, storage)
    if recovered:
        log(f"resumed: trials {recovered} were interrupted; marked failed and queued again")
    requeue_lost(config, study, log)
    train_baselines(config, study, log)
    remaining = _remaining(config, study)
    if remaining > 0:
        workers = workers or config.workers
        started = _init_ray(ray, address, workers)
        try:
            for _ in range(ROUNDS):  # trials cut by a lost node or worker are retried next round
                _tune(config, storage, study.sampler, remaining, workers, log)
                remaining = _remaining(config, create_study(config, storage))
                if remaining <= 0:
                    break
                log(f"{remaining} trials were cut short (a lost worker or node); retrying them")
        finally:
            if started:
                ray.shutdown()
    if config.budget.final_top:  # the few full trainings run here, one after the other
        train_finals(config, study, TrialRunner(config), log)
    return summarize(create_study(config, storage), config)


def _tune(config: StudyConfig, storage: optuna.storages.BaseStorage, sampler: optuna.samplers.BaseSampler,
          trials: int, workers: int, log: Callable[[str], None]) -> None:
    """Run ``trials`` more trials of the study on the connected Ray cluster."""
    import ray
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler, FIFOScheduler
    from ray.tune.search import ConcurrencyLimiter

    runner = TrialRunner(config)
    proposer = _Proposer(config, runner.space, runner.strategy, runner.dataset.schema, runner.artifact_dir(),
                         runner.training_settings())
    deadline = (time.monotonic() + config.budget.timeout_s) if config.budget.timeout_s else None
    search = ConcurrencyLimiter(_make_search(config, proposer, storage, sampler, log, deadline),
                                max_concurrent=workers)
    # Stop trials early on validation AUC where the study prunes on it.
    prunes = config.objectives == ("val_auc",) and config.pruner != "none"
    scheduler = (ASHAScheduler(metric="val_auc", mode="max", max_t=config.budget.epochs, grace_period=1)
                 if prunes else FIFOScheduler())
    gpu = 1 if ray.cluster_resources().get("GPU", 0) >= 1 else 0
    trainable = tune.with_resources(tune.with_parameters(train_trial, study=_for_workers(config)),
                                    {"cpu": 1, "gpu": gpu})
    tuner = tune.Tuner(
        trainable, tune_config=tune.TuneConfig(search_alg=search, scheduler=scheduler, num_samples=trials),
        run_config=tune.RunConfig(name=f"search-{time.strftime('%Y%m%d-%H%M%S')}",
                                  storage_path=str(config.directory / "ray"), verbose=0))
    with contextlib.redirect_stdout(sys.stderr):  # Tune prints its banner whatever verbose says
        tuner.fit()


def _for_workers(config: StudyConfig) -> StudyConfig:
    """The study as trainables see it: Tune runs them in a trial directory, so a relative data
    path is made absolute."""
    if config.data.path is None:
        return config
    data = config.data.model_copy(update={"path": str(Path(config.data.path).resolve())})
    return config.model_copy(update={"data": data})
