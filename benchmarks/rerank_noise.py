"""How far apart two re-ranked candidates are, against a short training's own seed spread.

Trains the architectures of the given trials of a one-shot study (``oneshot_vs_tpe``'s
``--stage oneshot`` runs) with that study's re-rank recipe (``--steps`` steps of the trial budget's
batch, validated on the first ``--val-samples`` validation samples, no test pass) at each training
seed of ``--seeds``, and writes each one's validation AUC, so a gap between candidates can be read
against the spread one candidate shows across seeds. Used for issue 20's ``rerank_tie``
(BENCHMARKS.md, "One-shot search against TPE at scale")::

    .venv/bin/python -m benchmarks.rerank_noise --tag _o3k --trials 154,174 --seeds 0,1,2
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import time
import warnings
from pathlib import Path

import optuna

from autorec.arch import ArchSpec
from benchmarks.oneshot_studies import add_candidate_arguments, open_candidates
from benchmarks.results_file import commit, machine

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_candidate_arguments(parser)
    parser.add_argument("--seeds", default="0,1,2", help="training seeds")
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--val-samples", type=int, default=100_000)
    parser.add_argument("--json", type=Path, default=None,
                        help="default benchmarks/results/rerank_noise<TAG>.json")
    parser.add_argument("--key", default="",
                        help="with --append: a prefix of this run's keys (e.g. seed2_), so runs of several "
                             "studies or horizons share one file")
    parser.add_argument("--append", action="store_true",
                        help="merge this run's keys into the --json file instead of replacing it")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    from autorec.train.trainer import Trainer

    name, study, runner, numbers = open_candidates(args.out, args.tag, args.seed, args.trials, args.study)
    out = args.json or ROOT / "benchmarks" / "results" / (
        f"rerank_noise_{args.study}.json" if args.study else f"rerank_noise{args.tag}.json")
    result: dict[str, object] = {}
    if args.append and out.exists():
        try:
            result = json.loads(out.read_text())
        except json.JSONDecodeError as exc:
            raise SystemExit(f"--append: {out} is not JSON ({exc}); nothing was trained") from None
    key = args.key
    result |= {"machine": machine(), "commit": commit(), f"{key}study": name, f"{key}steps": args.steps,
               f"{key}val_samples": args.val_samples}
    for number in numbers:
        spec = ArchSpec.from_dict(study.trials[number].user_attrs["arch"])
        aucs = []
        for seed in (int(s) for s in args.seeds.split(",")):
            cfg = dataclasses.replace(runner.train_config(None), max_steps_per_epoch=args.steps,
                                      evaluate_test=False, val_samples=args.val_samples, seed=seed)
            start = time.perf_counter()
            auc = Trainer(spec, runner.dataset, cfg).fit().val["auc"]
            print(f"trial {number} seed {seed}: val AUC {auc:.4f} ({time.perf_counter() - start:.0f} s)")
            result[f"{key}trial{number}_seed{seed}_val_auc"] = auc
            aucs.append(auc)
        result[f"{key}trial{number}_mean_val_auc"] = statistics.fmean(aucs)
        result[f"{key}trial{number}_spread"] = max(aucs) - min(aucs)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
