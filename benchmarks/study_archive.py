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
from pathlib import Path

import optuna
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend

from autorec.study import StudyConfig, open_storage


def _journal(path: Path) -> JournalStorage:
    return JournalStorage(JournalFileBackend(str(path)))


def archive(name: str, storage_url: str, path: Path) -> int:
    """Copy study ``name`` of ``storage_url`` into the journal file ``path`` (replaced whole);
    the number of trials copied. A study that is not there is an error naming both."""
    storage = open_storage(storage_url)
    try:
        count = len(optuna.load_study(study_name=name, storage=storage).get_trials(deepcopy=False))
    except KeyError:
        raise SystemExit(f"archive: no study {name!r} in {storage_url}") from None
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.unlink(missing_ok=True)
    optuna.copy_study(from_study_name=name, from_storage=storage, to_storage=_journal(partial))
    os.replace(partial, path)
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
