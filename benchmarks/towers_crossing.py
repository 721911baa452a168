"""Where DMT towers pay on the clock: paired step times of the tower and the flat model in W gloo
processes, on links throttled to several bandwidths (issue 23).

    OMP_NUM_THREADS=1 .venv/bin/torchrun --standalone --nproc-per-node 4 -m benchmarks.towers_crossing \
        --dims 16 64 --gbps inf 3 1 0.3 0.1 0.03 --claims

The models are those of benchmarks/towers_comm.py (synthetic ``groups4``, 16 tables, 4 towers of
a DLRM dot block compressed to ``--n-out`` vectors). For each embedding dim and each link
bandwidth (GB/s per rank, emulated by :class:`autorec.towers.link.ThrottledLink`: each rank waits
its bytes over the bandwidth before every collective, so the step is the real compute plus a
real wait), flat and tower steps alternate (``--steps`` each, between barriers, median kept).
The measured crossing is the bandwidth where the towers/flat step ratio crosses 1, from the
slowest link up (log-interpolated between the two bracketing bandwidths); the predicted one is
:func:`autorec.towers.link.crossing_gbps` from the fastest link's times and the metered bytes.
Rank 0 prints one JSON line; ``--claims`` merges ``towers_*`` keys into claims.json.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import time
from typing import Any

import torch
import torch.distributed as dist

from autorec.data.synthetic import load_synthetic
from autorec.towers.link import ThrottledLink, crossing_gbps
from autorec.train.partition import rank_batches
from benchmarks.results_file import RESULTS, merge_results
from benchmarks.towers_comm import build_trainers


def paired_steps(trainers: dict[str, Any], batches: list[Any], steps: int, gbps: float) -> dict[str, Any]:
    """Median step seconds of each model on a link of ``gbps``, and this rank's bytes per step."""
    links = {m: ThrottledLink(gbps=gbps) for m in trainers}
    wall: dict[str, list[float]] = {m: [] for m in trainers}
    for step in range(steps + 1):
        batch = batches[step % len(batches)]
        for mode in (("flat", "towers") if step % 2 == 0 else ("towers", "flat")):
            dist.barrier()
            t0 = time.perf_counter()
            with links[mode].active():
                trainers[mode].step(batch.dense_features, batch.sparse_features, batch.labels)
            dist.barrier()
            if step == 0:
                links[mode].reset()
                continue
            wall[mode].append(time.perf_counter() - t0)
    sent = torch.tensor([links[m].total() / steps for m in trainers], dtype=torch.float64)
    dist.all_reduce(sent, op=dist.ReduceOp.MAX)  # the busiest rank's bytes set the step
    return {"step_s": {m: statistics.median(w) for m, w in wall.items()},
            "ratio": statistics.median([t / f for t, f in zip(wall["towers"], wall["flat"], strict=True)]),
            "bytes_per_rank_step": dict(zip(trainers, sent.tolist(), strict=True))}


def measured_crossing(rows: list[dict[str, Any]]) -> float:
    """The bandwidth where the towers/flat ratio crosses 1, scanning from the slowest link up to
    the first link where towers lose (a step ratio noisy around 1 on the faster links does not
    move it), log-interpolated with the slower neighbour; inf when towers win on every link
    measured, 0 when they lose on the slowest.

    Example:
        >>> rows = [{"gbps": g, "ratio": r} for g, r in [(math.inf, 1.1), (3, 0.99), (1, 1.08), (0.3, 0.92)]]
        >>> round(measured_crossing(rows), 2)
        0.55
    """
    rows = sorted(rows, key=lambda r: r["gbps"])  # slowest link first
    if rows[0]["ratio"] > 1:
        return 0.0
    for slow, fast in itertools.pairwise(rows):
        if fast["ratio"] > 1 >= slow["ratio"]:
            if not math.isfinite(fast["gbps"]):
                return slow["gbps"]
            x0, x1 = math.log(slow["gbps"]), math.log(fast["gbps"])
            f = (1 - slow["ratio"]) / (fast["ratio"] - slow["ratio"])
            return math.exp(x0 + f * (x1 - x0))
    return math.inf


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dims", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--gbps", type=float, nargs="+", default=[math.inf, 3, 1, 0.3, 0.1, 0.03])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=4096, help="global batch")
    parser.add_argument("--n-out", type=int, default=1)
    parser.add_argument("--num-samples", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--claims", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    torch.set_num_threads(1)
    rank, world = dist.get_rank(), dist.get_world_size()
    ds = load_synthetic(seed=args.seed, preset="groups4", num_samples=args.num_samples)
    batches = list(rank_batches(ds, "train", args.batch_size, shuffle=True, seed=args.seed, epoch=0,
                                rank=rank, world_size=world))
    out: dict[str, Any] = {"world_size": world, "global_batch": args.batch_size, "n_out": args.n_out,
                           "steps": args.steps, "dims": {}}
    for dim in args.dims:
        trainers = build_trainers(ds, dim, args.n_out, args.seed)
        rows = [{"gbps": g, **paired_steps(trainers, batches, args.steps, g)} for g in args.gbps]
        fast = max(rows, key=lambda r: r["gbps"])
        b = fast["bytes_per_rank_step"]
        out["dims"][dim] = {
            "rows": rows, "measured_crossing_gbps": measured_crossing(rows),
            "predicted_crossing_gbps": crossing_gbps(b["flat"], b["towers"], fast["step_s"]["flat"],
                                                     fast["step_s"]["towers"]),
            "fast_link_ratio": fast["ratio"], "bytes_ratio_flat_over_towers": b["flat"] / b["towers"]}
    if rank == 0:
        print(json.dumps(out))
        if args.claims:
            claims: dict[str, Any] = {"towers_world_size": world}
            for dim, r in out["dims"].items():  # inf (towers win on every link): null, and a flag
                for key, value in (("crossing_gbps", r["measured_crossing_gbps"]),
                                   ("predicted_crossing_gbps", r["predicted_crossing_gbps"])):
                    claims[f"towers_d{dim}_{key}"] = value if math.isfinite(value) else None
                claims[f"towers_d{dim}_wins_on_every_link"] = int(r["measured_crossing_gbps"] == math.inf)
                claims[f"towers_d{dim}_fast_link_step_ratio"] = r["fast_link_ratio"]
            merge_results(RESULTS / "claims.json", claims, prefix="towers")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
