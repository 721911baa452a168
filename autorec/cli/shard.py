"""``autorec shard``: plan an architecture's embedding tables.

    autorec shard --arch arch.json --world-size 4 --memory-per-device 80GB [--json] [--out plan.json]
        [--planner greedy-polish|rl] [--no-polish] [--polish-steps 50]

The default planner is greedy + polish (:mod:`autorec.sharding.polished`: lookup-greedy, then
local search on the learned cost model); ``--planner rl`` takes the RL planner's plan instead
(the two step equally fast on the clock: BENCHMARKS.md). Either plan is polished by local search
(``--polish-steps`` moves/swaps at most; ``--no-polish`` keeps it as planned). Prints the plan
(each table's sharding and ranks), its predicted per-device costs (forward, backward,
communication, by the learned cost model) and the other planners (the other of the two,
torchrec's planner, size-greedy, lookup-greedy, random) side by side. ``--out`` writes the plan
file that ``autorec train --plan`` takes.

Example:
    >>> parse_bytes("80GB"), parse_bytes("1.5GiB"), parse_bytes("4096")
    (80000000000, 1610612736, 4096)
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

from autorec.cli.common import UsageError, add_device_arg, require_counts

PLANNERS = ("greedy-polish", "rl")
_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}


def parse_bytes(text: str, flag: str = "--memory-per-device") -> int:
    """A size such as ``80GB`` (10^9), ``16GiB`` (2^30) or a plain number of bytes."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", str(text))
    unit = match.group(2).upper() if match else None
    if match is None or unit not in _UNITS or float(match.group(1)) <= 0:
        raise UsageError(f"{flag}: expected a positive size such as 80GB, 16GiB or 1000000 (bytes), "
                         f"got {text!r}")
    return int(float(match.group(1)) * _UNITS[unit])


def add_parser(commands: Any) -> None:
    """Register ``shard`` on the CLI's subcommands."""
    parser = commands.add_parser("shard", help="plan embedding sharding (greedy + polish, or RL)")
    parser.add_argument("--arch", required=True, help="an arch.json (ArchSpec)")
    parser.add_argument("--world-size", type=int, required=True, metavar="N", help="devices (ranks)")
    parser.add_argument("--memory-per-device", required=True, metavar="SIZE",
                        help="memory of one device for tables, e.g. 80GB or 16GiB")
    add_device_arg(parser, "--device-kind", "the cost model and policy to use, and the plan's device type")
    parser.add_argument("--pooling", action="append", default=[], metavar="FEATURE=IDS",
                        help="mean ids per sample of a feature or table (default 1; repeatable)")
    parser.add_argument("--planner", choices=PLANNERS, default="greedy-polish",
                        help="greedy-polish (default) or rl, the learned policy")
    parser.add_argument("--samples", type=int, default=7,
                        help="rl: sampled plans tried besides the greedy one (best kept)")
    parser.add_argument("--no-polish", action="store_true",
                        help="keep the planner's plan as it is (default: polish it by local search)")
    parser.add_argument("--polish-steps", type=int, default=50, metavar="N",
                        help="at most N local-search steps of the polish (moves and swaps; each "
                             "~30 ms for 500 tables on 16 devices)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-baselines", action="store_true", help="plan with the chosen planner only")
    parser.add_argument("--out", metavar="FILE", help="write the plan file for `autorec train --plan`")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object")
    parser.set_defaults(func=cmd_shard)


def _pooling(pairs: list[str]) -> dict[str, float]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        try:
            number = float(value)
        except ValueError:
            number = -1.0
        if not sep or not key or not number > 0:
            raise UsageError(f"--pooling: expected FEATURE=IDS with IDS > 0, got {pair!r}")
        out[key] = number
    return out


def _planner(name: str, device_kind: str, samples: int, polish: bool, polish_steps: int) -> Any:
    from autorec.sharding.planner import RLPlanner
    from autorec.sharding.polished import GreedyPolish

    if name == "rl":
        return RLPlanner(samples=samples, device_kind=device_kind, polish=polish, polish_steps=polish_steps)
    return GreedyPolish(device_kind=device_kind, polish_steps=polish_steps if polish else 0)


def shard_report(spec: Any, world_size: int, memory: int, *, device_kind: str = "cpu",
                 pooling: dict[str, float] | None = None, samples: int = 7, seed: int = 0,
                 baselines: bool = True, polish: bool = True, polish_steps: int = 50,
                 planner: str = "greedy-polish") -> dict[str, Any]:
    """The plan of ``spec``'s tables by ``planner`` (polished by local search unless ``polish``
    is off), its per-device costs and the other planners' (a dict)."""
    from autorec.sharding.baselines import BASELINES, TorchrecPlanner
    from autorec.sharding.cost_model import HEADS
    from autorec.sharding.objectives import max_device_cost
    from autorec.sharding.plans import PlanningError, plan_json
    from autorec.sharding.tables import TableSet, TableSetError

    try:
        tables = TableSet.from_arch(spec, pooling)
    except TableSetError as exc:
        raise ValueError(f"--pooling: {exc}") from None
    chosen = _planner(planner, device_kind, samples, polish, polish_steps)
    model = chosen.cost_model
    start = time.perf_counter()
    assignment = chosen.plan(tables, world_size, memory, seed=seed)
    seconds = time.perf_counter() - start
    shards, devices = assignment.shards(tables)
    heads = model.device_head_costs(TableSet(tuple(shards)), devices, world_size)
    used = assignment.memory(tables)
    cost = float(heads.sum(-1).max())
    report: dict[str, Any] = {
        "planner": planner, "arch": spec.name, "world_size": world_size, "memory_per_device": memory,
        "device_kind": device_kind, "plan": plan_json(assignment, tables, device_type=device_kind),
        "devices": [{"rank": d, **{f"{h}_ms": round(float(heads[d, i]), 4) for i, h in enumerate(HEADS)},
                     "total_ms": round(float(heads[d].sum()), 4), "bytes": used[d]}
                    for d in range(world_size)],
        "max_device_cost_ms": round(cost, 4), "seconds": round(seconds, 3),
        "polish_steps": polish_steps if polish else 0, "baselines": {}}
    if baselines:
        others = {name: (lambda name=name: _planner(name, device_kind, samples, polish, polish_steps))
                  for name in PLANNERS if name != planner}
        others.update({name: (lambda: TorchrecPlanner(device_kind)) if name == "torchrec" else make
                       for name, make in BASELINES.items()})
        for name, make in others.items():
            start = time.perf_counter()
            try:
                other = max_device_cost(model, tables, make().plan(tables, world_size, memory, seed=seed))
            except PlanningError as exc:
                report["baselines"][name] = {"error": str(exc)}
                continue
            report["baselines"][name] = {
                "max_device_cost_ms": round(other, 4), "saving": round(1 - cost / other, 4),
                "seconds": round(time.perf_counter() - start, 3)}
    return report


def cmd_shard(args: argparse.Namespace) -> int:
    from autorec.arch import ArchSpec

    require_counts(args, positive=["world_size"], non_negative=["samples", "polish_steps"])
    path = Path(args.arch)
    if not path.is_file():
        raise UsageError(f"--arch: {path}: no such arch.json file")
    spec = ArchSpec.load(path)
    memory = parse_bytes(args.memory_per_device)
    report = shard_report(spec, args.world_size, memory, device_kind=args.device_kind,
                          pooling=_pooling(args.pooling), samples=args.samples, seed=args.seed,
                          baselines=not args.no_baselines, polish=not args.no_polish,
                          polish_steps=args.polish_steps, planner=args.planner)
    if args.out:
        Path(args.out).write_text(json.dumps(report["plan"], indent=2) + "\n")
        print(f"plan written to {args.out}", file=sys.stderr)
    if args.json:
        print(json.dumps(report))
    else:
        _print_report(report, spec)
    return 0


def _size(n: float) -> str:
    for unit, factor in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= factor:
            return f"{n / factor:,.2f} {unit}"
    return f"{n:,.0f} B"


def _print_report(report: dict[str, Any], spec: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    sizes = {t.name: t for t in spec.tables}
    plan = Table(title=f"{report['arch']}: sharding plan on {report['world_size']} devices "
                       f"({_size(report['memory_per_device'])} each)")
    for column in ("table", "rows", "dim", "sharding", "ranks"):
        plan.add_column(column, justify="left" if column in ("table", "sharding") else "right")
    for name, entry in report["plan"]["tables"].items():
        plan.add_row(name, f"{sizes[name].num_embeddings:,}", str(sizes[name].dim),
                     entry["sharding_type"], ",".join(map(str, entry.get("ranks", []))))
    console.print(plan)
    devices = Table(title="predicted cost per device (ms per step, learned cost model)")
    for column in ("rank", "forward", "backward", "comm", "total", "memory"):
        devices.add_column(column, justify="right")
    for d in report["devices"]:
        devices.add_row(str(d["rank"]), f"{d['forward_ms']:.3f}", f"{d['backward_ms']:.3f}",
                        f"{d['comm_ms']:.3f}", f"{d['total_ms']:.3f}", _size(d["bytes"]))
    console.print(devices)
    side = Table(title="planners side by side (max-device cost; lower is better)")
    for column in ("planner", "max-device ms", f"{report['planner']} saves", "seconds"):
        side.add_column(column, justify="left" if column == "planner" else "right")
    side.add_row(f"{report['planner']} (chosen)", f"{report['max_device_cost_ms']:.3f}", "",
                 f"{report['seconds']:.2f}")
    for name, b in report["baselines"].items():
        if "error" in b:
            side.add_row(name, "no plan", "", b["error"][:60])
        else:
            side.add_row(name, f"{b['max_device_cost_ms']:.3f}", f"{100 * b['saving']:.1f}%",
                         f"{b['seconds']:.2f}")
    console.print(side)
