"""How much does the tau predictor depend on what it learned from? Refits on subsets of its labels.

``benchmarks/oneshot_tau_parts.py --fit-on tpe,tpe_shared --scores-out FILE`` keeps every
architecture's part scores: the tau pool's and those of the archived TPE trials the predictor
learned from (in the order of ``--fit-on``, each study's complete trials with metrics in trial
order). This script reads that file, no supernet needed, and for each supernet in it fits the
predictor (:func:`autorec.oneshot.predictor.predictor_figures`) again on each study's trials
alone and on all of them, and gives each fit's tau over the pool, beside the tau of the
features part alone (the predictor with the layers part's weight at 0).

Run: ``python -m benchmarks.oneshot_predictor_refit --scores
benchmarks/results/oneshot_tau_predictor_intel_scores.json --fit-on tpe,tpe_shared``; figures
(``<supernet>_refit_<studies>_tau_predicted``, ``..._predictor_weight_<part>``,
``<supernet>_refit_features_alone_tau``) merged into ``--out``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from optuna.trial import TrialState
from scipy.stats import kendalltau

from autorec.oneshot.predictor import INPUTS, predictor_figures
from benchmarks.oneshot_cross_scores import ARCHIVE
from benchmarks.results_file import RESULTS, merge_results, read_json
from benchmarks.study_archive import read_study


def labelled_counts(stages: list[str], archive_dir: Path = ARCHIVE) -> list[int]:
    """How many trials of each archived study the predictor learned from (complete, with metrics)."""
    counts = []
    for stage in stages:
        study = read_study(archive_dir / f"{stage}.jsonl", stage)
        counts.append(sum("metrics" in t.user_attrs
                          for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))))
    return counts


def refits(scores: dict[str, list[dict[str, Any]]], stages: list[str], counts: list[int]) -> dict[str, Any]:
    """Flat figures for every supernet of ``scores`` (its rows as ``--scores-out`` writes them):
    the predictor refitted on each of ``stages`` alone (``counts`` trials each, in that order)
    and on all of them. A supernet whose fit rows do not number ``sum(counts)`` is a ValueError
    naming it (the file came from another ``--fit-on``)."""
    out: dict[str, Any] = {}
    for key, rows in scores.items():
        if not isinstance(rows, list):  # the file's machine and commit
            continue
        pool = [r for r in rows if r["set"] == "pool"]
        fit = [r for r in rows if r["set"] == "fit"]
        if len(fit) != sum(counts):
            raise ValueError(f"{key}: {len(fit)} fit rows, where {', '.join(stages)} hold {sum(counts)} "
                             f"trials ({counts}): scored with another --fit-on?")
        parts = {p: [r[p] for r in pool] for p in INPUTS}
        trained = [r["trained"] for r in pool]
        bounds = [0]
        for count in counts:
            bounds.append(bounds[-1] + count)
        subsets = {stage: fit[bounds[i]:bounds[i + 1]] for i, stage in enumerate(stages)}
        if len(stages) > 1:
            subsets["+".join(stages)] = fit
        for name, subset in subsets.items():
            figures = predictor_figures({p: [r[p] for r in subset] for p in INPUTS},
                                        [r["trained"] for r in subset], parts, trained)
            out.update({f"{key}_refit_{name}_{k}": v for k, v in figures.items()})
        out[f"{key}_refit_features_alone_tau"] = float(kendalltau(parts["features"], trained).statistic)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scores", type=Path, required=True,
                        help="a file oneshot_tau_parts --scores-out wrote")
    parser.add_argument("--fit-on", required=True,
                        help="the --fit-on it was scored with (e.g. tpe,tpe_shared)")
    parser.add_argument("--out", type=Path, default=RESULTS / "oneshot_tau_predictor_intel.json")
    args = parser.parse_args(argv)
    try:
        scores = read_json(args.scores, dict, "a JSON object of scores", "--scores")
    except SystemExit as err:  # (with the usage line, as every other bad flag)
        parser.error(str(err))
    stages = args.fit_on.split(",")
    try:
        figures = refits(scores, stages, labelled_counts(stages))
    except ValueError as err:
        parser.error(f"{args.scores}: {err}")
    for key, value in figures.items():
        print(f"{key:60s} {value:.4f}" if isinstance(value, float) else f"{key:60s} {value}")
    merge_results(args.out, figures, prefix="refit")


if __name__ == "__main__":
    main()
