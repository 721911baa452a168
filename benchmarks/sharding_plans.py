"""Sharding plan quality: the RL planner against torchrec's planner and the greedy baselines.

Four modes:

    # train the policy on the fitted cost model and commit it (cost_models/cpu/planner.*);
    # --objective phase: reward minus the sum over phases of the max device cost (DreamShard's)
    python benchmarks/sharding_plans.py --train --iterations 300 --objective phase --lr 1e-2 \
        --out cost_models/cpu

    # plan quality on 20 held-out generated table sets (100-500 tables, 5-16 devices but never
    # the training device counts 4 and 8, seeds never used in training); the RL planner as
    # shipped (polished by local search), unpolished, and polished ablations (--converge: also
    # polished to local optima)
    python benchmarks/sharding_plans.py --sets 20 --converge

    # headroom: how far the untrained and trained policies' plans are from local optima
    python benchmarks/sharding_plans.py --headroom --sets 10 --slack 1.3 1.05

    # measured step time of the RL plan and the best baseline's under DistributedModelParallel,
    # 2 and 4 gloo processes (torchrun), on table sets scaled to fit this machine
    python benchmarks/sharding_plans.py --measure --nproc 2 4 --sets 3

Quality is the cost model's maximum per-device cost (ms per step): the slowest device sets the
step time of a synchronous step; and, next to it, the sum over phases (forward, backward, comm)
of the maximum device cost, as a synchronous step waits at every phase. Planning time is process
CPU time (the machine is shared).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autorec.sharding.base import Planner, timed_plan  # noqa: E402
from autorec.sharding.baselines import (  # noqa: E402
    BASELINES,
    TorchrecPlanner,
    _greedy,
    _least_loaded,
)
from autorec.sharding.cost_model import ShardCostModel  # noqa: E402
from autorec.sharding.objectives import (  # noqa: E402
    cost_lower_bound,
    even_share_cost,
    local_search,
    max_device_cost,
    phase_max_cost,
)
from autorec.sharding.planner import RLPlanner  # noqa: E402
from autorec.sharding.plans import Assignment, PlanningError  # noqa: E402
from autorec.sharding.policy import ShardingPolicy, load_policy, save_policy  # noqa: E402
from autorec.sharding.tables import TableSet  # noqa: E402
from autorec.sharding.training import TrainConfig, memory_for, train_policy  # noqa: E402

TRAIN_DEVICES = (4, 8)
HELD_OUT_DEVICES = tuple(d for d in range(5, 17) if d not in TRAIN_DEVICES)
HELD_OUT_SEED = 2_000_000
SLACK = 1.3


class CostGreedy(Planner):
    """Ablation, not one of the issue's baselines: size/lookup-greedy's rule with the cost
    model's own per-table cost as the score (what knowing the cost model gives without RL)."""

    name = "cost-greedy"

    def __init__(self, model: ShardCostModel) -> None:
        self.model = model

    def plan(self, tables: TableSet, num_devices: int, memory_per_device: float, *,
             seed: int = 0) -> Assignment:
        with torch.no_grad():
            costs = self.model.table_costs(tables.features()).sum(-1).tolist()
        index = {t.name: i for i, t in enumerate(tables.tables)}

        def score(t: object) -> float:
            name = t.name  # type: ignore[attr-defined]
            base = name.split("@c")[0]
            return costs[index[base]] * (t.dim / tables.tables[index[base]].dim)  # type: ignore[attr-defined]

        return _greedy(tables, num_devices, memory_per_device, score, _least_loaded)


def held_out_problems(n_sets: int) -> list[tuple[int, TableSet, int, float]]:
    """(seed, tables, devices, memory) of the held-out sets: 100-500 tables, unseen seeds and
    device counts, memory SLACK x the even share of the bytes."""
    out = []
    for i in range(n_sets):
        rng = np.random.default_rng(HELD_OUT_SEED + i)
        n = int(rng.integers(100, 501))
        d = int(rng.choice(HELD_OUT_DEVICES))
        tables = TableSet.generate(n, seed=HELD_OUT_SEED + i)
        out.append((HELD_OUT_SEED + i, tables, d, memory_for(tables, d, SLACK)))
    return out


def validation_problems() -> list[tuple[TableSet, int, float]]:
    """Problems the training keeps its best policy by: seeds of their own, the training device
    counts (the held-out counts stay unseen)."""
    out = []
    for i, (n, d) in enumerate(((150, 4), (300, 8), (80, 4), (400, 8))):
        tables = TableSet.generate(n, seed=4_000_000 + i)
        out.append((tables, d, memory_for(tables, d, SLACK)))
    return out


# polished ablations: row name -> the plain row whose plan is polished
POLISHED = {"rl untrained + polish (ablation)": "rl untrained, priors only (ablation)",
            "cost-greedy + polish (ablation)": "cost-greedy (ablation)",
            "lookup-greedy + polish (ablation)": "lookup-greedy"}


def quality(n_sets: int, samples: int, model: ShardCostModel, policy: ShardingPolicy,
            log: bool = True, polish_steps: int = 50, converge: bool = False) -> dict:
    """Every planner on the held-out sets. "rl" is the planner as shipped (its plan polished by
    ``polish_steps`` of :func:`local_search` on the policy's objective); "rl, no polish" is the
    same without the polish. The POLISHED rows polish another row's plan the same way (their
    seconds: that row's planning plus the polish). Each polished row records its steps taken;
    with ``converge``, each is also polished to a local optimum (up to 2000 steps)."""
    rl = RLPlanner(model, policy, samples=samples, polish_steps=polish_steps)
    planners: dict[str, Planner] = {
        "rl": rl, "rl, no polish": RLPlanner(model, policy, samples=samples, polish=False)}
    planners.update({name: make() for name, make in BASELINES.items()})
    planners["cost-greedy (ablation)"] = CostGreedy(model)
    torch.manual_seed(0)
    planners["rl untrained, priors only (ablation)"] = RLPlanner(
        model, ShardingPolicy(policy.hidden), samples=samples, objective=policy.objective,
        polish=False)
    polished = dict(POLISHED)
    if converge:
        polished.update({f"{base} + polish to convergence": base
                         for base in ("rl, no polish", *POLISHED.values())})
    rows: dict[str, list[dict]] = {name: [] for name in [*planners, *polished]}
    bounds: dict[int, float] = {}
    for seed, tables, d, memory in held_out_problems(n_sets):
        # the even share (one device with 1/D of every table); a lower bound for an additive model
        bounds[seed] = (cost_lower_bound(model, tables, d) if model.kind == "additive"
                        else even_share_cost(model, tables, d))
        plans: dict[str, Assignment] = {}

        def score(name: str, a: Assignment, seconds: float, tables: TableSet = tables,
                  memory: float = memory, seed: int = seed, d: int = d, **extra: float) -> None:
            a.check(tables, memory)
            rows[name].append({"seed": seed, "tables": len(tables), "devices": d,
                               "cost": max_device_cost(model, tables, a),
                               "phase": phase_max_cost(model, tables, a), "seconds": seconds,
                               **extra})

        for name, planner in planners.items():
            try:
                plans[name], seconds = timed_plan(planner, tables, d, memory)
            except PlanningError as exc:
                rows[name].append({"seed": seed, "error": str(exc)})
                continue
            score(name, plans[name], seconds)
        for name, base in polished.items():
            if base not in plans:
                rows[name].append({"seed": seed, "error": f"{base} failed"})
                continue
            trace: list[float] = []
            start = time.process_time()
            a = local_search(model, tables, plans[base], memory, objective=policy.objective,
                             max_steps=2000 if name.endswith("convergence") else polish_steps,
                             trace=trace)
            seconds = time.process_time() - start
            score(name, a, rows[base][-1]["seconds"] + seconds, polish_seconds=seconds,
                  steps=len(trace))
        if "rl" in plans and "rl, no polish" in plans:
            # the shipped planner's polish is this same local search: its steps, and a check
            trace = []
            again = local_search(model, tables, plans["rl, no polish"], memory,
                                 objective=policy.objective, max_steps=polish_steps, trace=trace)
            rows["rl"][-1]["steps"] = len(trace)
            rows["rl"][-1]["same_as_polished_no_polish_plan"] = again == plans["rl"]
        if log:
            rl_cost = rows["rl"][-1].get("cost")
            print(f"set {seed}: {len(tables)} tables, {d} devices: " + ", ".join(
                f"{n} {r[-1]['cost']:.2f}/{r[-1]['phase']:.2f}" if "cost" in r[-1] else f"{n} failed"
                for n, r in rows.items()) + (f" (rl {rl_cost:.2f})" if rl_cost else ""),
                file=sys.stderr)
    big = TableSet.generate(500, seed=HELD_OUT_SEED + 999)
    times = [timed_plan(planners["rl"], big, 16, memory_for(big, 16, SLACK))[1] for _ in range(3)]
    times_raw = [timed_plan(planners["rl, no polish"], big, 16, memory_for(big, 16, SLACK))[1]
                 for _ in range(3)]
    return {"rows": rows, "sets": n_sets, "samples": samples, "lower_bounds": bounds,
            "reference": "lower bound" if model.kind == "additive" else "even share",
            "objective": policy.objective, "polish_steps": polish_steps,
            "rl_500_tables_16_devices_seconds": times,
            "rl_no_polish_500_tables_16_devices_seconds": times_raw}


def headroom(n_sets: int, model: ShardCostModel, slacks: list[float], policy: ShardingPolicy,
             samples: int = 63, log: bool = True) -> list[dict]:
    """How far the planner's plans are from better ones, by the cost model, on generated sets
    like the held-out ones (seeds 5,000,000 + i: neither training, validation nor held-out).
    For the untrained policy (the greedy priors) and ``policy``: the greedy plan, the best of 1
    greedy + 7 sampled plans (the planner's episodes, unpolished) and of 1 + ``samples``; and
    :func:`local_search` run to a local optimum from the untrained greedy plan, once for each
    objective. Each plan is scored by both objectives ("max": max device cost; "phase": sum over
    phases of the max device cost) over the even share."""
    torch.manual_seed(0)
    priors = ShardingPolicy(policy.hidden)
    priors.objective = policy.objective
    rows = []
    for i in range(n_sets):
        rng = np.random.default_rng(5_000_000 + i)
        n, d = int(rng.integers(100, 501)), int(rng.choice(HELD_OUT_DEVICES))
        tables = TableSet.generate(n, seed=5_000_000 + i)
        for slack in slacks:
            memory = memory_for(tables, d, slack)
            even = even_share_cost(model, tables, d)
            row: dict = {"seed": 5_000_000 + i, "tables": n, "devices": d, "slack": slack}

            def score(name: str, a: Assignment, tables: TableSet = tables, memory: float = memory,
                      row: dict = row, even: float = even) -> None:
                a.check(tables, memory)
                row[f"{name} max"] = max_device_cost(model, tables, a) / even
                row[f"{name} phase"] = phase_max_cost(model, tables, a) / even

            try:
                for label, pol in (("untrained", priors), ("trained", policy)):
                    for k in (0, 7, samples):
                        name = f"{label} {'greedy' if k == 0 else f'best of {k + 1}'}"
                        score(name, RLPlanner(model, pol, samples=k, polish=False).plan(
                            tables, d, memory))
                greedy = RLPlanner(model, priors, samples=0, polish=False).plan(tables, d, memory)
            except PlanningError as exc:
                row["error"] = str(exc)
                rows.append(row)
                continue
            for objective in ("max", "phase"):
                start = time.process_time()
                score(f"local search ({objective})", local_search(model, tables, greedy, memory,
                                                                  objective=objective))
                row[f"local search ({objective}) s"] = time.process_time() - start
            rows.append(row)
            if log:
                print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}),
                      file=sys.stderr)
    return rows


def summarise(result: dict) -> dict:
    """Means per planner over the sets every planner row shares with "rl"; savings of "rl" and
    of every row against each set's best plain baseline (BASELINES: torchrec, size-greedy,
    lookup-greedy, random), by max-device and phase-max cost; and, against "rl", on how many
    sets each row is cheaper/dearer."""
    rows = result["rows"]
    rl = {r["seed"]: r for r in rows["rl"] if "cost" in r}
    baselines = [n for n in rows if n in BASELINES]
    best = {seed: {m: min(x[m] for n in baselines for x in rows[n] if x["seed"] == seed and "cost" in x)
                   for m in ("cost", "phase")} for seed in rl}
    summary = {}
    for name, rs in rows.items():
        ok = [r for r in rs if "cost" in r and r["seed"] in rl]
        if not ok:
            summary[name] = {"mean_max_device_ms": None, "failures": sum("error" in r for r in rs)}
            continue
        ref = result["lower_bounds"]
        summary[name] = {
            "mean_max_device_ms": statistics.mean(r["cost"] for r in ok),
            "ratio_vs_rl": statistics.mean(r["cost"] / rl[r["seed"]]["cost"] for r in ok),
            "rl_saving": statistics.mean(1 - rl[r["seed"]]["cost"] / r["cost"] for r in ok),
            "mean_seconds": statistics.mean(r["seconds"] for r in ok),
            "mean_phase_ms": statistics.mean(r["phase"] for r in ok),
            "rl_phase_saving": statistics.mean(1 - rl[r["seed"]]["phase"] / r["phase"] for r in ok),
            "phase_over_reference": statistics.mean(r["phase"] / ref[r["seed"]] for r in ok),
            "over_lower_bound": statistics.mean(r["cost"] / ref[r["seed"]] for r in ok),
            "max_seconds": max(r["seconds"] for r in ok),
            "saving_vs_best_baseline": statistics.mean(1 - r["cost"] / best[r["seed"]]["cost"] for r in ok),
            "saving_vs_best_baseline_min": min(1 - r["cost"] / best[r["seed"]]["cost"] for r in ok),
            "phase_saving_vs_best_baseline": statistics.mean(1 - r["phase"] / best[r["seed"]]["phase"]
                                                             for r in ok),
            "sets_rl_cheaper_max": sum(rl[r["seed"]]["cost"] < r["cost"] * (1 - 1e-9) for r in ok),
            "sets_rl_dearer_max": sum(rl[r["seed"]]["cost"] > r["cost"] * (1 + 1e-9) for r in ok),
            "sets_rl_cheaper_phase": sum(rl[r["seed"]]["phase"] < r["phase"] * (1 - 1e-9) for r in ok),
            "sets_rl_dearer_phase": sum(rl[r["seed"]]["phase"] > r["phase"] * (1 + 1e-9) for r in ok),
            "failures": sum("error" in r for r in rs)}
        if all("steps" in r for r in ok):
            summary[name]["mean_steps"] = statistics.mean(r["steps"] for r in ok)
            summary[name]["max_steps"] = max(r["steps"] for r in ok)
        if all("polish_seconds" in r for r in ok):
            summary[name]["mean_polish_seconds"] = statistics.mean(r["polish_seconds"] for r in ok)
    per_set_best = [1 - r["cost"] / best[seed]["cost"] for seed, r in rl.items()]
    per_set_best_phase = [1 - r["phase"] / best[seed]["phase"] for seed, r in rl.items()]
    best_mean = min(baselines, key=lambda n: summary[n]["mean_max_device_ms"] or float("inf"))
    out = {"planners": summary, "best_baseline_by_mean": best_mean,
           "rl_saving_vs_best_baseline_per_set": statistics.mean(per_set_best),
           "rl_saving_vs_best_baseline_min_over_sets": min(per_set_best),
           "rl_phase_saving_vs_best_baseline_per_set": statistics.mean(per_set_best_phase),
           "rl_phase_saving_vs_best_baseline_min_over_sets": min(per_set_best_phase),
           "reference": result.get("reference", "lower bound"), "objective": result.get("objective"),
           "polish_steps": result.get("polish_steps"),
           "rl_max_plan_seconds": max(r["seconds"] for r in rl.values()),
           "rl_500_tables_16_devices_seconds_min_of_3": min(result["rl_500_tables_16_devices_seconds"])}
    if "rl_no_polish_500_tables_16_devices_seconds" in result:
        out["rl_no_polish_500_tables_16_devices_seconds_min_of_3"] = min(
            result["rl_no_polish_500_tables_16_devices_seconds"])
    checks = [r["same_as_polished_no_polish_plan"] for r in rl.values()
              if "same_as_polished_no_polish_plan" in r]
    if checks:
        out["rl_equals_polished_no_polish_plan"] = f"{sum(checks)}/{len(checks)}"
    return out


def print_table(summary: dict) -> None:
    ref = summary["reference"]
    print(f"RL policy trained for objective: {summary['objective']}; polish steps "
          f"{summary.get('polish_steps')}")
    print(f"| planner | mean max-device cost (ms) | ratio to RL | RL saving | cost / {ref} "
          "| mean phase-max cost (ms) | RL phase saving | phase cost / " + ref +
          " | saving vs best plain baseline (max, per set) | min over sets "
          "| saving vs best plain baseline (phase) | sets RL cheaper/dearer (max) "
          "| sets RL cheaper/dearer (phase) | mean planning s | max planning s "
          "| polish steps mean/max | mean polish s | failures |")
    print("|---|" + "---:|" * 17)
    for name, s in summary["planners"].items():
        if s["mean_max_device_ms"] is None:
            print(f"| {name} |" + " - |" * 16 + f" {s['failures']} |")
            continue
        steps = f"{s['mean_steps']:.1f}/{s['max_steps']}" if "mean_steps" in s else "-"
        polish = f"{s['mean_polish_seconds']:.2f}" if "mean_polish_seconds" in s else "-"
        print(f"| {name} | {s['mean_max_device_ms']:.2f} | {s['ratio_vs_rl']:.3f} | "
              f"{100 * s['rl_saving']:.1f}% | {s['over_lower_bound']:.4f} | {s['mean_phase_ms']:.2f} | "
              f"{100 * s['rl_phase_saving']:.1f}% | {s['phase_over_reference']:.4f} | "
              f"{100 * s['saving_vs_best_baseline']:.2f}% | {100 * s['saving_vs_best_baseline_min']:.1f}% | "
              f"{100 * s['phase_saving_vs_best_baseline']:.2f}% | "
              f"{s['sets_rl_cheaper_max']}/{s['sets_rl_dearer_max']} | "
              f"{s['sets_rl_cheaper_phase']}/{s['sets_rl_dearer_phase']} | "
              f"{s['mean_seconds']:.2f} | {s['max_seconds']:.2f} | {steps} | {polish} | {s['failures']} |")
    print(f"\nRL phase-max saving against the best baseline (by phase-max) of each set: "
          f"{100 * summary['rl_phase_saving_vs_best_baseline_per_set']:.2f}% on average, "
          f"{100 * summary['rl_phase_saving_vs_best_baseline_min_over_sets']:.1f}% at the least")
    print(f"\nRL saving against the best baseline of each set: "
          f"{100 * summary['rl_saving_vs_best_baseline_per_set']:.2f}% on average, "
          f"{100 * summary['rl_saving_vs_best_baseline_min_over_sets']:.1f}% at the least; "
          f"best baseline by mean: {summary['best_baseline_by_mean']}; RL planning 500 tables on "
          f"16 devices: {summary['rl_500_tables_16_devices_seconds_min_of_3']:.2f} s process CPU "
          f"time (min of 3)" + (
              f"; without polish {summary['rl_no_polish_500_tables_16_devices_seconds_min_of_3']:.2f} s"
              if "rl_no_polish_500_tables_16_devices_seconds_min_of_3" in summary else ""))
    if "rl_equals_polished_no_polish_plan" in summary:
        print(f"rl plan == local_search(rl, no polish plan): "
              f"{summary['rl_equals_polished_no_polish_plan']} sets")


# ---------------------------------------------------------------------------------------------
# Measured step time under DistributedModelParallel (torchrun workers)


def _kjt(tables: TableSet, batch: int, rng: np.random.Generator):
    from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

    from autorec.sharding.tables import access_indices

    lengths, values = [], []
    for t in tables.tables:
        n = rng.poisson(t.pooling, batch).clip(0, 4 * max(1.0, t.pooling) + 4).astype(np.int64)
        lengths.append(n)
        values.append(access_indices(t.rows, t.access_exponent, int(n.sum()), rng))
    return KeyedJaggedTensor(keys=[f"f_{t.name}" for t in tables.tables],
                             values=torch.from_numpy(np.concatenate(values)),
                             lengths=torch.from_numpy(np.concatenate(lengths)))


def worker(request_path: str) -> None:
    """One torchrun rank: build one DMP per plan over the same tables, time train steps
    alternating between the plans, write the per-plan step times (rank 0)."""
    import torch.distributed as dist
    from torchrec.distributed import sharding_plan as sp
    from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
    from torchrec.distributed.model_parallel import DistributedModelParallel
    from torchrec.distributed.types import ShardingPlan
    from torchrec.modules.embedding_configs import EmbeddingBagConfig
    from torchrec.modules.embedding_modules import EmbeddingBagCollection
    from torchrec.optim.apply_optimizer_in_backward import apply_optimizer_in_backward
    from torchrec.optim.rowwise_adagrad import RowWiseAdagrad

    torch.set_num_threads(1)
    request = json.loads(Path(request_path).read_text())
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    tables = TableSet.from_dict(request["tables"])
    configs = [EmbeddingBagConfig(name=t.name, embedding_dim=t.dim, num_embeddings=t.rows,
                                  feature_names=[f"f_{t.name}"]) for t in tables.tables]
    models = {}
    for name, ranks in request["plans"].items():
        ebc = EmbeddingBagCollection(tables=configs, device=torch.device("meta"))
        apply_optimizer_in_backward(RowWiseAdagrad, ebc.parameters(), {"lr": 0.01})
        gens = {t.name: (sp.table_wise(rank=r[0], compute_kernel="fused") if len(r) == 1
                         else sp.column_wise(ranks=r, compute_kernel="fused"))
                for t, r in zip(tables.tables, ranks, strict=True)}
        module_plan = sp.construct_module_sharding_plan(
            ebc, gens, sharder=EmbeddingBagCollectionSharder(), local_size=world, world_size=world,
            device_type="cpu")
        models[name] = DistributedModelParallel(ebc, device=torch.device("cpu"),
                                                plan=ShardingPlan({"": module_plan}),
                                                sharders=[EmbeddingBagCollectionSharder()])
    rng = np.random.default_rng(1000 + rank)
    batches = [_kjt(tables, request["batch_size"], rng) for _ in range(4)]
    times: dict[str, list[float]] = {name: [] for name in models}
    for step in range(request["warmup"] + request["steps"]):
        for name, model in models.items():
            dist.barrier()
            start = time.perf_counter()
            out = model(batches[step % len(batches)])
            out.values().sum().backward()
            dist.barrier()
            if step >= request["warmup"]:
                times[name].append(time.perf_counter() - start)
    if rank == 0:
        Path(request["result"]).write_text(json.dumps(times))
    dist.destroy_process_group()


def measure(nprocs: list[int], n_sets: int, steps: int, batch_size: int, model: ShardCostModel,
            policy: ShardingPolicy) -> list[dict]:
    """Step time of the RL plan and of the best baseline (by the cost model) on scaled table
    sets (rows 10^3..10^5, 30-60 tables), under torchrun with each process count."""
    rl = RLPlanner(model, policy)
    results = []
    for i in range(n_sets):
        rng = np.random.default_rng(3_000_000 + i)
        tables = TableSet.generate(int(rng.integers(30, 61)), seed=3_000_000 + i,
                                   rows_range=(1e3, 1e5))
        for nproc in nprocs:
            memory = memory_for(tables, nproc, SLACK)
            plans = {"rl": rl.plan(tables, nproc, memory)}
            costs = {"rl": max_device_cost(model, tables, plans["rl"])}
            for name, make in BASELINES.items():
                try:
                    a = (TorchrecPlanner() if name == "torchrec" else make()).plan(tables, nproc, memory)
                except PlanningError:
                    continue
                if all(p.even for p in a.placements):
                    plans[name], costs[name] = a, max_device_cost(model, tables, a)
            best = min((n for n in plans if n != "rl"), key=costs.__getitem__)
            with tempfile.TemporaryDirectory() as tmp:
                req = Path(tmp) / "request.json"
                req.write_text(json.dumps({
                    "tables": tables.to_dict(), "batch_size": batch_size, "warmup": 3, "steps": steps,
                    "result": str(Path(tmp) / "result.json"),
                    "plans": {n: [list(p.ranks) for p in plans[n].placements] for n in ("rl", best)}}))
                cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                       "--nproc-per-node", str(nproc), str(Path(__file__).resolve()), "--worker", str(req)]
                env = {**os.environ, "OMP_NUM_THREADS": "1"}
                proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200)
                if proc.returncode != 0:
                    raise RuntimeError(proc.stderr[-3000:])
                times = json.loads((Path(tmp) / "result.json").read_text())
            row = {"set": 3_000_000 + i, "tables": len(tables), "nproc": nproc, "best_baseline": best,
                   "predicted_ms": {"rl": costs["rl"], best: costs[best]},
                   "min_step_ms": {n: 1000 * min(t) for n, t in times.items()},
                   "median_step_ms": {n: 1000 * statistics.median(t) for n, t in times.items()}}
            results.append(row)
            print(json.dumps(row), file=sys.stderr)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train", action="store_true", help="train the policy and save it to --out")
    parser.add_argument("--iterations", type=int, default=TrainConfig.iterations)
    parser.add_argument("--batch-size", type=int, default=TrainConfig.batch_size)
    parser.add_argument("--validate-every", type=int, default=25)
    parser.add_argument("--temperature", type=float, default=TrainConfig.temperature,
                        help="sampling temperature of the training episodes")
    parser.add_argument("--lr", type=float, default=TrainConfig.lr)
    parser.add_argument("--train-slack", type=float, nargs=2, default=list(TrainConfig.slack),
                        metavar=("LO", "HI"), help="training problems' memory over the even share "
                        "of the bytes, drawn uniformly in [LO, HI]")
    parser.add_argument("--objective", choices=("max", "phase"), default="max",
                        help="training reward: minus the max device cost, or minus the sum over "
                             "phases of the max device cost (DreamShard's)")
    parser.add_argument("--out", default=str(ROOT / "cost_models" / "cpu"))
    parser.add_argument("--sets", type=int, default=20)
    parser.add_argument("--samples", type=int, default=7)
    parser.add_argument("--polish-steps", type=int, default=50,
                        help="local-search steps of the RL planner's polish (and of the polished "
                             "ablations)")
    parser.add_argument("--converge", action="store_true",
                        help="also polish the ablations' and the RL plan to a local optimum")
    parser.add_argument("--measure", action="store_true", help="measure step times under torchrun")
    parser.add_argument("--nproc", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--step-batch", type=int, default=1024, help="per-rank batch of --measure")
    parser.add_argument("--headroom", action="store_true",
                        help="measure how far the untrained policy's plans are from better ones")
    parser.add_argument("--slack", type=float, nargs="+", default=[SLACK],
                        help="memory per device over the even share of the bytes (--headroom)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--cost-model", default=str(ROOT / "cost_models" / "cpu"),
                        help="the fitted cost model's directory")
    parser.add_argument("--policy", help="the policy's directory (default: --cost-model's)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    if args.worker:
        worker(args.worker)
        return 0
    if args.train:
        config = TrainConfig(iterations=args.iterations, batch_size=args.batch_size,
                             devices=TRAIN_DEVICES, temperature=args.temperature, lr=args.lr,
                             objective=args.objective, slack=tuple(args.train_slack))
        start = time.time()

        validation: list[tuple[int, float]] = []

        def log(i: int, stats: dict) -> None:
            if "validation" in stats:
                validation.append((i, round(stats["validation"], 5)))
                print(f"iter {i}: validation (greedy {args.objective} cost / even share) "
                      f"{stats['validation']:.4f}", file=sys.stderr)
            elif i % 10 == 0 or i == config.iterations - 1:
                print(f"iter {i}: reward mean {stats['reward_mean']:.4f} max {stats['reward_max']:.4f} "
                      f"entropy {stats['entropy']:.2f} ({stats['tables']} tables, {stats['devices']} "
                      f"devices, {time.time() - start:.0f} s)", file=sys.stderr)

        policy = train_policy(ShardCostModel.load(args.cost_model), config, log=log,
                              validation=validation_problems(), validate_every=args.validate_every)
        save_policy(policy, args.out, {
            "trained_by": f"python benchmarks/sharding_plans.py --train --iterations {args.iterations} "
                          f"--batch-size {args.batch_size} --temperature {args.temperature} "
                          f"--lr {args.lr} --objective {args.objective} --cost-model {args.cost_model} "
                          f"--train-slack {args.train_slack[0]} {args.train_slack[1]}",
            "config": {k: v for k, v in config.__dict__.items()}, "seconds": round(time.time() - start),
            "validation": validation})
        print(f"policy saved to {args.out}", file=sys.stderr)
        return 0
    model = ShardCostModel.load(args.cost_model)
    policy = load_policy(args.policy or args.cost_model)
    if args.headroom:
        rows = headroom(args.sets, model, args.slack, policy)
        for slack in args.slack:
            ok = [r for r in rows if r["slack"] == slack and "error" not in r]
            print(f"\nslack {slack}: {len(ok)} sets ({len(rows) - len(ok) if len(args.slack) == 1 else '-'} "
                  f"failed); mean cost / even share (trained: {args.policy or args.cost_model}, "
                  f"objective {policy.objective})")
            print("| plan | max device cost | phase-max cost |")
            print("|---|---:|---:|")
            for name in [k[:-4] for k in ok[0] if k.endswith(" max")]:
                print(f"| {name} | {statistics.mean(r[name + ' max'] for r in ok):.4f} | "
                      f"{statistics.mean(r[name + ' phase'] for r in ok):.4f} |")
            print("local search seconds (mean): " + ", ".join(
                f"{o} {statistics.mean(r[f'local search ({o}) s'] for r in ok):.2f}"
                for o in ("max", "phase")))
        if args.json:
            print(json.dumps(rows))
        return 0
    if args.measure:
        rows = measure(args.nproc, args.sets, args.steps, args.step_batch, model, policy)
        for r in rows:
            names = list(r["min_step_ms"])
            print(f"set {r['set']} ({r['tables']} tables), {r['nproc']} processes: " + ", ".join(
                f"{n} min {r['min_step_ms'][n]:.1f} ms / median {r['median_step_ms'][n]:.1f} ms "
                f"(predicted max-device {r['predicted_ms'][n]:.2f} ms)" for n in names))
        if args.json:
            print(json.dumps(rows))
        return 0
    result = quality(args.sets, args.samples, model, policy, polish_steps=args.polish_steps,
                     converge=args.converge)
    summary = summarise(result)
    print_table(summary)
    if args.json:
        print(json.dumps({"summary": summary, **result}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
