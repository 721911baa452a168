"""What the one-shot studies of ``benchmarks/oneshot_vs_tpe.py`` say about their proxy, read
back from their Optuna storages (no training): issue 20's analysis of why a seed misses.

For each study found (``<root>/oneshot<TAG>_seed<N>/oneshot<TAG>_seed<N>/study.db``, the
layout the benchmark writes), over its trainings on the trial budget (the ``calibrate`` stage
when re-ranks were short, else the ``rerank`` stage):

- Kendall's tau of the screen's score (inherited-weight validation AUC on the search's
  selection samples) and of the proxy that ranked (the rescored one, where the study rescored)
  against the trained validation AUC, on the same trainings;
- pooled over every study: Spearman of the proxy and of log forward FLOPs per sample against
  the trained validation AUC (ranks within each study, so supernets of different runs are not
  compared with each other);
- each final training's test AUC beside the winner's forward FLOPs per sample, and Spearman of
  the two over the finals.

Run: ``python -m benchmarks.oneshot_analysis`` (seconds); figures merged into
``benchmarks/results/oneshot_analysis.json``.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState
from scipy.stats import kendalltau, rankdata, spearmanr

from benchmarks.results_file import RESULTS, merge_results

ROOT = Path.home() / ".cache" / "autorec-bench" / "oneshot"
TAGS = ("_s3k", "_u3k", "_r3k")


def _stage(trials: list[FrozenTrial], stage: str) -> list[FrozenTrial]:
    return [t for t in trials if t.state == TrialState.COMPLETE and t.user_attrs.get("stage") == stage]


def budget_trainings(trials: list[FrozenTrial]) -> list[FrozenTrial]:
    """The study's trainings on the trial budget: what its tau is taken on."""
    return _stage(trials, "calibrate") or _stage(trials, "rerank")


def study_figures(trials: list[FrozenTrial]) -> dict[str, Any]:
    """Tau of the screen's and of the ranking proxy's scores against the trained validation AUC;
    the rows behind the pooled figures; the final's test AUC and forward FLOPs."""
    rows = [{"screen": t.user_attrs.get("screen", t.user_attrs["proxy"])["val_auc"],
             "proxy": t.user_attrs["proxy"]["val_auc"],
             "trained": t.user_attrs["metrics"]["val"]["auc"],
             "mflops": t.user_attrs["costs"]["flops"] / 1e6} for t in budget_trainings(trials)]
    trained = [r["trained"] for r in rows]
    out: dict[str, Any] = {"pairs": len(rows), "rows": rows}
    if len(rows) >= 3:
        out["tau_screen"] = float(kendalltau([r["screen"] for r in rows], trained).statistic)
        out["tau_proxy"] = float(kendalltau([r["proxy"] for r in rows], trained).statistic)
    final = _stage(trials, "final")
    if final:
        out["final_test_auc"] = final[-1].user_attrs["metrics"]["test"]["auc"]
        out["final_mflops"] = final[-1].user_attrs["costs"]["flops"] / 1e6
    return out


def pooled(studies: dict[str, dict[str, Any]]) -> dict[str, float | int]:
    """Spearman over every study's trainings, each study's values turned to ranks (0..1) first."""
    proxy, flops, trained = [], [], []
    for figures in studies.values():
        rows = figures["rows"]
        if len(rows) < 3:
            continue
        n = len(rows) - 1
        proxy += list((rankdata([r["proxy"] for r in rows]) - 1) / n)
        flops += list((rankdata([math.log(r["mflops"]) for r in rows]) - 1) / n)
        trained += list((rankdata([r["trained"] for r in rows]) - 1) / n)
    out: dict[str, float | int] = {"pooled_pairs": len(trained)}
    if len(trained) >= 3:
        out["pooled_spearman_proxy"] = float(spearmanr(proxy, trained).statistic)
        out["pooled_spearman_log_flops"] = float(spearmanr(flops, trained).statistic)
    finals = [(f["final_mflops"], f["final_test_auc"]) for f in studies.values() if "final_test_auc" in f]
    out["finals"] = len(finals)
    if len(finals) >= 3:
        out["finals_spearman_test_auc_vs_flops"] = float(spearmanr(*zip(*finals, strict=True)).statistic)
    return out


def load_studies(root: Path, tags: list[str], seeds: list[int]) -> dict[str, list[FrozenTrial]]:
    """Study name -> its trials, for every ``oneshot<tag>_seed<seed>`` study under ``root``."""
    found = {}
    for tag in tags:
        for seed in seeds:
            name = f"oneshot{tag}_seed{seed}"
            db = root / name / name / "study.db"
            if db.exists():
                study = optuna.load_study(study_name=name, storage=f"sqlite:///{db}")
                found[name] = study.get_trials(deepcopy=False)
    return found


def analyse(root: Path, tags: list[str], seeds: list[int]) -> dict[str, Any]:
    """The flat figures of every study found under ``root``, and the pooled ones."""
    studies = {name: study_figures(trials) for name, trials in load_studies(root, tags, seeds).items()}
    if not studies:
        raise SystemExit(f"{root}: no one-shot study oneshot<TAG>_seed<N> for tags {tags} and seeds {seeds} "
                         f"(run benchmarks/oneshot_vs_tpe.py first, or pass --root)")
    flat: dict[str, Any] = {}
    for name, figures in studies.items():
        flat.update({f"{name}_{k}": v for k, v in figures.items() if k != "rows"})
    return {**flat, **pooled(studies)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="where the one-shot studies lie")
    parser.add_argument("--tags", nargs="+", default=list(TAGS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--out", type=Path, default=RESULTS / "oneshot_analysis.json")
    args = parser.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    figures = analyse(args.root, args.tags, args.seeds)
    for key, value in figures.items():
        print(f"{key:48s} {value:.4f}" if isinstance(value, float) else f"{key:48s} {value}")
    merge_results(args.out, figures)


if __name__ == "__main__":
    main()
