"""Training samples/s of `autorec train` at 1, 2 and 4 processes on synthetic Criteo-like data.

Each process count is one real `autorec train --nproc-per-node N` run (torchrun, gloo on CPU or
nccl on GPU, DistributedModelParallel with torchrec's planner, fused row-wise Adagrad in
backward, Adam on the dense part) of ``--steps`` global batches of ``--batch-size`` samples;
samples/s is over the training steps only (data generation, sharding and evaluation excluded),
all ranks' samples counted. The global batch is the same at every N, so the runs do the same
work. Results print as a markdown table and go to ``--json``.

Timed run (the lead's, on a quiet machine):

    .venv/bin/python benchmarks/distributed_throughput.py --procs 1,2,4 --steps 30 --batch-size 4096

Quick check at a small size:

    .venv/bin/python benchmarks/distributed_throughput.py --procs 1,2 --steps 3 --batch-size 512 \
        --rows 10000 --num-samples 20000
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]


def run(nproc: int, args: argparse.Namespace) -> dict:
    """One `autorec train` run at ``nproc`` processes; its result dict."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.json"
        cmd = [sys.executable, "-m", "autorec.cli", "train", "--data", "synthetic",
               "--data-opt", "preset=criteo_like", "--data-opt", f"num_samples={args.num_samples}",
               "--data-opt", f"rows={args.rows}", "--arch", args.arch, "--epochs", "1",
               "--batch-size", str(args.batch_size),
               "--max-steps-per-epoch", str(args.steps), "--optimizer", "adam",
               "--nproc-per-node", str(nproc), "--dense-parallel", args.dense_parallel,
               "--json", "--output", str(out)]
        env = {**os.environ, "OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 1) // nproc))}
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            raise SystemExit(f"{nproc} processes failed:\n{proc.stderr[-3000:]}")
        return json.loads(out.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--procs", default="1,2,4", help="process counts, comma-separated")
    parser.add_argument("--steps", type=int, default=30, help="timed global batches per run")
    parser.add_argument("--batch-size", type=int, default=4096, help="global batch size")
    parser.add_argument("--num-samples", type=int, default=200_000, help="generated samples")
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows per table (26 tables)")
    parser.add_argument("--arch", default="dlrm")
    parser.add_argument("--dense-parallel", default="ddp", choices=["ddp", "fsdp"])
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else platform.processor() or "cpu"
    print(f"{args.arch}, 26 tables x {args.rows:,} rows, global batch {args.batch_size}, "
          f"{args.steps} steps, {os.cpu_count()} CPUs, {device}", flush=True)
    print("| processes | samples/s | vs 1 process | best val AUC |\n|---:|---:|---:|---:|", flush=True)
    rows, base = [], None
    for nproc in (int(p) for p in args.procs.split(",")):
        result = run(nproc, args)
        rate = result["train_samples_per_s"]
        base = base or rate
        rows.append({"processes": nproc, "samples_per_s": rate, "val_auc": result["val"]["auc"]})
        print(f"| {nproc} | {rate:,.0f} | {rate / base:.2f}x | {result['val']['auc']:.4f} |", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"config": vars(args), "device": device, "rows": rows},
                                              indent=2))


if __name__ == "__main__":
    main()
