"""Where studies live: Optuna storages (SQLite, journal file, PostgreSQL/MySQL) and the study in one.

``open_storage`` adds what Optuna's defaults lack for long studies (a busy timeout for SQLite,
the heartbeat that fails and retries trials of a worker that died) and says which package to
install when a database URL's driver is missing; ``create_study`` makes or reopens the study of
a :class:`~autorec.study.config.StudyConfig` with its strategy's sampler and its pruner.

Example:
    >>> storage = open_storage("sqlite:///:memory:")
    >>> type(storage).__name__
    'RDBStorage'
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna

from autorec.study.config import StudyConfig, StudyConfigError
from autorec.study.seeding import TrialSeededSampler


def open_storage(url: str) -> optuna.storages.BaseStorage:
    """An Optuna storage for ``url``: ``sqlite:///…`` (with a busy timeout), ``journal:PATH`` for
    several local processes, or any SQLAlchemy URL (PostgreSQL, MySQL). RDB storages keep a
    heartbeat, so trials of a worker that died are failed and retried by the next worker."""
    if url.startswith("journal:"):
        path = Path(url.removeprefix("journal:"))
        path.parent.mkdir(parents=True, exist_ok=True)
        backend = optuna.storages.journal.JournalFileBackend(str(path))
        return optuna.storages.JournalStorage(backend)
    shown = _check_driver(url)
    engine_kwargs: dict[str, Any] = {}
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        engine_kwargs = {"connect_args": {"timeout": 60}}
    else:
        engine_kwargs = {"pool_pre_ping": True}
    from sqlalchemy.exc import OperationalError

    try:
        return optuna.storages.RDBStorage(
            url, engine_kwargs=engine_kwargs, heartbeat_interval=10, grace_period=60,
            heartbeat_stale_trial_callback=optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=2))
    except OperationalError as exc:  # the server is down or unknown, the login refused
        reason = str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc).splitlines()[0]
        raise StudyConfigError(f"storage: {shown}: cannot connect to the database ({reason})") from None


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


def _check_driver(url: str) -> str:
    """A clear error for a URL that is not one, names an unknown database, or whose driver is not
    installed (Optuna would say only "Failed to import DB access module"); returns the URL as
    errors show it (without its password)."""
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
    return shown


def _pruner(config: StudyConfig) -> optuna.pruners.BasePruner:
    if len(config.objectives) > 1 or config.pruner == "none":
        return optuna.pruners.NopPruner()
    if config.pruner == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=1, max_resource=config.budget.epochs)
    return optuna.pruners.MedianPruner(n_startup_trials=3, n_warmup_steps=0)


SALT_STRIDE = 7919  # seed distance between local workers (a prime: no overlap with trial counts)


def create_study(config: StudyConfig, storage: optuna.storages.BaseStorage | None = None,
                 salt: int = 0) -> optuna.Study:
    """Create or load the study of ``config``, with the strategy's sampler seeded per trial by the
    study's seed, the trial's index and ``salt`` (a worker's index): a study resumed after a kill
    draws what the uncut run drew, and a second worker draws new proposals rather than replaying
    the first's (which would only be reused: :mod:`autorec.study.reuse`)."""
    from autorec.strategies import make_strategy

    def sampler(seed: int) -> optuna.samplers.BaseSampler:
        options = config.strategy.options
        return make_strategy(config.strategy.name, seed, **options).sampler(len(config.objectives))

    chosen = sampler(config.seed)
    # A grid sampler's seed orders its grid, and the ids of the points visited so far are stored:
    # another seed would map them to other points. It never replays a point anyway.
    if not isinstance(chosen, optuna.samplers.GridSampler):
        chosen = TrialSeededSampler(sampler, config.seed + SALT_STRIDE * salt)
    study = optuna.create_study(
        study_name=config.name, storage=storage or open_storage(config.storage_url),
        sampler=chosen, pruner=_pruner(config), directions=config.directions, load_if_exists=True)
    described = {"data": config.data.model_dump(mode="json"), "monitor": config.budget.monitor,
                 "answer_by": config.answer_by}
    for key, value in described.items():  # what the report states (the split, the selection)
        if study.user_attrs.get(key) != value:
            study.set_user_attr(key, value)
    stored = study.user_attrs.get("objectives")
    if stored is None:
        study.set_user_attr("objectives", list(config.objectives))
        study.set_metric_names(list(config.objectives))
    elif stored != list(config.objectives):
        raise StudyConfigError(f"{config.source}: objectives: the stored study {config.name!r} has "
                               f"{stored}; use another name for other objectives")
    return study


def load_study(config: StudyConfig) -> optuna.Study:
    """The stored study of ``config``, which must exist (run ``autorec search`` first)."""
    storage = open_storage(config.storage_url)
    try:
        return optuna.load_study(study_name=config.name, storage=storage)
    except KeyError:
        raise StudyConfigError(f"{config.source}: no study {config.name!r} in {config.storage_url}; "
                               f"run `autorec search {config.source}` first") from None

