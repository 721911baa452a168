"""Multi-trial architecture studies on Optuna storages: config, trials, recovery, summary.

A study file (YAML) names the dataset, the search space, the strategy, the objectives, the
budget and the storage. Every trial trains its candidate on the short budget, reports
validation AUC per epoch (single-objective studies prune on it), and stores its ArchSpec (as
an Optuna artifact and a user attribute), metrics and costs in the study.

Example:
    >>> config = StudyConfig.load("studies/quickstart.yaml")    # doctest: +SKIP
    >>> summary = run_study(config)                               # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import json
import math
import multiprocessing
import os
import socket
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from autorec.arch import ArchSpec
from autorec.textfiles import parse_yaml, read_text

# objective name -> direction; quality from validation, cost from the analytic model or a probe.
OBJECTIVES: dict[str, str] = {
    "val_auc": "maximize",
    "val_logloss": "minimize",
    "flops": "minimize",
    "params_bytes": "minimize",
    "embedding_bytes": "minimize",
    "compute_time_h100": "minimize",  # seconds of dense forward compute per sample at H100 peaks
    "latency_ms": "minimize",
}
PRUNERS = ("median", "hyperband", "none")
WORKER_ATTR = "worker"  # trial user attr: {host, pid} of the process running it
INTERRUPTED_ATTR = "interrupted"  # trial user attr: cut short (not its own failure), retried


class StudyConfigError(ValueError):
    """A study file is invalid; the message names the file and the key path at fault."""


@dataclass(frozen=True)
class DataConfig:
    name: str = "movielens100k"
    path: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    seed: int = 0


@dataclass(frozen=True)
class Budget:
    """What one trial may spend, and how many trials the study runs."""

    trials: int = 10
    timeout_s: float | None = None
    epochs: int = 3
    batch_size: int = 1024
    max_steps_per_epoch: int | None = None
    patience: int = 1


@dataclass(frozen=True)
class StudyConfig:
    """A study as its YAML file declares it (see studies/quickstart.yaml)."""

    name: str
    source: Path
    data: DataConfig
    space: Path
    strategy: str = "tpe"
    strategy_options: Mapping[str, Any] = field(default_factory=dict)
    objectives: tuple[str, ...] = ("val_auc",)
    budget: Budget = Budget()
    pruner: str = "median"
    storage: str | None = None
    workers: int = 1
    baselines: tuple[str, ...] = ()
    seed: int = 0

    @property
    def directory(self) -> Path:
        """studies/<name>/ beside the study file: the default storage, artifacts, checkpoints."""
        return self.source.parent / self.name

    @property
    def storage_url(self) -> str:
        if self.storage in (None, "sqlite"):
            return f"sqlite:///{(self.directory / 'study.db').resolve()}"
        if self.storage == "journal":
            return f"journal:{(self.directory / 'journal.log').resolve()}"
        return self.storage

    @property
    def directions(self) -> list[str]:
        return [OBJECTIVES[o] for o in self.objectives]

    @classmethod
    def load(cls, path: str | Path) -> StudyConfig:
        path = Path(path)
        data = parse_yaml(read_text(path, StudyConfigError), str(path), StudyConfigError)
        return cls.from_dict(data, path)

    @classmethod
    def from_dict(cls, data: Any, source: Path) -> StudyConfig:
        return _parse_study(data, Path(source))


def _parse_study(data: Any, source: Path) -> StudyConfig:
    from autorec.data import DATASETS
    from autorec.presets import PRESETS
    from autorec.strategies import STRATEGIES

    def fail(key: str, message: str) -> None:
        raise StudyConfigError(f"{source}: {key}: {message}")

    def mapping(value: Any, key: str, allowed: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(value, Mapping):
            fail(key, f"expected a mapping, got {type(value).__name__}")
        for k in value:
            if k not in allowed:
                fail(f"{key}.{k}" if key else k, f"unknown key; expected one of {', '.join(allowed)}")
        return dict(value)

    def integer(value: Any, key: str, minimum: int, optional: bool = False) -> int | None:
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            fail(key, f"expected an integer >= {minimum}, got {value!r}")
        return value

    top = mapping(data, "", ("name", "data", "space", "strategy", "objectives", "budget", "pruner",
                             "storage", "workers", "baselines", "seed"))
    for key in ("name", "data", "space"):
        if key not in top:
            fail(key, "required key is missing")
    name = top["name"]
    if not isinstance(name, str) or not name or "/" in name:
        fail("name", f"expected a non-empty name without '/', got {name!r}")

    raw_data = mapping(top["data"], "data", ("name", "path", "options", "seed"))
    if raw_data.get("name", "movielens100k") not in DATASETS:
        fail("data.name", f"expected one of {', '.join(DATASETS)}, got {raw_data.get('name')!r}")
    if not isinstance(raw_data.get("options", {}), Mapping):
        fail("data.options", "expected a mapping of dataset options")
    data_path = raw_data.get("path")
    if data_path is not None:
        data_path = str((source.parent / data_path) if not Path(data_path).is_absolute() else data_path)
    data = DataConfig(name=raw_data.get("name", "movielens100k"), path=data_path,
                      options=dict(raw_data.get("options", {})),
                      seed=integer(raw_data.get("seed", 0), "data.seed", 0))

    if not isinstance(top["space"], str):
        fail("space", f"expected the path of a search space YAML, got {top['space']!r}")
    space = (source.parent / top["space"]).resolve()
    if not space.is_file():
        fail("space", f"no such file: {space}")

    strategy, strategy_options = top.get("strategy", "tpe"), {}
    if isinstance(strategy, Mapping):
        raw = mapping(strategy, "strategy", ("name", "options"))
        strategy, strategy_options = raw.get("name"), dict(raw.get("options") or {})
    if strategy not in STRATEGIES:
        fail("strategy", f"expected one of {', '.join(STRATEGIES)}, got {strategy!r}")

    objectives = top.get("objectives", ["val_auc"])
    if isinstance(objectives, str):
        objectives = [objectives]
    if not isinstance(objectives, list) or not objectives:
        fail("objectives", "expected a non-empty list")
    for i, objective in enumerate(objectives):
        if objective not in OBJECTIVES:
            fail(f"objectives[{i}]", f"expected one of {', '.join(OBJECTIVES)}, got {objective!r}")
    if len(set(objectives)) != len(objectives):
        fail("objectives", f"objectives repeat: {objectives}")

    raw_budget = mapping(top.get("budget", {}), "budget", tuple(f.name for f in dataclasses.fields(Budget)))
    timeout = raw_budget.get("timeout_s")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or timeout <= 0):
        fail("budget.timeout_s", f"expected a positive number of seconds, got {timeout!r}")
    budget = Budget(
        trials=integer(raw_budget.get("trials", 10), "budget.trials", 1),
        timeout_s=timeout,
        epochs=integer(raw_budget.get("epochs", 3), "budget.epochs", 1),
        batch_size=integer(raw_budget.get("batch_size", 1024), "budget.batch_size", 1),
        max_steps_per_epoch=integer(raw_budget.get("max_steps_per_epoch"), "budget.max_steps_per_epoch",
                                    1, optional=True),
        patience=integer(raw_budget.get("patience", 1), "budget.patience", 1))

    pruner = top.get("pruner", "median")
    if pruner not in PRUNERS:
        fail("pruner", f"expected one of {', '.join(PRUNERS)}, got {pruner!r}")
    storage = top.get("storage")
    if storage is not None and (not isinstance(storage, str) or not (
            storage in ("sqlite", "journal") or "://" in storage)):
        fail("storage", f"expected sqlite, journal or a database URL, got {storage!r}")
    baselines = top.get("baselines", [])
    if not isinstance(baselines, list):
        fail("baselines", "expected a list of preset names")
    for i, b in enumerate(baselines):
        if b not in PRESETS:
            fail(f"baselines[{i}]", f"expected one of {', '.join(PRESETS)}, got {b!r}")
    return StudyConfig(
        name=name, source=source.resolve(), data=data, space=space, strategy=strategy,
        strategy_options=strategy_options, objectives=tuple(objectives), budget=budget, pruner=pruner,
        storage=storage, workers=integer(top.get("workers", 1), "workers", 1),
        baselines=tuple(baselines), seed=integer(top.get("seed", 0), "seed", 0))


# ---- storage -----------------------------------------------------------------------------
def open_storage(url: str) -> optuna.storages.BaseStorage:
    """An Optuna storage for ``url``: ``sqlite:///…`` (with a busy timeout), ``journal:PATH`` for
    several local processes, or any SQLAlchemy URL (PostgreSQL, MySQL). RDB storages keep a
    heartbeat, so trials of a worker that died are failed and retried by the next worker."""
    if url.startswith("journal:"):
        path = Path(url.removeprefix("journal:"))
        path.parent.mkdir(parents=True, exist_ok=True)
        backend = optuna.storages.journal.JournalFileBackend(str(path))
        return optuna.storages.JournalStorage(backend)
    _check_driver(url)
    engine_kwargs: dict[str, Any] = {}
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        engine_kwargs = {"connect_args": {"timeout": 60}}
    else:
        engine_kwargs = {"pool_pre_ping": True}
    return optuna.storages.RDBStorage(
        url, engine_kwargs=engine_kwargs, heartbeat_interval=10, grace_period=60,
        heartbeat_stale_trial_callback=optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=2))


# What to install for a storage URL's driver (SQLAlchemy 2.1's default PostgreSQL driver is psycopg 3).
_DRIVER_HINTS = {
    "postgresql": "pip install 'psycopg[binary]' (SQLAlchemy's default PostgreSQL driver), or "
                  "pip install 'autorec-nas[postgres]' and write postgresql+psycopg2://...",
    "postgresql+psycopg": "pip install 'psycopg[binary]'",
    "postgresql+psycopg2": "pip install 'autorec-nas[postgres]'",
    "mysql": "pip install mysqlclient (SQLAlchemy's default MySQL driver), or "
             "pip install 'autorec-nas[mysql]' and write mysql+pymysql://...",
    "mysql+pymysql": "pip install 'autorec-nas[mysql]'",
}


def _check_driver(url: str) -> None:
    """A clear error for a URL that is not one, names an unknown database, or whose driver is not
    installed (Optuna would say only "Failed to import DB access module")."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    try:
        parsed = make_url(url)
    except ArgumentError:
        raise StudyConfigError(f"storage: {url!r} is not a storage URL; expected sqlite:///PATH, "
                               "journal:PATH, postgresql://USER@HOST/DB or mysql://USER@HOST/DB") from None
    shown = parsed.render_as_string(hide_password=True)
    try:
        dialect = parsed.get_dialect()
    except NoSuchModuleError:
        raise StudyConfigError(f"storage: {shown}: unknown database {parsed.drivername!r}; expected "
                               "sqlite, postgresql or mysql (or journal:PATH)") from None
    try:
        dialect.import_dbapi()
    except ImportError as exc:
        how = _DRIVER_HINTS.get(parsed.drivername, f"install the Python driver {parsed.drivername!r} names")
        raise StudyConfigError(f"storage: {shown}: the database driver is not installed ({exc}); "
                               f"{how}") from None


def _pruner(config: StudyConfig) -> optuna.pruners.BasePruner:
    if len(config.objectives) > 1 or config.pruner == "none":
        return optuna.pruners.NopPruner()
    if config.pruner == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=1, max_resource=config.budget.epochs)
    return optuna.pruners.MedianPruner(n_startup_trials=3, n_warmup_steps=0)


def create_study(config: StudyConfig, storage: optuna.storages.BaseStorage | None = None) -> optuna.Study:
    from autorec.strategies import make_strategy

    strategy = make_strategy(config.strategy, config.seed, **config.strategy_options)
    study = optuna.create_study(
        study_name=config.name, storage=storage or open_storage(config.storage_url),
        sampler=strategy.sampler(len(config.objectives)), pruner=_pruner(config),
        directions=config.directions, load_if_exists=True)
    stored = study.user_attrs.get("objectives")
    if stored is None:
        study.set_user_attr("objectives", list(config.objectives))
        study.set_metric_names(list(config.objectives))
    elif stored != list(config.objectives):
        raise StudyConfigError(f"{config.source}: objectives: the stored study {config.name!r} has "
                               f"{stored}; use another name for other objectives")
    return study


# ---- crash safety ------------------------------------------------------------------------
def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def recover_interrupted(study: optuna.Study, storage: optuna.storages.BaseStorage) -> list[int]:
    """Fail the RUNNING trials whose worker process on this host is gone, and queue a retry of
    each with the same parameters. Returns the numbers of the trials failed. ``storage`` is the
    study's (the one it was created or loaded with): only the storage can end another process's
    trial.

    (Workers on other hosts are covered by the RDB heartbeat: their trials go stale and
    Optuna's retry callback requeues them.)
    """
    host, failed = socket.gethostname(), []
    study_id = storage.get_study_id_from_name(study.study_name)
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        worker = trial.user_attrs.get(WORKER_ATTR)
        if not worker or worker.get("host") != host or _alive(int(worker.get("pid", -1))):
            continue
        trial_id = storage.get_trial_id_from_study_id_trial_number(study_id, trial.number)
        storage.set_trial_user_attr(trial_id, INTERRUPTED_ATTR, True)
        storage.set_trial_user_attr(trial_id, "fail_reason",
                                    f"interrupted: worker pid {worker.get('pid')} on {host} died")
        study.enqueue_trial(trial.params, user_attrs={"retry_of": trial.number})
        storage.set_trial_state_values(trial_id, TrialState.FAIL)
        failed.append(trial.number)
    return failed


def mark_interrupted(trial: optuna.Trial, reason: str) -> None:
    """Record that a running trial was cut short (not its own failure), so it does not use the
    budget, and queue a retry with the same parameters."""
    trial.set_user_attr(INTERRUPTED_ATTR, True)
    trial.set_user_attr("fail_reason", reason)
    trial.study.enqueue_trial(trial.params, user_attrs={"retry_of": trial.number})


def finished_count(study: optuna.Study) -> int:
    """Trials that used the budget: complete, pruned, or failed for a reason of their own
    (interrupted trials are retried, so they do not count)."""
    count = 0
    for t in study.get_trials(deepcopy=False):
        if t.state in (TrialState.COMPLETE, TrialState.PRUNED):
            count += 1
        elif t.state == TrialState.FAIL and not t.user_attrs.get(INTERRUPTED_ATTR):
            count += 1
    return count


# ---- one trial ---------------------------------------------------------------------------
def cost_summary(spec: ArchSpec) -> dict[str, float]:
    """The analytic costs a study records and optimises (per-sample FLOPs and seconds; bytes)."""
    from autorec.costs import arch_cost

    return arch_cost(spec).summary()


class TrialRunner:
    """The objective one worker process runs: propose, cost, train, record."""

    def __init__(self, config: StudyConfig) -> None:
        from autorec.data import load_dataset
        from autorec.space import SearchSpace
        from autorec.strategies import make_strategy

        self.config = config
        self.space = SearchSpace.load(config.space)
        self.strategy = make_strategy(config.strategy, config.seed, **config.strategy_options)
        self.dataset = load_dataset(config.data.name, path=config.data.path, seed=config.data.seed,
                                    **config.data.options)
        self.strategy.bind(self.dataset)
        self.artifacts = optuna.artifacts.FileSystemArtifactStore(str(self._artifact_dir()))

    def _artifact_dir(self) -> Path:
        path = self.config.directory / "artifacts"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def _latency(self, trainer: Any) -> float:
        """Median seconds of one inference batch (the study's batch size) of the trained model."""
        from autorec.costs import measure_latency

        batch = next(iter(self.dataset.batches("val", self.config.budget.batch_size, shuffle=False)))
        return measure_latency(trainer.model, batch, repeats=10)

    def train_config(self, checkpoint_dir: Path | None) -> Any:
        from autorec.train.trainer import TrainConfig

        b = self.config.budget
        return TrainConfig(epochs=b.epochs, batch_size=b.batch_size, seed=self.config.seed,
                           patience=b.patience, max_steps_per_epoch=b.max_steps_per_epoch,
                           checkpoint_dir=str(checkpoint_dir) if checkpoint_dir else None,
                           progress=False)

    def __call__(self, trial: optuna.Trial) -> float | list[float]:
        from autorec.train.trainer import Trainer

        trial.set_user_attr(WORKER_ATTR, {"host": socket.gethostname(), "pid": os.getpid()})
        spec = self.strategy.propose(trial, self.space, self.dataset.schema)
        spec = spec.replace(name=f"{self.config.name}-trial{trial.number}")
        trial.set_user_attr("arch", spec.to_dict())
        with tempfile.TemporaryDirectory() as tmp:
            arch_path = Path(tmp) / "arch.json"
            spec.save(arch_path)
            optuna.artifacts.upload_artifact(artifact_store=self.artifacts, file_path=str(arch_path),
                                             study_or_trial=trial, mimetype="application/json")
        costs = cost_summary(spec)
        trial.set_user_attr("costs", costs)
        single = len(self.config.objectives) == 1

        def report(record: Any) -> None:
            if not single:  # Optuna reports (and prunes) single-objective trials only
                return
            trial.report(record.val["auc"], record.epoch)
            if trial.should_prune():
                trial.set_user_attr("pruned_at_epoch", record.epoch)
                raise optuna.TrialPruned(f"val AUC {record.val['auc']:.4f} at epoch {record.epoch}")

        checkpoint = self.config.directory / "trials" / str(trial.number)
        try:
            trainer = Trainer(spec, self.dataset, self.train_config(checkpoint), on_epoch=report)
            self.strategy.prepare_trainer(trial, trainer)
            result = trainer.fit()
            if "latency_ms" in self.config.objectives:
                costs["latency_ms"] = 1e3 * self._latency(trainer)
                trial.set_user_attr("costs", costs)
        except optuna.TrialPruned:
            raise
        except KeyboardInterrupt:  # Ctrl-C: Optuna fails the trial; it is retried on the next run
            mark_interrupted(trial, "interrupted: Ctrl-C")
            raise
        except Exception as exc:
            trial.set_user_attr("fail_reason", f"{type(exc).__name__}: {exc}")
            raise
        trial.set_user_attr("metrics", {"val": result.val, "test": result.test,
                                        "best_epoch": result.best_epoch,
                                        "train_samples_per_s": result.samples_per_s,
                                        "seconds": result.seconds})
        trial.set_user_attr("checkpoint", str(checkpoint / "best"))
        values = {"val_auc": result.val["auc"], "val_logloss": result.val["logloss"], **costs}
        out = [float(values[o]) for o in self.config.objectives]
        return out[0] if single else out


# ---- running -----------------------------------------------------------------------------
def _work(config: StudyConfig, on_trial: Callable[[optuna.Study, FrozenTrial], None] | None = None,
          runner: TrialRunner | None = None) -> None:
    """One worker: run trials until the study's budget is used (shared with other workers).

    Workers claim the budget without a lock, so several workers can overshoot it by up to
    (workers - 1) trials; no trial is ever recorded twice.
    """
    runner = runner or TrialRunner(config)
    study = create_study(config)
    budget, deadline = config.budget.trials, config.budget.timeout_s
    start = time.monotonic()
    while deadline is None or time.monotonic() - start < deadline:
        running = len(study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)))
        if finished_count(study) + running >= budget:
            break
        study.optimize(runner, n_trials=1, catch=(Exception,),
                       callbacks=[on_trial] if on_trial else None)


def _spawned_worker(config: StudyConfig) -> None:
    import warnings

    warnings.filterwarnings("ignore")
    _work(config)


def train_baselines(config: StudyConfig, study: optuna.Study, log: Callable[[str], None] = print,
                    runner: TrialRunner | None = None) -> dict[str, dict[str, Any]]:
    """Train each baseline preset with the trials' budget, once per study (kept in the study)."""
    from autorec.presets import preset
    from autorec.train.trainer import Trainer

    done: dict[str, dict[str, Any]] = dict(study.user_attrs.get("baselines", {}))
    todo = [b for b in config.baselines if b not in done]
    if not todo:
        return done
    runner = runner or TrialRunner(config)
    for name in todo:
        log(f"baseline {name}: training with the trials' budget")
        spec = preset(name, runner.dataset.schema)
        result = Trainer(spec, runner.dataset, runner.train_config(None)).fit()
        done[name] = {"val": result.val, "test": result.test, "costs": cost_summary(spec),
                      "arch": spec.to_dict()}
        study.set_user_attr("baselines", done)
    return done


def run_study(config: StudyConfig, workers: int | None = None,
              on_trial: Callable[[optuna.Study, FrozenTrial], None] | None = None,
              log: Callable[[str], None] = print) -> StudySummary:
    """Run (or resume) the study to its budget with ``workers`` local processes."""
    workers = workers or config.workers
    storage = open_storage(config.storage_url)
    study = create_study(config, storage)
    recovered = recover_interrupted(study, storage)
    if recovered:
        log(f"resumed: trials {recovered} were interrupted; marked failed and queued again")
    runner = TrialRunner(config) if workers == 1 else None  # loads the data once for both
    train_baselines(config, study, log, runner)
    if workers == 1:
        _work(config, on_trial, runner)
    else:
        context = multiprocessing.get_context("spawn")
        processes = [context.Process(target=_spawned_worker, args=(config,)) for _ in range(workers)]
        for p in processes:
            p.start()
        for p in processes:
            p.join()
        bad = [p.exitcode for p in processes if p.exitcode]
        if bad:
            raise RuntimeError(f"{len(bad)} of {workers} workers exited with codes {bad}")
    return summarize(create_study(config), config)


# ---- results -----------------------------------------------------------------------------
@dataclass
class StudySummary:
    """The study's results: the best trials by validation AUC, the Pareto front, baselines."""

    name: str
    objectives: tuple[str, ...]
    trials: list[dict[str, Any]]
    pareto: list[int]
    baselines: dict[str, dict[str, Any]]

    @property
    def best(self) -> dict[str, Any] | None:
        """The completed trial with the highest validation AUC."""
        done = [t for t in self.trials if t["state"] == "COMPLETE" and t.get("val_auc") is not None]
        return max(done, key=lambda t: t["val_auc"]) if done else None

    def verdict(self) -> str:
        best = self.best
        if best is None:
            return "no trial completed"
        line = (f"best architecture: trial {best['number']} with validation AUC {best['val_auc']:.4f}, "
                f"test AUC {best['test_auc']:.4f}")
        if not self.baselines:
            return line
        top_name, top = max(self.baselines.items(), key=lambda kv: kv[1]["test"]["auc"])
        if best["test_auc"] > top["test"]["auc"]:
            return (f"{line}: beats every preset trained with the same budget "
                    f"(best preset {top_name}: test AUC {top['test']['auc']:.4f})")
        return (f"{line}: does NOT beat the best preset trained with the same budget "
                f"({top_name}: test AUC {top['test']['auc']:.4f})")

    def to_dict(self) -> dict[str, Any]:
        baselines = {k: {"val_auc": v["val"]["auc"], "test_auc": v["test"]["auc"]}
                     for k, v in self.baselines.items()}
        return {"name": self.name, "objectives": list(self.objectives), "best": self.best,
                "pareto": self.pareto, "baselines": baselines, "trials": self.trials,
                "verdict": self.verdict()}


def trial_row(t: FrozenTrial) -> dict[str, Any]:
    metrics = t.user_attrs.get("metrics", {})
    costs = t.user_attrs.get("costs", {})
    return {
        "number": t.number, "state": t.state.name,
        "val_auc": metrics.get("val", {}).get("auc"), "test_auc": metrics.get("test", {}).get("auc"),
        "values": t.values, "costs": costs, "fail_reason": t.user_attrs.get("fail_reason"),
        "seconds": (t.duration.total_seconds() if t.duration else None),
    }


def summarize(study: optuna.Study, config: StudyConfig | None = None) -> StudySummary:
    objectives = tuple(study.user_attrs.get("objectives", ["val_auc"]))
    trials = [trial_row(t) for t in study.get_trials(deepcopy=False)]
    complete = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))]
    pareto = [t.number for t in study.best_trials] if complete else []
    return StudySummary(study.study_name, objectives, trials, pareto,
                        dict(study.user_attrs.get("baselines", {})))


def load_study(config: StudyConfig) -> optuna.Study:
    """The stored study of ``config``, which must exist (run ``autorec search`` first)."""
    storage = open_storage(config.storage_url)
    try:
        return optuna.load_study(study_name=config.name, storage=storage)
    except KeyError:
        raise StudyConfigError(f"{config.source}: no study {config.name!r} in {config.storage_url}; "
                               f"run `autorec search {config.source}` first") from None


def select_trials(study: optuna.Study, trial: int | None = None, best: int = 1) -> list[FrozenTrial]:
    """Trial number ``trial``, or the ``best`` completed trials by validation AUC."""
    trials = study.get_trials(deepcopy=False)
    if trial is not None:
        found = [t for t in trials if t.number == trial]
        if not found:
            raise ValueError(f"--trial: study {study.study_name!r} has no trial {trial} "
                             f"(it has 0..{len(trials) - 1})")
        if found[0].state != TrialState.COMPLETE:
            raise ValueError(f"--trial: trial {trial} is {found[0].state.name}, not COMPLETE")
        return found
    done = [t for t in trials if t.state == TrialState.COMPLETE and "metrics" in t.user_attrs]
    if not done:
        raise ValueError(f"study {study.study_name!r} has no completed trial yet")
    return sorted(done, key=lambda t: -t.user_attrs["metrics"]["val"]["auc"])[:best]


def retrain_command(config: StudyConfig, arch_path: Path, epochs: int | None = None) -> str:
    """The `autorec train` command line that retrains ``arch_path`` on the study's data."""
    parts = ["autorec", "train", "--data", config.data.name, "--arch", str(arch_path),
             "--seed", str(config.seed), "--epochs", str(epochs or max(10, config.budget.epochs)),
             "--batch-size", str(config.budget.batch_size)]
    if config.data.path:
        parts += ["--data-path", config.data.path]
    for key, value in config.data.options.items():
        parts += ["--data-opt", f"{key}={json.dumps(value) if not isinstance(value, str) else value}"]
    return " ".join(parts)


def export_trials(config: StudyConfig, out_dir: Path, trial: int | None = None, best: int = 1,
                  log: Callable[[str], None] = print) -> list[Path]:
    """Export trials of the study (weights from their best checkpoint) into ``out_dir``.

    One trial goes to ``out_dir`` itself; several go to ``out_dir/trial-<N>``.
    """
    from autorec.export import export_trained
    from autorec.train.trainer import Trainer

    chosen = select_trials(load_study(config), trial, best)
    runner = TrialRunner(config)
    written = []
    for t in chosen:
        target = out_dir if len(chosen) == 1 else out_dir / f"trial-{t.number}"
        checkpoint = t.user_attrs.get("checkpoint")
        if not checkpoint or not Path(checkpoint).is_dir():
            raise ValueError(f"trial {t.number}: its checkpoint {checkpoint} is missing")
        trainer = Trainer(trial_arch(t), runner.dataset, runner.train_config(None))
        trainer.load_checkpoint(checkpoint, optimizer=False)
        export_trained(trainer, target, metrics=t.user_attrs["metrics"], costs=t.user_attrs.get("costs"),
                       retrain_command=retrain_command(config, target / "arch.json"))
        growth = t.user_attrs.get("growth")
        if isinstance(growth, dict) and growth.get("best"):  # the schedule lives beside arch.json
            from autorec.growth.schedule import GrowthSchedule

            GrowthSchedule.from_dict(growth["best"]["schedule"]).save(target / "schedule.json")
        log(f"trial {t.number} -> {target}")
        written.append(target)
    return written


def trial_arch(trial: FrozenTrial) -> ArchSpec:
    """The ArchSpec a trial evaluated."""
    data = trial.user_attrs.get("arch")
    if data is None:
        raise KeyError(f"trial {trial.number} has no architecture recorded")
    return ArchSpec.from_dict(data, f"trial {trial.number}")


def dumps(summary: StudySummary) -> str:
    def clean(value: Any) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    return json.dumps(clean(summary.to_dict()))
