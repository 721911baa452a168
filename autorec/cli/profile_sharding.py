"""``autorec profile sharding``: measure random shards with the real kernels into a profile file.

    autorec profile sharding --out cost_models/cpu [--shards 400] [--world-size 2]
        [--batch-size 1024] [--repeats 5] [--comm-repeats 15] [--device cpu|cuda] [--seed 0]
        [--max-tables 40] [--max-rows 1e6] [--max-shard-mb 384] [--chunk 50]
        [--profiles-name profiles.jsonl]

Shards are measured in chunks of ``--chunk``; each chunk's profiles are appended to
``<out>/profiles.jsonl`` as soon as its communication run is done, so an interrupted run keeps
what it measured. Fit the cost model on the file with ``benchmarks/sharding_cost_model.py``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from autorec.cli.common import UsageError, add_device_arg, require_counts


def add_parser(group: Any) -> None:
    """Register ``sharding`` on the CLI's ``profile`` subcommands."""
    parser = group.add_parser("sharding", help="forward, backward and comm cost of embedding shards")
    parser.add_argument("--out", help="directory of profiles.jsonl (appended to; default "
                                      "cost_models/<device>)")
    parser.add_argument("--shards", type=int, default=400, help="random shards to measure")
    parser.add_argument("--world-size", type=int, default=2, help="processes of the comm measurement")
    parser.add_argument("--batch-size", type=int, default=1024, help="samples per step")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per shard (min taken)")
    parser.add_argument("--comm-repeats", type=int, default=15,
                        help="timed all-to-all rounds per shard (min taken)")
    add_device_arg(parser, "--device", "cuda: GPU kernels and NCCL (untested on this project's CPU machines)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-tables", type=int, default=40, help="most tables in one shard")
    parser.add_argument("--max-rows", type=float, default=1e6,
                        help="largest table drawn (rows log-uniform from 1000; default 1e6)")
    parser.add_argument("--profiles-name", default="profiles.jsonl",
                        help="file name under --out (default profiles.jsonl)")
    parser.add_argument("--max-shard-mb", type=int, default=384, help="most memory of one shard")
    parser.add_argument("--chunk", type=int, default=50, help="shards per comm run and file append")
    parser.set_defaults(func=cmd_profile_sharding)


def cmd_profile_sharding(args: argparse.Namespace) -> int:
    import torch

    from autorec.sharding.profiler import append_profiles, profile_shards, random_shards

    require_counts(args, positive=["shards", "world_size", "batch_size", "repeats", "comm_repeats",
                                   "max_tables", "max_shard_mb", "chunk"])
    if args.max_rows < 1000:
        raise UsageError(f"--max-rows: expected at least 1000, got {args.max_rows:g}")
    if args.world_size < 2:
        raise UsageError(f"--world-size: communication needs at least 2 processes, got {args.world_size}")
    if args.batch_size % args.world_size:
        raise UsageError(f"--batch-size {args.batch_size} must divide by --world-size {args.world_size}")
    if args.device == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda: no CUDA device is available here")
    torch.set_num_threads(1)
    shards = random_shards(args.shards, args.seed, max_tables=args.max_tables,
                           rows_range=(1e3, args.max_rows), max_shard_bytes=args.max_shard_mb << 20)
    out = Path(args.out or f"cost_models/{args.device}") / args.profiles_name
    for start in range(0, len(shards), args.chunk):
        chunk = shards[start:start + args.chunk]
        profiles = profile_shards(chunk, batch_size=args.batch_size, repeats=args.repeats,
                                  comm_repeats=args.comm_repeats, world_size=args.world_size,
                                  device=args.device,
                                  seed=args.seed * 1000003 + start, log=True)
        append_profiles(out, profiles)
        print(f"{start + len(chunk)}/{len(shards)} shards measured, appended to {out}",
              file=sys.stderr, flush=True)
    return 0
