"""What the one-shot runs' winners are, beside what they tested: one row per run and seed.

Issue 20's runs end on different models, and whether a seed meets TPE's AUC has followed what
kind of model its final trained more than any score before it. This script reads the final
training of each seed of each run named (``--tags``, studies of ``oneshot_vs_tpe --stage
oneshot`` under ``--root``) and writes, per run and seed, flat figures of its winner: its
layer kinds (``_kinds``), whether it keeps every feature at one width with every row
(``_alike``: 1 or 0), the widths it uses, the tables it keeps and hashes, the smallest width
it gives a table the data plants as strong (``--strong``: the ``scale`` preset's tables of the
highest planted weight), and its validation and test AUC; then the mean test AUC of three
groups over every row read: not alike, alike with a DCNv2 layer, alike without.

Run (reads the studies only, seconds): ``python -m benchmarks.oneshot_finals --tags
_k9,_k10,_k12,_k13`` -> ``benchmarks/results/oneshot_finals.json``.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import TrialState

from benchmarks.oneshot_tpe_proxy import ROOT
from benchmarks.results_file import RESULTS, merge_results


def strong_features(preset: str = "scale") -> list[str]:
    """The features of the synthetic ``preset`` whose tables carry the highest planted weight.

    Example:
        >>> strong_features()
        ['cat_2', 'cat_6', 'cat_9', 'cat_11', 'cat_23']
    """
    from autorec.data.synthetic.config import PRESETS

    weights = PRESETS[preset]["table_weight"]
    return [f"cat_{i}" for i, w in enumerate(weights) if w == max(weights)]


def winner_row(arch: dict[str, Any], metrics: dict[str, Any], features: list[str],
               strong: list[str]) -> dict[str, Any]:
    """The flat figures of one final training: ``arch`` (its ArchSpec as a dict), ``metrics``
    (its record), ``features`` (every sparse feature of the data), ``strong`` (those planted
    strong).

    Example:
        >>> arch = {"layers": [{"kind": "dcnv2"}], "tables": [
        ...     {"features": ["a"], "dim": 8, "num_embeddings": 10, "hash_from": 10},
        ...     {"features": ["b"], "dim": 4, "num_embeddings": 5, "hash_from": 20}]}
        >>> row = winner_row(arch, {"val": {"auc": 0.7}, "test": {"auc": 0.69}}, ["a", "b", "c"], ["b"])
        >>> row["kinds"], row["alike"], row["tables"], row["hashed"], row["strong_min_width"]
        ('dcnv2', 0, 2, 1, 4)
    """
    tables = arch.get("tables", [])
    width = {f: t["dim"] for t in tables for f in t["features"]}
    hashed = sum(1 for t in tables if t.get("hash_from") not in (None, t["num_embeddings"]))
    widths = sorted(set(width.values()))
    return {
        "kinds": "+".join(layer["kind"] for layer in arch.get("layers", [])),
        "alike": int(len(width) == len(features) and len(widths) == 1 and hashed == 0),
        "widths": "-".join(map(str, widths)),
        "tables": len(width),
        "hashed": hashed,
        "strong_min_width": min((width.get(f, 0) for f in strong), default=None),
        "val_auc": metrics["val"]["auc"],
        "test_auc": (metrics.get("test") or {}).get("auc"),
    }


def finals(tags: list[str], seeds: list[int], root: Path, strong: list[str]) -> dict[str, Any]:
    """Flat figures ``<tag>_seed<i>_<field>`` of :func:`winner_row` for every run and seed with a
    final training, and the mean test AUC (and count) of the winners in each group: ``other``
    (not alike), ``alike_dcnv2`` (alike, with a DCNv2 layer) and ``alike_no_dcnv2``. Runs that
    share their finals (one trained model read by two runs) count once per run."""
    out: dict[str, Any] = {}
    tested: dict[str, list[float]] = {"other": [], "alike_dcnv2": [], "alike_no_dcnv2": []}
    for tag in tags:
        for seed in seeds:
            name = f"oneshot{tag}_seed{seed}"
            db = root / name / name / "study.db"
            if not db.exists():
                continue
            study = optuna.load_study(study_name=name, storage=f"sqlite:///{db}")
            done = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
                    if t.user_attrs.get("stage") == "final"]
            if not done:
                continue
            final = done[-1]
            # the data's features: every one that some scored candidate embeds (the all-alike
            # settings a run crosses in keep them all)
            features = sorted({f for t in study.get_trials(deepcopy=False)
                               if t.user_attrs.get("stage") == "proxy"
                               for table in t.user_attrs["arch"]["tables"] for f in table["features"]})
            row = winner_row(final.user_attrs["arch"], final.user_attrs["metrics"], features, strong)
            out.update({f"{tag[1:]}_seed{seed}_{k}": v for k, v in row.items()})
            if row["test_auc"] is not None:
                group = "other" if not row["alike"] else \
                    "alike_dcnv2" if "dcnv2" in row["kinds"].split("+") else "alike_no_dcnv2"
                tested[group].append(row["test_auc"])
    for group, aucs in tested.items():
        out[f"{group}_finals"] = len(aucs)
        out[f"{group}_test_auc_mean"] = statistics.fmean(aucs) if aucs else None
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tags", required=True, help="runs, comma-separated (e.g. _k9,_k12)")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--root", type=Path, default=ROOT)
    parser.add_argument("--strong", default=",".join(strong_features()),
                        help="the planted strong features (default: the scale preset's)")
    parser.add_argument("--out", type=Path, default=RESULTS / "oneshot_finals.json")
    args = parser.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    tags = args.tags.split(",")
    bad = [t for t in tags if not t.startswith("_")]
    if bad:
        parser.error(f"--tags: {bad} are not run tags, which start with '_' (as _k9)")
    try:
        seeds = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        parser.error(f"--seeds: expected integers separated by commas, got {args.seeds!r}")
    figures = finals(tags, seeds, args.root, args.strong.split(","))
    if not any(k.endswith("_kinds") for k in figures):
        raise SystemExit(f"{args.root}: no final training in runs {tags} (seeds {seeds})")
    for key, value in figures.items():
        print(f"{key:36s} {value:.4f}" if isinstance(value, float) else f"{key:36s} {value}")
    merge_results(args.out, figures)


if __name__ == "__main__":
    main()
