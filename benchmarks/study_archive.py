"""A study's trials kept in the work tree, so a benchmark of several sessions survives a new machine.

The long benchmarks (issue 20's TPE baselines: hours of trials) keep their Optuna studies under
``~/.cache``, which a session on a fresh machine does not have. :func:`archive` copies a stored
study (every trial in its state, with its parameters, values and attributes, and the study's
own attributes) into an Optuna journal file, one JSON line per operation: plain text that
git keeps and diffs, written through a partial file and renamed, so a cut leaves the last whole
archive. :func:`restore` copies it back into an empty storage; a study already there is left as
it is (the live study is newer than any archive of it). Both are ``optuna.copy_study``: nothing
is re-encoded here. A trial that was running when archived comes back running, as after a kill,
and the study's next run treats it as cut (run again).

Example:
    >>> import tempfile, optuna
    >>> optuna.logging.set_verbosity(optuna.logging.WARNING)
    >>> root = Path(tempfile.mkdtemp())
    >>> study = optuna.create_study(study_name="s", storage=f"sqlite:///{root}/a.db")
    >>> study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=2)
    >>> archive("s", f"sqlite:///{root}/a.db", root / "s.jsonl")
    2
    >>> restore(root / "s.jsonl", "s", f"sqlite:///{root}/b.db")
    True
    >>> len(optuna.load_study(study_name="s", storage=f"sqlite:///{root}/b.db").trials)
    2
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import optuna
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend

from autorec.study import StudyConfig, open_storage


def _journal(path: Path) -> JournalStorage:
    return JournalStorage(JournalFileBackend(str(path)))


def _write_journal(path: Path, fill: Callable[[JournalStorage], None]) -> None:
    """Replace the journal file ``path`` whole by what ``fill`` writes into a fresh journal: through
    a partial file renamed at the end, so a cut leaves the last whole archive."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.unlink(missing_ok=True)
    fill(_journal(partial))
    os.replace(partial, path)


def archive(name: str, storage_url: str, path: Path) -> int:
    """Copy study ``name`` of ``storage_url`` into the journal file ``path`` (replaced whole);
    the number of trials copied. A study that is not there is an error naming both."""
    storage = open_storage(storage_url)
    try:
        count = len(optuna.load_study(study_name=name, storage=storage).get_trials(deepcopy=False))
    except KeyError:
        raise SystemExit(f"archive: no study {name!r} in {storage_url}") from None
    _write_journal(path, lambda journal: optuna.copy_study(from_study_name=name, from_storage=storage,
                                                           to_storage=journal))
    return count


def restore(path: Path, name: str, storage_url: str) -> bool:
    """Copy study ``name`` from the journal file ``path`` into ``storage_url`` when that storage
    does not hold it; True if it was copied. An archive without that study is an error."""
    storage = open_storage(storage_url)
    if name in {s.study_name for s in optuna.get_all_study_summaries(storage, include_best_trial=False)}:
        return False
    if not path.is_file():
        return False
    source = _journal(path)
    if name not in {s.study_name for s in optuna.get_all_study_summaries(source, include_best_trial=False)}:
        raise SystemExit(f"restore: {path} holds no study {name!r}")
    optuna.copy_study(from_study_name=name, from_storage=source, to_storage=storage)
    return True


def restore_if_gone(config: StudyConfig, path: Path) -> bool:
    """Restore ``config``'s study from the journal file ``path`` when its SQLite database is gone
    (a new machine's ``~/.cache``) and ``path`` exists, without opening the storage otherwise (so
    reading a study that is not there leaves no empty database behind); True if it was copied."""
    if (config.storage_url.startswith("sqlite:///") and not (config.directory / "study.db").exists()
            and path.is_file()):
        return restore(path, config.name, config.storage_url)
    return False


TRAINED_STAGES = ("rerank", "calibrate", "final_rung", "final")  # a one-shot study's trainings


def trained_archive_path(directory: Path, name: str) -> Path:
    """Where :func:`archive_trained` keeps study ``name``'s trainings under ``directory``."""
    return directory / "oneshot_trained" / f"{name}.jsonl"


def archive_trained(name: str, storage_url: str, path: Path, stages: tuple[str, ...] = TRAINED_STAGES) -> int:
    """Copy the trials of study ``name`` whose ``stage`` user attribute is in ``stages`` (a one-shot
    study's stand-alone trainings: what its tau, winner and rung are read from), with the study's
    own attributes, into the journal file ``path`` (replaced whole); the number copied.

    A one-shot study's screen makes megabytes of proxy trials and cannot go on without its
    supernet, so it is not archived whole; what it trained can be read again without them
    (``benchmarks.oneshot_cross_scores --tau-from`` on a new supernet), and is not restored into a
    study (a run would take the missing screen for a cut one).

    Example:
        >>> import tempfile
        >>> optuna.logging.set_verbosity(optuna.logging.WARNING)
        >>> root = Path(tempfile.mkdtemp())
        >>> study = optuna.create_study(study_name="s", storage=f"sqlite:///{root}/a.db")
        >>> for stage in ("proxy", "proxy", "calibrate"):
        ...     t = study.ask({"x": optuna.distributions.FloatDistribution(0, 1)})
        ...     t.set_user_attr("stage", stage)
        ...     _ = study.tell(t, 0.5)
        >>> archive_trained("s", f"sqlite:///{root}/a.db", root / "s.jsonl")
        1
        >>> [t.user_attrs["stage"] for t in read_study(root / "s.jsonl", "s").trials]
        ['calibrate']
    """
    storage = open_storage(storage_url)
    try:
        source = optuna.load_study(study_name=name, storage=storage)
    except KeyError:
        raise SystemExit(f"archive: no study {name!r} in {storage_url}") from None
    kept = [t for t in source.get_trials(deepcopy=False) if t.user_attrs.get("stage") in stages]
    def fill(journal: JournalStorage) -> None:
        copy = optuna.create_study(study_name=name, storage=journal, directions=source.directions)
        for key, value in source.user_attrs.items():
            copy.set_user_attr(key, value)
        copy.add_trials(kept)

    _write_journal(path, fill)
    return len(kept)


def read_study(path: Path, name: str) -> optuna.Study:
    """Study ``name`` of the journal file ``path``, to read (an error naming both when absent)."""
    if not path.is_file():
        raise SystemExit(f"{path}: no archive of study {name!r}")
    try:
        return optuna.load_study(study_name=name, storage=_journal(path))
    except KeyError:
        raise SystemExit(f"{path} holds no study {name!r}") from None


def open_oneshot(root: Path, name: str, archive_dir: Path) -> optuna.Study:
    """One-shot study ``name``: its SQLite database under ``root`` (``<root>/<name>/<name>/study.db``)
    or, when that is gone (a new machine), its trainings archived under ``archive_dir``; an error
    naming both when neither is there."""
    db = root / name / name / "study.db"
    if db.exists():
        return optuna.load_study(study_name=name, storage=f"sqlite:///{db}")
    path = trained_archive_path(archive_dir, name)
    if path.is_file():
        return read_study(path, name)
    raise SystemExit(f"{db}: no study, and no archive of its trainings at {path} "
                     f"(run its one-shot stage, or `--stage archive` where it ran)")
