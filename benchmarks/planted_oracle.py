"""What the per-feature choices are worth on the ``scale`` workload: a winner with the planted truth.

The ``scale`` preset plants per-table importance (``autorec.data.synthetic.config``): 8 tables
are pure noise (weight 0), 5 strong ones need 16 dims and the rest 2, 4 or 8 (``table_rank``).
A search's per-feature choices (width 0/4/8/16 per table) can only pay if a model given that
truth trains to a better one-epoch AUC than the same model with every feature alike. This
takes a study's winner (TPE's final, or a one-shot study's ``final`` trial), builds its
variants, and trains each on the final budget (``--final-epochs``, every step, patience 2) under
each training seed:

- ``as_found``: the winner as it is;
- ``no_noise``: the 8 pure-noise tables dropped, every other table as found;
- ``oracle``: the noise tables dropped and every other table at the width its planted rank
  asks (16, 8, or 4 where the rank is 4 or less: the space's narrowest), full hash;
- ``dropped``: the features named by ``--drop`` dropped (what a search read as noise, say
  ``benchmarks/feature_drop``'s cheapest), every other table as found.

``--train`` changes the final's training settings for every variant (a JSON object of
``TrainConfig`` fields, e.g. ``{"lr_schedule": "cosine"}``), and ``--tag`` names that recipe in
every key (``as_found_cosine``), so one JSON holds a winner under two recipes. Each training is
written to ``--json`` as it ends (the key names variant and tag, seed, epochs, machine), so a cut
run goes on with those not done; the JSON keeps flat per-variant means and the paired
differences against the untagged ``as_found`` (the winner as the benchmark trains it)::

    .venv/bin/python -m benchmarks.planted_oracle --study tpe_shared --train-seeds 0,1,2,3,4 \\
        --json benchmarks/results/planted_oracle_intel.json
    .venv/bin/python -m benchmarks.planted_oracle --study tpe_shared --variants as_found \\
        --train '{"lr_schedule": "cosine"}' --tag _cosine --train-seeds 0,1,2,3,4 \\
        --json benchmarks/results/planted_oracle_intel.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import time
import warnings
from pathlib import Path
from typing import Any

from autorec.data.synthetic.config import PRESETS
from benchmarks.final_seeds import open_study, winner
from benchmarks.oneshot_reference import final_budget
from benchmarks.results_file import commit, machine

RESULTS = Path(__file__).resolve().parent / "results"
VARIANTS = ("as_found", "no_noise", "oracle", "dropped")
NARROWEST = 4  # the scale space's narrowest width (benchmarks/spaces/scale.yaml)


def planted(preset: str = "scale") -> tuple[tuple[float, ...], tuple[int, ...]]:
    """(table weights, table ranks) the synthetic ``preset`` plants, one per table ``cat_i``."""
    options = PRESETS[preset]
    return tuple(options["table_weight"]), tuple(options["table_rank"])


def variant(arch: dict[str, Any], name: str, preset: str = "scale",
            drop: frozenset[str] = frozenset()) -> dict[str, Any]:
    """``arch`` (an ``ArchSpec`` dict) as variant ``name`` (see the module docstring).

    Example:
        >>> arch = {"name": "a", "tables": [{"name": f"t_cat_{i}", "features": [f"cat_{i}"],
        ...         "num_embeddings": 10, "dim": 8} for i in range(26)], "layers": []}
        >>> [t["dim"] for t in variant(arch, "oracle")["tables"]][:5]
        [4, 4, 16, 8, 4]
        >>> len(variant(arch, "no_noise")["tables"])
        18
        >>> len(variant(arch, "dropped", drop=frozenset({"cat_0", "cat_3"}))["tables"])
        24
    """
    if name not in VARIANTS:
        raise ValueError(f"variant: expected one of {', '.join(VARIANTS)}, got {name!r}")
    weights, ranks = planted(preset)
    out = json.loads(json.dumps(arch))
    if name == "as_found":
        return out
    tables = []
    for table in out["tables"]:
        index = int(table["features"][0].rpartition("_")[2])
        if (weights[index] == 0) if name != "dropped" else (table["features"][0] in drop):
            continue
        if name == "oracle":
            table["dim"] = max(ranks[index], NARROWEST)
            table["num_embeddings"] = PRESETS[preset]["rows"][index]
        tables.append(table)
    out["tables"] = tables
    out["name"] = f"{arch.get('name', 'arch')}-{name}"
    return out


def train_overrides(text: str, tag: str) -> dict[str, Any]:
    """The ``--train`` JSON object of ``TrainConfig`` fields; exits naming what is wrong (not an
    object, an unknown field, or no ``--tag`` to tell its trainings from the benchmark's).

    Example:
        >>> train_overrides('{"lr_schedule": "cosine"}', "_cosine")
        {'lr_schedule': 'cosine'}
    """
    from autorec.train.records import TrainConfig

    try:
        overrides = json.loads(text or "{}")
    except json.JSONDecodeError as error:
        raise SystemExit(f"--train {text!r}: not JSON ({error})") from None
    if not isinstance(overrides, dict):
        raise SystemExit(f"--train {text!r}: expected a JSON object of TrainConfig fields")
    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise SystemExit(f"--train: unknown TrainConfig field(s) {', '.join(unknown)}")
    if overrides and not tag:
        raise SystemExit("--train: name the recipe with --tag (e.g. --tag _cosine), so its trainings "
                         "are kept apart from the benchmark's own")
    return overrides


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path.home() / ".cache" / "autorec-bench" / "oneshot")
    parser.add_argument("--study", default="tpe_shared", help="the study whose winner is varied")
    parser.add_argument("--kind", choices=("tpe", "oneshot"), default=None,
                        help="how its winner is read (default: tpe for a study named tpe*)")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--train-seeds", default="0,1,2")
    parser.add_argument("--final-epochs", type=int, default=1)
    parser.add_argument("--archive-dir", type=Path, default=RESULTS / "studies")
    parser.add_argument("--train", default="", help="TrainConfig fields changed for every training (JSON)")
    parser.add_argument("--tag", default="", help="names the --train recipe in every key")
    parser.add_argument("--drop", default="", help="the features variant 'dropped' drops (comma-separated)")
    parser.add_argument("--json", type=Path, default=RESULTS / "planted_oracle.json")
    args = parser.parse_args()
    try:
        seeds = [int(s) for s in args.train_seeds.split(",") if s]
    except ValueError:
        raise SystemExit(f"--train-seeds {args.train_seeds!r}: expected comma-separated integers") from None
    names = [v for v in args.variants.split(",") if v]
    unknown = [v for v in names if v not in VARIANTS]
    if unknown or not names or not seeds:
        raise SystemExit(f"--variants {args.variants!r} / --train-seeds {args.train_seeds!r}: expected "
                         f"some of {', '.join(VARIANTS)} and at least one seed")
    overrides = train_overrides(args.train, args.tag)
    drop = frozenset(f for f in args.drop.split(",") if f)
    if ("dropped" in names) != bool(drop) or (drop and not args.tag):
        raise SystemExit(f"--drop {args.drop!r}: expected the features to drop with variant 'dropped', "
                         "and only with it, named by --tag (each set of drops is its own variant)")
    warnings.filterwarnings("ignore")
    import optuna

    from autorec.arch import ArchSpec
    from autorec.study import TrialRunner
    from autorec.train.trainer import Trainer

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    kind = args.kind or ("tpe" if args.study.startswith("tpe") else "oneshot")
    here = machine()
    config, study = open_study(args.out, args.study, args.archive_dir)
    arch, recorded = winner(study, kind, args.final_epochs, here if kind == "tpe" else None)
    result: dict[str, Any] = json.loads(args.json.read_text()) if args.json.exists() else {}
    runs: dict[str, Any] = result.setdefault("runs", {})
    result.update({"machine": here, "study": args.study, "final_epochs": args.final_epochs,
                   "recorded_test_auc": recorded})
    runner = TrialRunner(config)
    for name in names:
        spec = ArchSpec.from_dict(variant(arch, name, drop=drop))
        for seed in seeds:
            key = f"{args.study}/{name}{args.tag}/{seed}/{args.final_epochs}ep/{here}"
            if key in runs:
                continue
            cfg = dataclasses.replace(final_budget(runner.train_config(None), args.final_epochs),
                                      seed=seed, progress=False, **overrides)
            start = time.perf_counter()
            fit = Trainer(spec, runner.dataset, cfg).fit()
            runs[key] = {"test_auc": fit.test["auc"], "val_auc": fit.val["auc"],
                         "seconds": time.perf_counter() - start, "commit": commit()}
            args.json.write_text(json.dumps(result, indent=1) + "\n")
            print(f"{args.study} {name} seed {seed}: test AUC {fit.test['auc']:.4f} "
                  f"({runs[key]['seconds']:.0f} s)", flush=True)

    def aucs(name: str) -> list[float] | None:
        keys = [f"{args.study}/{name}/{s}/{args.final_epochs}ep/{here}" for s in seeds]
        return [runs[k]["test_auc"] for k in keys] if all(k in runs for k in keys) else None

    base = aucs("as_found")  # the winner as the benchmark trains it
    for name in (f"{n}{args.tag}" for n in names):
        own = aucs(name)
        assert own is not None  # each was trained above
        result[f"{args.study}_{name}_test_auc_mean"] = statistics.fmean(own)
        result[f"{args.study}_{name}_train_seeds"] = len(seeds)
        if name != "as_found" and base is not None:
            gaps = [a - b for a, b in zip(own, base, strict=True)]
            result[f"{args.study}_{name}_paired_gain_mean"] = statistics.fmean(gaps)
            result[f"{args.study}_{name}_paired_gain_min"] = min(gaps)
    result["commit"] = commit()
    args.json.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}, indent=1))


if __name__ == "__main__":
    main()
