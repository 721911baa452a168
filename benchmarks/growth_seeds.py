"""Growth-and-pruning savings over seeds, in total training FLOPs and on the clock (issue 23).

For each seed (the data split or synthetic draw, the model init, the data order and the search's
sampler all follow it):

1. the dense baseline: the full-size preset trained for ``--steps`` steps;
2. the schedule search (``--search``: TPE or RL over the schedule space) with ``--budget`` trained
   schedules, all within ``--max-ratio`` of the dense FLOPs (schedules above it are answered
   without training, and early stopping compares a run with the best finished one within the
   budget, not with the dense curve; ``--no-constrain`` searches the whole space as before),
   each scored on validation AUC and its total training FLOPs
   (:func:`autorec.costs.training.training_flops`: dense forward and backward, embedding lookups,
   Adam and row-wise Adagrad updates);
3. the pick: the search's best validation AUC among its finished schedules at or under
   ``--max-ratio`` of the dense total FLOPs (test AUC is never used to choose). Also reported:
   the cheapest schedule whose validation AUC is within ``--tol`` of the dense baseline's;
4. the pick and the dense baseline retrained ``--rounds`` times each, alternating, at new init and
   data-order seeds (the split stays): the training-step seconds of each (min over rounds) give
   the wall-clock saving, and "equal AUC" is checked on test over the 1 + ``--rounds`` paired
   runs: the pick's mean test AUC >= the dense mean - ``--tol`` (one run's test AUC on a 10k-row
   split moves by about as much as the tolerance between seeds; the single-run check is kept as
   ``equal_auc_single_run``).

A seed's FLOPs saving at equal AUC is ``1 - FLOPs ratio`` of its pick when the test check holds,
and 0 when it does not (no saving was found at equal AUC). Each seed's outcome is cached in
``--cache`` (a killed run continues at the next seed); ``--claims`` merges the ``--prefix``
keys into ``benchmarks/results/claims.json``.

    OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.growth_seeds --data synthetic --preset order2 \
        --num-samples 1000000 --arch dcnv2 --steps 782 --budget 12 --search tpe --claims
    OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.growth_seeds --data movielens100k --arch dcnv2 \
        --steps 240 --budget 12 --search rl --claims --prefix growth_ml100k
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import time
from pathlib import Path
from typing import Any

import optuna
import torch

from autorec.data import load_dataset
from autorec.growth.cost import TrainingCostModel
from autorec.growth.schedule import GrowthSchedule
from autorec.growth.search import (
    Evaluation,
    ScheduleEvaluator,
    ScheduleSpace,
    baseline_evaluation,
    prunable_parts,
    rl_search,
    tpe_search,
)
from autorec.growth.train import CurveStopper, GrowthTrainConfig, train_schedule
from autorec.presets import preset
from benchmarks.growth_schedules import pick_within
from benchmarks.results_file import RESULTS, merge_results

CACHE = Path.home() / ".cache" / "autorec-bench" / "growth"


def pick_at_equal_auc(evaluations: list[Evaluation], dense_val_auc: float, tol: float) -> Evaluation | None:
    """The cheapest finished, reduced schedule whose validation AUC is within ``tol`` of the dense
    baseline's (ties: the higher validation AUC); None when no schedule qualifies.

    Example:
        >>> from autorec.growth.cost import TrainingCostModel
from autorec.growth.schedule import GrowthSchedule
        >>> s = GrowthSchedule.full_size(10)
        >>> e = [Evaluation(s, 0.6, 0.790, 0.8, 0.0, None, 1.0, True),
        ...      Evaluation(s, 0.5, 0.780, 0.8, 0.0, None, 1.0, True)]
        >>> pick_at_equal_auc(e, 0.7905, 0.001).flops_ratio
        0.6
    """
    ok = [e for e in evaluations if e.stopped_at is None and e.flops_ratio < 1.0
          and e.val_auc >= dense_val_auc - tol]
    return min(ok, key=lambda e: (e.flops_ratio, -e.val_auc)) if ok else None


def timed_run(spec: Any, schedule: GrowthSchedule, dataset: Any,
              config: GrowthTrainConfig) -> tuple[float, float]:
    """(wall seconds of the training steps, evaluation excluded; test AUC) of one run."""
    result = train_schedule(spec, schedule, dataset, dataclasses.replace(config, eval_every=None))
    return sum(p.seconds for p in result.phases), result.test.get("auc", math.nan)


def run_seed(args: argparse.Namespace, seed: int) -> dict[str, Any]:
    """Search, pick and time at one seed (the module docstring's steps 1-4)."""
    options: dict[str, Any] = {}
    if args.preset:
        options["preset"] = args.preset
    if args.num_samples:
        options["num_samples"] = args.num_samples
    dataset = load_dataset(args.data, seed=seed, **options)
    spec = preset(args.arch, dataset.schema)
    config = GrowthTrainConfig(batch_size=args.batch_size, seed=seed,
                               eval_every=max(1, args.steps // 8))
    space = ScheduleSpace(prunable_parts(spec), args.steps)
    t0 = time.perf_counter()
    baseline = baseline_evaluation(spec, dataset, args.steps, config, lam=args.lam)
    stopper = CurveStopper()
    if not args.constrain:  # the dense curve is the reference; constrained, the best cheap run is
        stopper.offer(baseline.result.curve, baseline.val_auc)
    evaluator = ScheduleEvaluator(spec, dataset, space, config,
                                  TrainingCostModel(spec, args.batch_size, measure=False), lam=args.lam,
                                  budget=args.budget, stopper=stopper, baseline=baseline,
                                  max_ratio=args.max_ratio if args.constrain else None)
    found = (tpe_search(evaluator, seed=seed) if args.search == "tpe"
             else rl_search(evaluator, batch_size=4, seed=seed))
    search_seconds = time.perf_counter() - t0
    pick = pick_within(found.evaluations, args.max_ratio)
    cheapest = pick_at_equal_auc(found.evaluations, baseline.val_auc, args.tol)
    out: dict[str, Any] = {"seed": seed, "dense_val_auc": baseline.val_auc,
                           "dense_test_auc": baseline.test_auc, "trained": len(found.evaluations),
                           "answered_untrained": len(evaluator.over_budget), "constrained": args.constrain,
                           "search_seconds": search_seconds, "pick": pick.to_dict() if pick else None,
                           "cheapest_at_equal_val": cheapest.to_dict() if cheapest else None,
                           "evaluations": [e.to_dict() for e in found.evaluations]}
    if pick is None:
        return {**out, "equal_auc": False, "flops_saving": 0.0, "wall_saving": 0.0}
    dense_runs, pick_runs = [], []
    for r in range(args.rounds):  # paired retrainings at new init/order seeds, alternating
        retrain = dataclasses.replace(config, seed=seed + 1000 * (r + 1))
        dense_runs.append(timed_run(spec, baseline.schedule, dataset, retrain))
        pick_runs.append(timed_run(spec, pick.schedule, dataset, retrain))
    dense_s, pick_s = min(t for t, _ in dense_runs), min(t for t, _ in pick_runs)
    dense_aucs = [baseline.test_auc, *(a for _, a in dense_runs)]
    pick_aucs = [pick.test_auc, *(a for _, a in pick_runs)]
    single = pick.test_auc >= baseline.test_auc - args.tol
    equal = statistics.fmean(pick_aucs) >= statistics.fmean(dense_aucs) - args.tol
    return {**out, "equal_auc": equal, "equal_auc_single_run": single,
            "test_minus_dense": pick.test_auc - baseline.test_auc,
            "test_minus_dense_mean": statistics.fmean(pick_aucs) - statistics.fmean(dense_aucs),
            "dense_test_aucs": dense_aucs, "pick_test_aucs": pick_aucs,
            "flops_ratio": pick.flops_ratio, "flops_saving": (1 - pick.flops_ratio) if equal else 0.0,
            "flops_saving_single_run": (1 - pick.flops_ratio) if single else 0.0,
            "dense_step_seconds": dense_s, "pick_step_seconds": pick_s,
            "wall_saving": (1 - pick_s / dense_s) if equal else 0.0,
            "raw_wall_saving": 1 - pick_s / dense_s}


def summarise(rows: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    """The flat claims (``--prefix``): the worst seed's savings under the pick rule (step 3), and
    under the cheapest-at-equal-validation rule (its test AUC checked the same way)."""
    def cheap_saving(r: dict[str, Any]) -> float:
        c = r.get("cheapest_at_equal_val")
        return 1 - c["flops_ratio"] if c and c["test_auc"] >= r["dense_test_auc"] - args.tol else 0.0

    timed = [r["raw_wall_saving"] for r in rows if "raw_wall_saving" in r]
    p = args.prefix
    return {f"{p}_flops_saving_min": min(r["flops_saving"] for r in rows),
            f"{p}_flops_saving_single_run_min": min(r.get("flops_saving_single_run", 0.0) for r in rows),
            f"{p}_auc_runs": args.rounds + 1,
            f"{p}_wall_saving_min": min(r["wall_saving"] for r in rows),
            f"{p}_wall_saving_picked_min": min(timed) if timed else None,
            f"{p}_equal_val_flops_saving_min": min(cheap_saving(r) for r in rows),
            f"{p}_seeds": len(rows), f"{p}_equal_auc_seeds": sum(bool(r["equal_auc"]) for r in rows),
            f"{p}_auc_tolerance": args.tol,
            f"{p}_workload": f"{args.data}{'/' + args.preset if args.preset else ''} {args.arch} "
                             f"{args.steps} steps x {args.batch_size}, {args.search} budget {args.budget}"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="movielens100k")
    parser.add_argument("--preset", default=None, help="synthetic preset (order2, ...)")
    parser.add_argument("--num-samples", type=int, default=None)
    parser.add_argument("--arch", default="dcnv2")
    parser.add_argument("--steps", type=int, default=240)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--budget", type=int, default=12)
    parser.add_argument("--search", choices=("tpe", "rl"), default="rl")
    parser.add_argument("--lam", type=float, default=0.01)
    parser.add_argument("--max-ratio", type=float, default=0.7, help="the pick's FLOPs ratio at most")
    parser.add_argument("--tol", type=float, default=0.001, help="equal AUC: within this of dense")
    parser.add_argument("--no-constrain", dest="constrain", action="store_false",
                        help="search the whole space (schedules over --max-ratio trained too, stopped "
                             "against the dense curve), as before the FLOPs-budgeted search")
    parser.add_argument("--rounds", type=int, default=3, help="alternating timed retrainings")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--cache", type=Path, default=CACHE)
    parser.add_argument("--claims", action="store_true", help="merge the --prefix keys into claims.json")
    parser.add_argument("--prefix", default="growth", help="key prefix of the claims")
    args = parser.parse_args()
    torch.set_num_threads(1)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    tag = f"{args.data}-{args.preset or ''}-{args.num_samples or ''}-{args.arch}-{args.steps}-{args.search}"
    rows = []
    for seed in args.seeds:
        mode = ("-cp" if args.constrain else "") + f"-m{args.rounds}"  # cp: budgeted, fit_budget
        path = args.cache / f"{tag}-b{args.budget}-r{args.max_ratio:g}-tol{args.tol:g}{mode}-seed{seed}.json"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(run_seed(args, seed), indent=1, default=str))
        rows.append(json.loads(path.read_text()))
        r = rows[-1]
        print(f"seed {seed}: pick {r.get('flops_ratio', '-')} FLOPs, test - dense "
              f"{r.get('test_minus_dense', math.nan):+.4f}, equal {r['equal_auc']}, FLOPs saving "
              f"{r['flops_saving']:.3f}, wall saving {r['wall_saving']:.3f}", flush=True)
    summary = summarise(rows, args)
    print(json.dumps(summary, indent=1))
    if args.claims:
        merge_results(RESULTS / "claims.json", summary, prefix=args.prefix)


if __name__ == "__main__":
    main()
