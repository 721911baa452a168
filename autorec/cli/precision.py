"""``autorec precision probe``: the probe on a preset or arch.json over a dataset's real batches.

    autorec precision probe --arch wukong --data movielens100k [--epochs 1] [--json] [--html probe.html]

The architecture is trained in fp32 first (``--epochs``, 0 probes the initialisation), then
probed on up to ``--rows`` rows of ``--split``.
"""

from __future__ import annotations

import argparse
import json
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
from autorec.precision.probe import DEFAULT_FORMATS, ProbeResult, probe, write_probe_html


def add_parser(commands: Any) -> None:
    """Register ``precision probe`` on the CLI's subcommands."""
    group = commands.add_parser("precision", help="numeric precision tools").add_subparsers(
        dest="precision_command", required=True)
    parser = group.add_parser("probe", help="per-layer statistics and error of each format against fp32")
    add_data_args(parser)
    add_arch_arg(parser, "wukong")
    parser.add_argument("--formats", default=",".join(DEFAULT_FORMATS), help="layer precisions to try")
    parser.add_argument("--epochs", type=int, default=1, help="fp32 training epochs before probing (0: none)")
    parser.add_argument("--split", default="val", choices=["train", "val", "test"])
    parser.add_argument("--rows", type=int, default=10000, help="rows of the split to probe on")
    parser.add_argument("--batch-size", type=int, default=2048)
    parser.add_argument("--auc-tolerance", type=float, default=0.001)
    parser.add_argument("--error-tolerance", type=float, default=0.05)
    parser.add_argument("--html", help="write the chart of safe and unsafe sites here")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object")
    parser.set_defaults(func=cmd_probe)


def rec_model(model: torch.nn.Module) -> torch.nn.Module:
    """The RecModel inside a trainer's DistributedModelParallel (or the model itself)."""
    while not hasattr(model, "spec") and hasattr(model, "module"):
        model = model.module
    return model


def cmd_probe(args: argparse.Namespace) -> int:
    from autorec.models import build_model
    from autorec.precision.recipes import with_precision
    from autorec.train.trainer import TrainConfig, Trainer

    formats = [f for f in args.formats.split(",") if f]
    if not formats:
        raise UsageError("--formats: expected at least one precision")
    require_counts(args, positive=["rows"], non_negative=["epochs"])
    dataset = load_data(args)
    spec = with_precision(resolve_arch(args.arch, dataset.schema), "fp32")
    if args.epochs:
        trainer = Trainer(spec, dataset, TrainConfig(epochs=args.epochs, seed=args.seed, progress=False))
        trainer.fit()
        model = rec_model(trainer.model)
    else:
        torch.manual_seed(args.seed)
        model = build_model(spec)
    batches, rows = [], 0
    for batch in dataset.loader(args.split, args.batch_size, shuffle=False, seed=args.seed):
        batches.append(batch)
        rows += batch.labels.numel()
        if rows >= args.rows:
            break
    result = probe(model, batches, formats, auc_tolerance=args.auc_tolerance,
                   error_tolerance=args.error_tolerance)
    if args.html:
        write_probe_html(result, args.html)
    if args.json:
        print(json.dumps(result.to_dict()))
    else:
        print_probe(result, spec.name, dataset.name)
    return 0


def print_probe(result: ProbeResult, arch: str, data: str) -> None:
    """Two rich tables: parts (AUC drop, verdict) and sites (statistics, error per format)."""
    from rich.console import Console
    from rich.table import Table

    parts = Table(title=f"{arch} on {data}: one part in a format (fp32 AUC {result.baseline_auc:.4f}, "
                        f"{result.rows} rows)")
    parts.add_column("part")
    for fmt in result.formats:
        parts.add_column(f"{fmt}\nAUC drop", justify="right")
    for p in result.parts:
        verdicts = ("[red]unsafe[/]" if p.unsafe[f] else "[green]ok[/]" for f in result.formats)
        parts.add_row(p.part, *(f"{p.auc_drop[f]:+.4f} {v}" for f, v in zip(result.formats, verdicts,
                                                                            strict=True)))
    sites = Table(title="sites: input activations, weights, relative output error")
    for column in ("site", "kind", "act amax", "act kurt", "w kurt", "mxfp4 sat"):
        sites.add_column(column, justify="left" if column in ("site", "kind") else "right")
    for fmt in result.formats:
        sites.add_column(fmt, justify="right")
    for s in result.sites:
        saturated = s.act_saturated.get("mxfp4_e2m1")
        sites.add_row(s.site, s.kind, f"{s.act_amax:.3g}", f"{s.act_kurtosis:.1f}",
                      f"{s.weight_kurtosis:.1f}", f"{saturated:.2f}" if saturated is not None else "",
                      *(f"{s.error[f]:.2e}" for f in result.formats))
    console = Console()
    console.print(parts)
    console.print(sites)
