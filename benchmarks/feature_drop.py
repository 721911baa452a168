"""Per-feature drop importance on a trained one-shot supernet: what each feature is worth to a path.

For candidates of a one-shot study (``oneshot_vs_tpe``'s ``--stage oneshot`` runs) the path's
inherited-weight validation AUC is measured as it is, then with each embedded feature dropped in
turn (its width choice set to 0, everything else kept), on the same ``--samples`` validation
samples: a feature whose drop costs the path nothing (or gains) reads no signal the supernet
learned to use. On a synthetic preset with planted table weights (``scale``) they say which
features are pure noise, so the drops can be read against them (the JSON records each feature's
planted weight beside its drop; None where the study's data plants none). Issue 20
(BENCHMARKS.md, "One-shot search against TPE at scale")::

    .venv/bin/python -m benchmarks.feature_drop --tag _k4f2 --seed 0 --trials 144

Nothing trains: the study's supernet is loaded at its last checkpoint. With ``--read rerank``
each candidate's re-rank training is read instead (the model its stand-alone training kept, each
feature's bags shuffled across the batch: :mod:`autorec.oneshot.importance`, what the strategy's
``drop_read: rerank`` reads)::

    .venv/bin/python -m benchmarks.feature_drop --tag _k21 --seed 0 --trials 131,102 --read rerank \
        --samples 100000 --json benchmarks/results/feature_drop_rerank_intel_k21_seed0.json
"""

from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path
from typing import Any

import optuna

from benchmarks.learning_curves import trained_supernet
from benchmarks.oneshot_studies import add_candidate_arguments, open_record


def drop_importance(search: Any, values: dict[str, Any], samples: int) -> dict[str, dict[str, float]]:
    """Width choice name -> {"auc": the path's val AUC with that feature dropped, "drop": the
    path's AUC minus it} for every width choice of ``values`` that embeds (its width is not 0),
    plus ``"path"`` -> {"auc": the path as it is}; ``search``: a :class:`CandidateSearch`
    (:func:`autorec.oneshot.drops.drop_costs`, what the strategy's ``drop_tolerance`` reads)."""
    from autorec.oneshot.drops import drop_costs

    base, costs = drop_costs(search, values, samples)
    drops = {name: {"auc": base - cost, "drop": cost} for name, cost in costs.items()}
    return {"path": {"auc": base}, **drops}


def rerank_importance(study: optuna.Study, runner: Any, number: int, samples: int,
                      seed: int = 0) -> dict[str, dict[str, float]]:
    """:func:`drop_importance`'s rows read off candidate ``number``'s re-rank training instead:
    each embedded feature's bags shuffled across the batch on ``samples`` validation samples."""
    import dataclasses

    from autorec.oneshot.importance import loaded, permutation_costs

    done = [t for t in study.trials if t.user_attrs.get("stage") == "rerank"
            and t.user_attrs.get("proxy_trial") == number]
    if not done:
        raise SystemExit(f"--trials: candidate {number} has no re-rank training in {study.study_name}")
    config = dataclasses.replace(runner.train_config(None), val_samples=samples)
    trainer = loaded(done[0], runner.dataset, config)
    tables = trainer.spec.tables
    base, costs = permutation_costs(trainer, {f"emb.{t.features[0]}": t.features for t in tables}, seed)
    rows = {name: {"auc": base - cost, "drop": cost} for name, cost in costs.items()}
    return {"path": {"auc": base}, **rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_candidate_arguments(parser)
    parser.add_argument("--samples", type=int, default=65536,
                        help="validation samples each path is scored on")
    parser.add_argument("--read", choices=("supernet", "rerank"), default="supernet",
                        help="the supernet's paths (width 0) or each candidate's re-rank training (shuffled)")
    parser.add_argument("--json", type=Path, default=None,
                        help="default benchmarks/results/feature_drop<TAG>_seed<N>.json")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    from autorec.data.synthetic.config import PRESETS
    from autorec.oneshot.search import CandidateSearch

    study, runner, numbers, out, result = open_record(args, "feature_drop")
    result["samples"], result["read"] = args.samples, args.read
    data = runner.config.data  # the planted weights are the synthetic preset's, when it has them
    preset = data.options.get("preset") if data.name == "synthetic" else None
    weights = PRESETS.get(preset, {}).get("table_weight", ()) if preset else ()
    search = CandidateSearch(trained_supernet(runner), 1024, ["val_auc"]) if args.read == "supernet" else None
    for number in numbers:
        if search is not None:
            params = study.trials[number].params
            values = search.values_of({n: str(params[n]) for n in search.names})
            drops = drop_importance(search, values, args.samples)
        else:
            drops = rerank_importance(study, runner, number, args.samples)
        result[f"trial{number}_path_auc"] = drops.pop("path")["auc"]
        for choice, row in sorted(drops.items(), key=lambda kv: kv[1]["drop"]):
            feature = choice.removeprefix("emb.")
            result[f"trial{number}_{feature}_drop"] = row["drop"]
            index = int(feature.rsplit("_", 1)[-1]) if feature.startswith("cat_") else None
            planted = weights[index] if index is not None and index < len(weights) else None
            result[f"trial{number}_{feature}_planted_weight"] = planted
            print(f"trial {number}: drop {feature:8s} {row['drop']:+.4f}  (planted weight {planted})",
                  flush=True)
        out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
