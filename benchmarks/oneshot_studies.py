"""Opening one of ``oneshot_vs_tpe``'s one-shot studies to train some of its candidates again
(``rerank_noise``, ``learning_curves``): the study, its trial runner and the trial numbers asked
for, each refused by name when it is not there."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import optuna

from autorec.study import StudyConfig, TrialRunner, open_storage


def add_candidate_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags that name the study and its candidates: ``--out``, ``--tag``, ``--seed``, ``--trials``
    (what :func:`open_candidates` takes)."""
    parser.add_argument("--out", type=Path, default=Path.home() / ".cache" / "autorec-bench" / "oneshot")
    parser.add_argument("--tag", required=True, help="the one-shot study oneshot<TAG>_seed<N>")
    parser.add_argument("--seed", type=int, default=0, help="the study's search seed")
    parser.add_argument("--trials", required=True, help="comma-separated trial numbers of that study")


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
