"""``autorec train``: train a preset or an arch.json, on one process, under torchrun or on Ray."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from autorec.cli.common import (
    UsageError,
    add_arch_arg,
    add_data_args,
    add_model_args,
    load_data,
    model_from_args,
    parse_options,
    resolve_arch,
)
from autorec.config.train import RAY_PLACEMENTS, TrainSettings

# The TrainSettings fields this command takes as flags, and the flags not named after their field.
TRAIN_FIELDS = ("epochs", "batch_size", "dense_lr", "embedding_lr", "dense_optimizer", "lr_schedule",
                "warmup_steps", "dense_weight_decay", "embedding_weight_decay", "patience",
                "monitor", "max_steps_per_epoch", "checkpoint_dir", "num_workers",
                "prefetch", "compile", "autocast", "fp32_matmul", "keep_freed_memory",
                "huge_pages")
DISTRIBUTED_FIELDS = ("plan", "dense_parallel", "checkpoint_every", "pipeline")
FLAGS = {"dense_lr": "--lr", "dense_optimizer": "--optimizer"}


def add_parser(commands: Any) -> None:
    train = commands.add_parser("train", help="train a preset or an arch.json on a dataset")
    add_data_args(train)
    add_arch_arg(train, "dlrm")
    add_model_args(train, TrainSettings, TRAIN_FIELDS, FLAGS)
    train.add_argument("--json", action="store_true", help="print the final metrics as one JSON object")
    train.add_argument("--output", help="write the full result (history, per-step losses) as JSON here")
    add_distributed_args(train)
    train.set_defaults(func=cmd_train)


def add_distributed_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("distributed (launched through torchrun when N > 1 or M > 1)")
    group.add_argument("--nproc-per-node", type=int, default=1, metavar="N", help="processes per node")
    group.add_argument("--nnodes", default="1", metavar="M", help="nodes, or MIN:MAX for elastic")
    group.add_argument("--rdzv-endpoint", metavar="HOST:PORT", help="rendezvous of a multi-node run")
    group.add_argument("--rdzv-id", help="the run's id, the same on every node")
    group.add_argument("--node-rank", type=int, help="this node's rank (static rendezvous)")
    group.add_argument("--max-restarts", type=int, default=0, metavar="K",
                       help="restart all workers up to K times after a failure (resumes from "
                            "--checkpoint-dir)")
    add_model_args(group, TrainSettings, DISTRIBUTED_FIELDS, FLAGS)
    group.add_argument("--save-plan", metavar="FILE", help="write the plan in use as plan JSON")
    group.add_argument("--no-resume", action="store_true",
                       help="start afresh even when --checkpoint-dir holds a checkpoint")
    group.add_argument("--ray-workers", type=int, metavar="N",
                       help="train on N Ray Train workers (TorchTrainer) instead of torchrun")
    group.add_argument("--ray-address", help="Ray cluster to join (default: RAY_ADDRESS, else a local one)")
    group.add_argument("--ray-storage", help="where Ray Train keeps the run (default: ~/ray_results)")
    group.add_argument("--ray-placement", default="PACK", choices=RAY_PLACEMENTS,
                       help="how Ray places the workers: PACK fills a node first, STRICT_SPREAD puts "
                            "each on its own node (default: PACK)")


def cmd_train(args: argparse.Namespace) -> int:
    from autorec.train.launch import launch, under_launcher
    from autorec.train.trainer import TrainConfig, Trainer

    # checked before torchrun starts workers, so a bad value is reported once
    settings = model_from_args(TrainSettings, args, (*TRAIN_FIELDS, *DISTRIBUTED_FIELDS, "seed"), FLAGS,
                               progress=not args.json and sys.stderr.isatty(),
                               resume=bool(args.checkpoint_dir) and not args.no_resume)
    if args.ray_workers and (args.nproc_per_node > 1 or args.nnodes != "1"):
        raise UsageError("--ray-workers: Ray Train starts the workers; drop --nproc-per-node/--nnodes")
    if (args.nproc_per_node > 1 or args.nnodes != "1" or args.max_restarts) and not under_launcher():
        return launch(args.argv, nproc_per_node=args.nproc_per_node, nnodes=args.nnodes,
                      rdzv_endpoint=args.rdzv_endpoint, rdzv_id=args.rdzv_id,
                      max_restarts=args.max_restarts, node_rank=args.node_rank)
    if under_launcher():  # join this attempt's group before anything that could fail or take long
        from autorec.train.distributed import ensure_process_group

        ensure_process_group()
    dataset = load_data(args)
    spec = resolve_arch(args.arch, dataset.schema)
    ray_workers = args.ray_workers and not under_launcher()
    config = TrainConfig(**settings.to_kwargs())
    if ray_workers:
        from autorec.train.ray_train import train_on_ray

        full = train_on_ray(spec, args.data, parse_options(args.data_opt), config,
                            num_workers=args.ray_workers, data_path=args.data_path, address=args.ray_address,
                            storage_path=args.ray_storage, placement=args.ray_placement)
    else:
        trainer = Trainer(spec, dataset, config)
        if trainer.rank == 0 and config.resume and os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") != "0":
            _say_resume(Path(config.checkpoint_dir), trainer.world_size)
        if args.save_plan and trainer.rank == 0:
            from autorec.train.plan import save_plan

            save_plan(trainer.model.plan, trainer.world_size, args.save_plan)
        result = trainer.fit()
        if under_launcher():
            from autorec.train.distributed import leave_process_group

            leave_process_group()
        if trainer.rank != 0:  # rank 0 speaks for the run; the metrics are the same on every rank
            return 0
        full = {**result.to_dict(), "world_size": trainer.world_size, "step_losses": result.step_losses}
    summary = {"data": dataset.name, "arch": spec.name, "best_epoch": full["best_epoch"],
               "val": full["val"], "test": full["test"], "world_size": full["world_size"],
               "resumed_from": full["resumed_from"], "train_samples_per_s": full["train_samples_per_s"],
               "data_wait_share": full["data_wait_share"],
               "seconds": round(full["seconds"], 1)}
    if args.output:
        Path(args.output).write_text(json.dumps(full))
    if args.json:
        print(json.dumps(summary))
    else:
        _print_metrics(summary)
    return 0


def _say_resume(folder: Path, world_size: int) -> None:
    """One line on stderr when torchrun restarted the workers (one failed, or a node was lost)
    and the run goes on from a checkpoint: from where, written at which world size, on which."""
    from autorec.train.checkpoint_reader import read_meta
    from autorec.train.checkpoints import latest

    newest = latest(folder)
    if newest is None:
        return
    meta = read_meta(newest)
    restarts = os.environ.get("TORCHELASTIC_RESTART_COUNT")
    written = meta.get("layout", {}).get("world_size")
    print(f"autorec: restart {restarts} of the workers: resuming from {newest} (epoch "
          f"{meta.get('epoch')}, step {meta.get('global_step')}, written by {written} ranks) on "
          f"{world_size} ranks", file=sys.stderr)


def _print_metrics(summary: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{summary['arch']} on {summary['data']} (best epoch {summary['best_epoch']})")
    for column in ("split", "AUC", "logloss", "NE", "rows"):
        table.add_column(column, justify="right")
    for split in ("val", "test"):
        m = summary[split]
        table.add_row(split, f"{m['auc']:.4f}", f"{m['logloss']:.4f}", f"{m['ne']:.4f}", str(m["n"]))
    console = Console()
    console.print(table)
    console.print(f"{summary['train_samples_per_s']:,.0f} training samples/s, "
                  f"{100 * summary['data_wait_share']:.1f}% of the training time waiting for data, "
                  f"{summary['seconds']:.1f} s")
