"""``autorec towers partition``: train a flat architecture, then partition its tables into towers.

    autorec towers partition --data synthetic --data-opt preset=groups4 --k 2 --k 4 -o parts.json

The architecture (``--arch``, a preset or an arch.json without towers) is trained for
``--epochs``; its interaction statistics (``--method``) on up to ``--rows`` validation rows make
the table graph, partitioned for every ``--k`` within ``--tolerance``. ``-o`` writes the groups
per K as the JSON file that a space's ``towers.partition`` reads. On data with planted groups
(synthetic ``num_groups``) the adjusted Rand index against them is printed too.

    autorec towers plan --arch arch.json --world-size 4 --local-world-size 2 -o plan.json

writes a sharding plan (autorec.train.plan format) that keeps each tower's tables in one host
group, for ``autorec train --plan``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import torch

from autorec.cli.common import (
    UsageError,
    add_arch_arg,
    add_data_args,
    load_data,
    require_counts,
    resolve_arch,
)


def add_parser(commands: Any) -> None:
    """Register ``towers partition`` on the CLI's subcommands."""
    group = commands.add_parser("towers", help="DMT tower tools").add_subparsers(
        dest="towers_command", required=True)
    parser = group.add_parser("partition", help="partition a trained model's tables into K towers")
    add_data_args(parser)
    add_arch_arg(parser, "dlrm")
    parser.add_argument("--k", type=int, action="append", required=True, metavar="K",
                        help="number of towers (repeat for several)")
    parser.add_argument("--epochs", type=int, default=2, help="training epochs before the statistics")
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--method", default="ablation", choices=["ablation", "dot"])
    parser.add_argument("--tolerance", type=float, default=0.1,
                        help="per-tower bytes and lookups at most (1 + tolerance) x the mean")
    parser.add_argument("--rows", type=int, default=4096, help="validation rows for the statistics")
    parser.add_argument("-o", "--output", help="write the groups per K here (JSON, for towers.partition)")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object")
    parser.set_defaults(func=cmd_partition)

    plan = group.add_parser("plan", help="a sharding plan that keeps each tower's tables in one host group")
    plan.add_argument("--arch", required=True, help="an arch.json with towers")
    plan.add_argument("--world-size", type=int, required=True)
    plan.add_argument("--local-world-size", type=int, default=1, help="ranks per host")
    plan.add_argument("-o", "--output", required=True, help="the plan file (for autorec train --plan)")
    plan.set_defaults(func=cmd_plan)


def cmd_plan(args: argparse.Namespace) -> int:
    from autorec.arch import ArchSpec
    from autorec.towers.sharding import tower_plan

    spec = ArchSpec.load(args.arch)
    if spec.towers is None:
        raise UsageError(f"--arch: {args.arch} has no towers (its arch.json has no 'towers' key)")
    try:
        doc = tower_plan(spec, args.world_size, args.local_world_size)
    except ValueError as exc:
        raise UsageError(f"--world-size / --local-world-size: {exc}") from None
    Path(args.output).write_text(json.dumps(doc, indent=2) + "\n")
    return 0


def cmd_partition(args: argparse.Namespace) -> int:
    from autorec.space.towers import write_partition
    from autorec.towers.partition import (
        PartitionError,
        adjusted_rand_index,
        cut_fraction,
        feature_graph,
        imbalance,
        interaction_matrix,
        labels,
        partition,
        round_robin_partition,
        table_loads,
        tower_groups,
    )
    from autorec.train.trainer import TrainConfig, Trainer

    if any(k < 1 for k in args.k):
        raise UsageError(f"--k: expected positive tower counts, got {args.k}")
    require_counts(args, positive=["epochs", "batch_size"])
    if args.rows < 2 or args.tolerance < 0:
        raise UsageError(f"--rows must be >= 2 and --tolerance >= 0, got {args.rows} and {args.tolerance:g}")
    dataset = load_data(args)
    spec = resolve_arch(args.arch, dataset.schema)
    if spec.towers is not None:
        raise UsageError(f"--arch: {args.arch} already has towers; partition a flat architecture")
    tables = len(spec.tables)
    if max(args.k) > tables:
        raise UsageError(f"--k: {max(args.k)} towers for {tables} tables")
    config = TrainConfig(epochs=args.epochs, batch_size=args.batch_size, seed=args.seed, progress=False)
    trainer = Trainer(spec, dataset, config)
    trainer.fit()
    batch = next(iter(dataset.batches("val", args.rows, shuffle=False, seed=args.seed)))
    with torch.no_grad():
        names, weights = interaction_matrix(trainer.model, batch.dense_features, batch.sparse_features,
                                            method=args.method, seed=args.seed)
    graph = feature_graph(spec, names, weights, table_loads(spec, batch.sparse_features))
    truth = _planted(dataset, spec)
    order = [t.name for t in spec.tables]
    result: dict[str, Any] = {"arch": spec.name, "data": dataset.name, "method": args.method, "towers": {}}
    groups_per_k = {}
    for k in args.k:
        try:
            parts = partition(graph, k, tolerance=args.tolerance)
        except PartitionError as exc:
            raise UsageError(f"--k {k} --tolerance {args.tolerance}: {exc}") from None
        groups = tower_groups(spec, parts)
        groups_per_k[k] = groups
        entry = {"groups": [list(g) for g in groups], "cut_fraction": cut_fraction(graph, parts),
                 "imbalance": imbalance(graph, parts),
                 "round_robin_cut_fraction": cut_fraction(graph, round_robin_partition(graph, k))}
        if truth is not None:
            entry["ari"] = adjusted_rand_index(truth, labels(parts, order))
        result["towers"][str(k)] = entry
    if args.output:
        write_partition(args.output, groups_per_k)
    if args.json:
        print(json.dumps(result))
    else:
        for k, entry in result["towers"].items():
            ari = f", ARI {entry['ari']:.3f}" if "ari" in entry else ""
            rr = entry["round_robin_cut_fraction"]
            print(f"K={k}: cut {entry['cut_fraction']:.3f} (round robin {rr:.3f}){ari}; "
                  + " | ".join(" ".join(g) for g in entry["groups"]))
    return 0


def _planted(dataset: Any, spec: Any) -> list[int] | None:
    """The planted group of each table when the dataset has them (synthetic ``num_groups``)."""
    groups_of = getattr(dataset, "feature_groups", None)
    if groups_of is None or not getattr(getattr(dataset, "config", None), "num_groups", 0):
        return None
    group = {f: i for i, g in enumerate(groups_of()) for f in g}
    return [group[t.features[0]] for t in spec.tables]
