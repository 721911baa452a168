"""Opening one of ``oneshot_vs_tpe``'s one-shot studies to train some of its candidates again
(``rerank_noise``, ``learning_curves``): the study, its trial runner and the trial numbers asked
for, each refused by name when it is not there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna

from autorec.study import StudyConfig, TrialRunner, open_storage


def open_candidates(out: Path, tag: str, seed: int, trials: str) -> tuple[str, optuna.Study, Any, list[int]]:
    """(the study's name, the study, its :class:`TrialRunner`, the trial numbers of ``trials``) of
    the study ``oneshot<tag>_seed<seed>`` under ``out``; ``trials``: comma-separated numbers of its
    candidates. Exits naming the study file, or the numbers, when they are not there."""
    try:
        numbers = [int(n) for n in trials.split(",")]
    except ValueError:
        raise SystemExit(f"--trials {trials!r}: expected comma-separated trial numbers") from None
    name = f"oneshot{tag}_seed{seed}"
    path = out / name / "study.yaml"
    if not path.exists():
        raise SystemExit(f"--tag {tag} --seed {seed}: no study file at {path}")
    config = StudyConfig.load(path)
    study = optuna.load_study(study_name=config.name, storage=open_storage(config.storage_url))
    trials_ = study.trials
    missing = [n for n in numbers if not 0 <= n < len(trials_) or "arch" not in trials_[n].user_attrs]
    if missing:
        raise SystemExit(f"--trials: {missing} are not candidates of {name}")
    return name, study, TrialRunner(config), numbers
