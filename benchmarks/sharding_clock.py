"""Issue 23: the sharding cost model checked against the clock, over many plans of one workload.

    OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.sharding_clock [--nproc 4] [--steps 15]
    # -> the sharding keys of benchmarks/results/claims.json

The workload is built so that plans differ in step time: an embedding-only model (torchrec's
EmbeddingBagCollection under DistributedModelParallel, fused row-wise Adagrad, 4 gloo processes)
over 24 tables whose per-sample lookup work spans three orders of magnitude: 4 heavy tables
(pooling 40, dim 128), 8 medium (pooling 6, dim 32) and 12 light (pooling 1, dim 8). A plan that
puts the heavy tables together is measurably slower than one that spreads them.

Plans (at least 20): torchrec's EmbeddingShardingPlanner, the size-greedy, lookup-greedy and
random baselines, each greedy one followed by the cost-model polish (``local_search``, the same
50 steps the RL planner takes), the RL planner as shipped and unpolished, 10 random table-wise
plans (seeded), and two deliberately unbalanced ones (the heavy tables on one rank; every table
on two ranks). All are timed in one torchrun launch, alternating between plans step by step
(``benchmarks.sharding_plans.worker``), so drift of the machine hits every plan alike.

Reported: Spearman's rank correlation with the measured median step time of the cost model's
prediction (its max device cost, what the planners minimise), of the phase-max cost, and of the
step predicted on this machine's topology (``cost_models/cpu/topology.json``: 4 ranks sharing 2
cores, :func:`autorec.sharding.topology.step_cost`); the Spearman between two launches'
measurements (the measurement's own ceiling); the mean relative error of the prediction, raw and
calibrated
(``a + b * prediction`` fitted leaving each plan out: the fixed per-step overhead of the gloo
group, which no shard cost carries),
and the measured step of the default planner's plan (greedy + polish, ``DEFAULT_PLAN``) against
the best baseline's, and the RL plan's against greedy + polish's. Nothing else may run on the
machine while it measures.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import spearmanr

from autorec.sharding.baselines import BASELINES, RandomPlanner
from autorec.sharding.cost_model import ShardCostModel
from autorec.sharding.objectives import local_search, max_device_cost, phase_max_cost
from autorec.sharding.planner import RLPlanner
from autorec.sharding.plans import Assignment, PlanningError
from autorec.sharding.policy import load_policy
from autorec.sharding.tables import TableInfo, TableSet, access_indices, reuse_histogram
from autorec.sharding.topology import TOPOLOGY_FILE, Topology, step_cost
from benchmarks.results_file import merge_results

ROOT = Path(__file__).resolve().parents[1]
# (count, rows, dim, pooling, access exponent) of the three table classes
# the plan of ``autorec shard``'s default planner (autorec.sharding.polished.GreedyPolish)
DEFAULT_PLAN = "lookup-greedy + polish"
CLASSES = (("heavy", 4, 200_000, 128, 40.0, 0.6), ("medium", 8, 50_000, 32, 6.0, 0.9),
           ("light", 12, 10_000, 8, 1.0, 1.1))


def workload(seed: int = 0) -> TableSet:
    """The 24 tables of the module docstring, their reuse histograms drawn like the profiler's."""
    rng = np.random.default_rng(seed)
    tables = []
    for name, count, rows, dim, pooling, exponent in CLASSES:
        for i in range(count):
            reuse = reuse_histogram(access_indices(rows, exponent, 8192, rng))
            tables.append(TableInfo(f"{name}{i}", rows=rows, dim=dim, pooling=pooling,
                                    bytes_per_element=4, reuse=reuse, access_exponent=exponent))
    return TableSet(tuple(tables))


def plans(tables: TableSet, nproc: int, model: ShardCostModel, policy: Any,
          n_random: int = 10, polish_steps: int = 50) -> dict[str, Assignment]:
    """Every plan of the module docstring, by name."""
    memory = float(tables.total_bytes)  # memory never binds: the plans differ in time only
    out: dict[str, Assignment] = {}
    for name, make in BASELINES.items():
        try:
            out[name] = make().plan(tables, nproc, memory)
        except PlanningError as exc:
            print(f"{name}: no plan ({exc})", file=sys.stderr)
    for name in ("size-greedy", "lookup-greedy"):
        if name in out:
            out[f"{name} + polish"] = local_search(model, tables, out[name], memory, max_steps=polish_steps)
    out["rl"] = RLPlanner(model, policy, polish_steps=polish_steps).plan(tables, nproc, memory)
    out["rl, no polish"] = RLPlanner(model, policy, polish=False).plan(tables, nproc, memory)
    for seed in range(n_random):
        out[f"random {seed}"] = RandomPlanner().plan(tables, nproc, memory, seed=100 + seed)
    heavy = [i for i, t in enumerate(tables.tables) if t.name.startswith("heavy")]
    # graded imbalance: k heavy tables on rank 0, the rest spread round-robin over the others
    for k in range(1, len(heavy) + 1):
        out[f"{k} heavy on rank 0"] = Assignment.of(
            [(0,) if i in heavy[:k] else (1 + i % (nproc - 1),) for i in range(len(tables))], tables, nproc)
    out["two ranks only"] = Assignment.of([(i % 2,) for i in range(len(tables))], tables, nproc)
    medium = [i for i, t in enumerate(tables.tables) if t.name.startswith("medium")]
    out["heavy in pairs on ranks 0-1"] = Assignment.of(
        [(heavy.index(i) // 2,) if i in heavy else (2 + i % (nproc - 2),) for i in range(len(tables))],
        tables, nproc)
    out["medium all on rank 0"] = Assignment.of(
        [(0,) if i in medium else ((1 + heavy.index(i) % (nproc - 1)),) if i in heavy else (i % nproc,)
         for i in range(len(tables))], tables, nproc)
    return {n: a for n, a in out.items() if all(p.even for p in a.placements)}


def measure(tables: TableSet, chosen: dict[str, Assignment], nproc: int, steps: int,
            batch_size: int) -> dict[str, list[float]]:
    """Step times (seconds) of every plan, one torchrun launch of ``nproc`` gloo processes."""
    with tempfile.TemporaryDirectory() as tmp:
        request = Path(tmp) / "request.json"
        request.write_text(json.dumps({
            "tables": tables.to_dict(), "batch_size": batch_size, "warmup": 3, "steps": steps,
            "result": str(Path(tmp) / "result.json"),
            "plans": {n: [list(p.ranks) for p in a.placements] for n, a in chosen.items()}}))
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
               str(nproc), str(ROOT / "benchmarks" / "sharding_plans.py"), "--worker", str(request)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600,
                              env={**os.environ, "OMP_NUM_THREADS": "1"})
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr[-3000:])
        return json.loads((Path(tmp) / "result.json").read_text())


def loo_relative_error(predicted: np.ndarray, measured: np.ndarray) -> float:
    """Mean relative error of ``a + b * predicted`` fitted on every other plan (leave one out):
    the error of the cost model once calibrated to this machine's fixed per-step overhead."""
    errors = []
    for i in range(len(measured)):
        keep = np.arange(len(measured)) != i
        b, a = np.polyfit(predicted[keep], measured[keep], 1)
        errors.append(abs(a + b * predicted[i] - measured[i]) / measured[i])
    return float(np.mean(errors))


def figures(tables: TableSet, chosen: dict[str, Assignment], runs: list[dict[str, list[float]]],
            model: ShardCostModel, topology: Topology) -> dict[str, Any]:
    """The keys of the module docstring from ``runs`` (each: plan -> step seconds of one launch);
    a plan's measured step is its median over every run's steps."""
    names = sorted(chosen)
    times = {n: [t for run in runs for t in run[n]] for n in names}
    measured = np.array([1000 * statistics.median(times[n]) for n in names])
    repeat = (float(spearmanr([statistics.median(runs[0][n]) for n in names],
                              [statistics.median(runs[1][n]) for n in names]).statistic)
              if len(runs) > 1 else float("nan"))
    predicted = np.array([max_device_cost(model, tables, chosen[n]) for n in names])
    phase = np.array([phase_max_cost(model, tables, chosen[n]) for n in names])
    topo = np.array([step_cost(model, tables, chosen[n], topology) for n in names])
    step = dict(zip(names, measured.tolist(), strict=True))
    baselines = [n for n in ("torchrec", "size-greedy", "lookup-greedy", "random") if n in step]
    best_baseline = min(baselines, key=step.__getitem__)
    polished = min((n for n in step if n.endswith("+ polish")), key=step.__getitem__)
    row: dict[str, Any] = {
        "sharding_plans": len(names),
        "sharding_runs": len(runs),
        "sharding_repeat_spearman": repeat,
        "sharding_spearman": float(spearmanr(predicted, measured).statistic),
        "sharding_spearman_phase": float(spearmanr(phase, measured).statistic),
        "sharding_spearman_topology": float(spearmanr(topo, measured).statistic),
        "sharding_relative_error": float(np.mean(np.abs(predicted - measured) / measured)),
        "sharding_relative_error_calibrated": loo_relative_error(predicted, measured),
        "sharding_relative_error_topology_calibrated": loo_relative_error(topo, measured),
        "sharding_best_baseline": best_baseline,
        "sharding_default_planner": DEFAULT_PLAN,
        "sharding_best_vs_baseline_step": step[DEFAULT_PLAN] / step[best_baseline],
        "rl_vs_greedy_polish_step": step["rl"] / step[polished],
        "sharding_greedy_polish": polished,
        "sharding_step_ms": {n: round(v, 3) for n, v in step.items()},
        "sharding_predicted_ms": {n: round(float(v), 4) for n, v in zip(names, predicted, strict=True)},
        "sharding_topology_ms": {n: round(float(v), 4) for n, v in zip(names, topo, strict=True)},
    }
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nproc", type=int, default=4)
    parser.add_argument("--steps", type=int, default=30, help="timed steps per plan (after 3 warm-up)")
    parser.add_argument("--batch-size", type=int, default=1024,
                        help="per-rank batch (the cost model's profiles are at 1024)")
    parser.add_argument("--random-plans", type=int, default=10)
    parser.add_argument("--runs", type=int, default=2,
                        help="torchrun launches; the Spearman between two is the measurement's own ceiling")
    parser.add_argument("--cost-model", default=str(ROOT / "cost_models" / "cpu"))
    parser.add_argument("--times", default=str(Path.home() / ".cache" / "autorec-bench" / "sharding.json"),
                        help="where the measured step times are kept")
    parser.add_argument("--reuse", action="store_true",
                        help="recompute the figures from --times instead of measuring again")
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "claims.json")
    parser.add_argument("--cores-per-node", type=float, default=None,
                        help="override the topology file's cores (a larger machine than the 2-core one)")
    args = parser.parse_args()
    model = ShardCostModel.load(args.cost_model)
    tables = workload()
    chosen = plans(tables, args.nproc, model, load_policy(args.cost_model), args.random_plans)
    print(f"{len(chosen)} plans on {args.nproc} processes", file=sys.stderr)
    topology = Topology.load(Path(args.cost_model) / TOPOLOGY_FILE)
    if args.cores_per_node is not None:
        topology = dataclasses.replace(topology, cores_per_node=args.cores_per_node,
                                       ranks_per_node=args.nproc)
    cache = Path(args.times)
    runs = json.loads(cache.read_text()) if args.reuse and cache.exists() else []
    if not runs:
        runs = [measure(tables, chosen, args.nproc, args.steps, args.batch_size) for _ in range(args.runs)]
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps(runs))
    row = figures(tables, chosen, runs, model, topology)
    for name in sorted(row["sharding_step_ms"], key=row["sharding_step_ms"].__getitem__):
        print(f"{name:>22}: measured {row['sharding_step_ms'][name]:8.2f} ms, predicted "
              f"{row['sharding_predicted_ms'][name]:8.3f} ms")
    merge_results(args.json, {**row, "sharding_nproc": args.nproc}, prefix="sharding")
    print(json.dumps({k: v for k, v in row.items() if not isinstance(v, dict)}, indent=1))


if __name__ == "__main__":
    main()
