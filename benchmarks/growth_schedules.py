"""Growth-and-pruning schedules: RL against TPE on the same budget, against the dense baseline.

For one dataset and one preset architecture:

1. the dense baseline: the full-size model trained for ``--steps`` steps (one phase);
2. the RL schedule search (REINFORCE over the schedule space) with ``--budget`` trained
   schedules, then Optuna TPE over the same space with as many trained schedules as RL used;
3. for each search, its best schedule by reward (val AUC - lambda x FLOPs ratio) and its best by
   validation AUC among the schedules with at most ``--max-ratio`` of the dense training FLOPs,
   with their test AUC against the baseline's (test AUC is never used to choose);
4. measured step time against FLOPs: each phase architecture of the chosen schedules timed,
   paired and alternating with the full-size model in this process (min of k).

Writes a JSON file and prints a Markdown summary (the numbers in BENCHMARKS.md).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/growth_schedules.py --data synthetic \
        --preset order3 --num-samples 1000000 --arch dcnv2 --steps 782 --budget 12
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import time
from pathlib import Path
from typing import Any

import optuna
import torch

from autorec.data import load_dataset
from autorec.growth.cost import TrainingCostModel, measure_train_step
from autorec.growth.schedule import GrowthSchedule
from autorec.growth.search import (
    Evaluation,
    ScheduleEvaluator,
    ScheduleSpace,
    SearchResult,
    baseline_evaluation,
    prunable_parts,
    rl_search,
    tpe_search,
)
from autorec.growth.train import CurveStopper, GrowthTrainConfig, train_schedule
from autorec.presets import preset


def pick_within(evaluations: list[Evaluation], max_ratio: float) -> Evaluation | None:
    """Best validation AUC among finished runs at or under ``max_ratio`` of the dense FLOPs."""
    cheap = [e for e in evaluations if e.stopped_at is None and e.flops_ratio <= max_ratio]
    return max(cheap, key=lambda e: e.val_auc) if cheap else None


def paired_step_times(spec: Any, schedule: Any, batch: Any, rounds: int = 5) -> list[dict[str, float]]:
    """For each reduced phase architecture: min-of-k train-step seconds, alternating with the full
    model's in the same process, and its FLOPs ratio."""
    cost = TrainingCostModel(spec, batch_size=int(batch.labels.numel()), measure=False)
    full_flops = cost.train_flops(spec)
    out = []
    for phase, phase_spec in zip(schedule.phases, schedule.phase_specs(spec), strict=True):
        if phase.full:
            continue
        full_t, small_t = math.inf, math.inf
        for _ in range(rounds):
            full_t = min(full_t, measure_train_step(spec, batch, repeats=3, warmup=1))
            small_t = min(small_t, measure_train_step(phase_spec, batch, repeats=3, warmup=1))
        out.append({"widths": dict(phase.widths), "flops_ratio": cost.train_flops(phase_spec) / full_flops,
                    "time_ratio": small_t / full_t, "full_seconds": full_t, "phase_seconds": small_t})
    return out


def recheck(spec: Any, dataset: Any, config: GrowthTrainConfig, steps: int, seeds: list[int],
            chosen: dict[str, Evaluation | None]) -> dict[str, Any]:
    """Test AUC of each chosen schedule minus the dense baseline's, both retrained per seed."""
    dense = {seed: train_schedule(spec, GrowthSchedule.full_size(steps), dataset,
                                  dataclasses.replace(config, seed=seed, eval_every=None)).test["auc"]
             for seed in seeds}
    out: dict[str, Any] = {"dense": {"test_auc": dense}}
    for name, e in chosen.items():
        if e is None:
            continue
        diffs = [train_schedule(spec, e.schedule, dataset, dataclasses.replace(
                     config, seed=seed, eval_every=None)).test["auc"] - dense[seed] for seed in seeds]
        out[name] = {"schedule": e.schedule.to_dict(), "differences": [round(d, 4) for d in diffs],
                     "mean_difference": sum(diffs) / len(diffs)}
    return out


def row(name: str, e: Evaluation | None, base: Evaluation) -> str:
    if e is None:
        return f"| {name} | - | - | - | - | - |"
    return (f"| {name} | {e.flops_ratio:.3f} | {e.val_auc:.4f} | {e.test_auc:.4f} | "
            f"{e.test_auc - base.test_auc:+.4f} | {_describe(e)} |")


def _describe(e: Evaluation) -> str:
    return "; ".join(f"{p.steps} steps " + (", ".join(f"{k} {v:g}" for k, v in p.widths) or "full")
                     for p in e.schedule.phases)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="synthetic")
    parser.add_argument("--preset", default=None, help="synthetic preset (order3, order2, tiny, ...)")
    parser.add_argument("--num-samples", type=int, default=None)
    parser.add_argument("--arch", default="dcnv2")
    parser.add_argument("--steps", type=int, default=782)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--budget", type=int, default=12, help="trained schedules per search")
    parser.add_argument("--lam", type=float, default=0.01, help="cost penalty weight")
    parser.add_argument("--eval-every", type=int, default=None)
    parser.add_argument("--max-ratio", type=float, default=0.7)
    parser.add_argument("--rl-batch", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--recheck-seeds", type=int, nargs="*", default=[],
                        help="retrain the dense baseline and each search's chosen schedule at these "
                             "seeds too (model init and data order; the data split stays)")
    parser.add_argument("--out", default="growth_schedules.json")
    parser.add_argument("--recheck-from", default=None,
                        help="skip the search: recheck the schedules chosen in this earlier output "
                             "JSON at --recheck-seeds (same data and arch arguments)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # the per-schedule lines say enough
    t0 = time.perf_counter()
    options: dict[str, Any] = {}
    if args.preset:
        options["preset"] = args.preset
    if args.num_samples:
        options["num_samples"] = args.num_samples
    dataset = load_dataset(args.data, seed=args.seed, **options)
    spec = preset(args.arch, dataset.schema)
    eval_every = args.eval_every or max(1, args.steps // 8)
    config = GrowthTrainConfig(batch_size=args.batch_size, seed=args.seed, eval_every=eval_every)
    space = ScheduleSpace(prunable_parts(spec), args.steps)
    print(f"data {dataset.name} ({dataset.num_rows('train')} train rows), arch {args.arch}, "
          f"parts {space.parts}, {args.steps} steps x {args.batch_size}", flush=True)
    if args.recheck_from:
        earlier = json.loads(Path(args.recheck_from).read_text())
        chosen = {name: Evaluation(GrowthSchedule.from_dict(r["best_within"]["schedule"]), math.nan, math.nan,
                                   math.nan, math.nan, None, 0.0, False)
                  for name, r in earlier["searches"].items() if r.get("best_within")}
        out = recheck(spec, dataset, config, args.steps, args.recheck_seeds, chosen)
        for name, r in out.items():
            print(name, json.dumps(r))
        Path(args.out).write_text(json.dumps({"args": vars(args), "recheck": out}, indent=1))
        return
    base_stopper = CurveStopper()
    baseline = baseline_evaluation(spec, dataset, args.steps, config, lam=args.lam, stopper=base_stopper)
    print(f"dense baseline: val {baseline.val_auc:.4f} test {baseline.test_auc:.4f} "
          f"({baseline.seconds:.0f} s)", flush=True)
    cost = TrainingCostModel(spec, args.batch_size, measure=False)

    def evaluator(budget: int) -> ScheduleEvaluator:
        stopper = CurveStopper()
        stopper.offer(baseline.result.curve, baseline.val_auc)
        return ScheduleEvaluator(spec, dataset, space, config, cost, lam=args.lam, budget=budget,
                                 stopper=stopper, baseline=baseline, on_trained=log)

    def log(e: Evaluation) -> None:
        print(f"  FLOPs {e.flops_ratio:.3f} val {e.val_auc:.4f} test {e.test_auc:.4f} "
              f"stopped {e.stopped_at} ({e.seconds:.0f} s): {_describe(e)}", flush=True)

    results: dict[str, SearchResult] = {}
    results["rl"] = rl_search(evaluator(args.budget), batch_size=args.rl_batch, seed=args.seed)
    print(f"rl: {len(results['rl'].evaluations)} trained in {results['rl'].seconds:.0f} s", flush=True)
    results["tpe"] = tpe_search(evaluator(len(results["rl"].evaluations)), seed=args.seed)
    print(f"tpe: {len(results['tpe'].evaluations)} trained in {results['tpe'].seconds:.0f} s", flush=True)

    batch = next(iter(dataset.batches("train", args.batch_size, shuffle=True, seed=args.seed)))
    summary: dict[str, Any] = {"args": vars(args), "parts": space.parts,
                               "baseline": baseline.to_dict(), "searches": {}}
    lines = ["| schedule | FLOPs ratio | val AUC | test AUC | test - dense | phases |",
             "|---|---|---|---|---|---|", row("dense baseline", baseline, baseline)]
    for name, result in results.items():
        within = pick_within(result.evaluations, args.max_ratio)
        timing = paired_step_times(spec, within.schedule, batch) if within else []
        summary["searches"][name] = {
            **result.to_dict(), "best_within": within.to_dict() if within else None,
            "step_times": timing,
            "trained_steps": sum(e.stopped_at or e.schedule.total_steps for e in result.evaluations),
            "stopped_early": sum(e.stopped_at is not None for e in result.evaluations)}
        lines.append(row(f"{name}: best reward", result.best, baseline))
        lines.append(row(f"{name}: best val AUC at <= {args.max_ratio:g} FLOPs", within, baseline))
        for t in timing:
            print(f"{name} step time {t['widths']}: FLOPs ratio {t['flops_ratio']:.3f}, "
                  f"time ratio {t['time_ratio']:.3f}")
    if args.recheck_seeds:
        summary["recheck"] = recheck(spec, dataset, config, args.steps, args.recheck_seeds,
                                     {name: pick_within(r.evaluations, args.max_ratio)
                                      for name, r in results.items()})
        for name, r in summary["recheck"].items():
            print(f"recheck {name}: test AUC - dense per seed {r['differences']}, "
                  f"mean {r['mean_difference']:+.4f}")
    for name in results:
        s = summary["searches"][name]
        print(f"{name}: {len(s['evaluations'])} trained ({s['stopped_early']} stopped early, "
              f"{s['trained_steps']} steps), {s['requests']} schedules asked, {s['seconds']:.0f} s")
    summary["seconds"] = time.perf_counter() - t0
    Path(args.out).write_text(json.dumps(summary, indent=1, default=str))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
