"""Opening one of ``oneshot_vs_tpe``'s one-shot studies to train some of its candidates again
(``rerank_noise``, ``learning_curves``): the study, its trial runner and the trial numbers asked
for, each refused by name when it is not there."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import optuna

from autorec.study import StudyConfig, TrialRunner, open_storage
from benchmarks.results_file import commit, machine

RESULTS = Path(__file__).resolve().parent / "results"


def add_candidate_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags that name the study and its candidates: ``--out``, ``--tag``, ``--seed``,
    ``--study``, ``--trials`` (what :func:`open_candidates` takes)."""
    parser.add_argument("--out", type=Path, default=Path.home() / ".cache" / "autorec-bench" / "oneshot")
    parser.add_argument("--tag", default=None, help="the one-shot study oneshot<TAG>_seed<N>")
    parser.add_argument("--study", default=None,
                        help="any study under --out by its name instead (e.g. tpe: its trials' models)")
    parser.add_argument("--seed", type=int, default=0, help="the study's search seed")
    parser.add_argument("--trials", required=True, help="comma-separated trial numbers of that study")


def open_candidates(out: Path, tag: str | None, seed: int, trials: str, study: str | None = None,
                    ) -> tuple[str, optuna.Study, Any, list[int]]:
    """(the study's name, the study, its :class:`TrialRunner`, the trial numbers of ``trials``) of
    the study ``oneshot<tag>_seed<seed>`` under ``out``, or of the one named ``study`` (a TPE
    study's trials are architectures too); ``trials``: comma-separated numbers of its candidates.
    Exits naming the study file, or the numbers, when they are not there."""
    try:
        numbers = [int(n) for n in trials.split(",")]
    except ValueError:
        raise SystemExit(f"--trials {trials!r}: expected comma-separated trial numbers") from None
    if (tag is None) == (study is None):
        raise SystemExit("name one study: --tag (with --seed) or --study, not both or neither")
    name = study if study is not None else f"oneshot{tag}_seed{seed}"
    path = out / name / "study.yaml"
    if not path.exists():
        named = f"--study {study}" if study is not None else f"--tag {tag} --seed {seed}"
        raise SystemExit(f"{named}: no study file at {path}")
    config = StudyConfig.load(path)
    loaded = optuna.load_study(study_name=config.name, storage=open_storage(config.storage_url))
    trials_ = loaded.trials
    missing = [n for n in numbers if not 0 <= n < len(trials_) or "arch" not in trials_[n].user_attrs]
    if missing:
        raise SystemExit(f"--trials: {missing} are not candidates of {name}")
    return name, loaded, TrialRunner(config), numbers


def open_record(args: argparse.Namespace, prefix: str,
                ) -> tuple[optuna.Study, Any, list[int], Path, dict[str, Any]]:
    """(the study, its runner, the trial numbers, the JSON file, its record so far with this run's
    machine, commit and study name) for ``args`` of :func:`add_candidate_arguments` and ``--json``
    (default ``benchmarks/results/<prefix><TAG>_seed<N>.json``, or ``<prefix>_<STUDY>.json``)."""
    name, study, runner, numbers = open_candidates(args.out, args.tag, args.seed, args.trials, args.study)
    stem = f"_{args.study}" if args.study else f"{args.tag}_seed{args.seed}"
    out = args.json or RESULTS / f"{prefix}{stem}.json"
    result: dict[str, Any] = json.loads(out.read_text()) if out.exists() else {}
    result.update({"machine": machine(), "commit": commit(), "study": name})
    return study, runner, numbers, out, result
