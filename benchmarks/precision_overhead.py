"""Step time of each precision's emulation against fp32: one training step (forward, backward,
Adam) of a preset's dense part with every dense layer in the format.

The dense part is what a precision changes: the dense arch, the interaction layers and the
over-arch of ``build_model(preset)``, fed the model's own X0 [B, F, D] from fixed MovieLens
batches (the embedding lookup is the same in every format and left out). All formats are built
before timing starts and timed in alternating rounds (``--rounds`` of ``--steps`` each), so a
slow drift of the machine falls on all of them alike; the ratio to fp32 is the median of the
per-round ratios.

    .venv/bin/python benchmarks/precision_overhead.py [--preset wukong] [--batch-size 1024]
        [--steps 10] [--rounds 5] [--formats fp32,bf16,...] [--device cpu|cuda]

On a CUDA device of compute capability >= 8.9, ``fp8_e4m3`` and ``fp8_e4m3_rowwise`` run their
forward products natively (torch._scaled_mm); their backward and every other format stay
emulated. ``--autocast-bf16`` adds a row ``bf16-autocast``: fp32 weights under
torch.autocast(bfloat16), the native bf16 baseline for such a comparison.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
import warnings
from collections.abc import Callable
from contextlib import nullcontext

import torch

from autorec.arch import PRECISIONS, ArchSpec
from autorec.data import load_dataset
from autorec.models import build_model
from autorec.precision.recipes import with_precision
from autorec.presets import preset


def dense_step(spec: ArchSpec, x0: torch.Tensor, dense: torch.Tensor, labels: torch.Tensor,
               device: torch.device, autocast: bool = False) -> Callable[[], None]:
    """One training step of ``spec``'s dense part on fixed inputs (X0 without its dense row)."""
    torch.manual_seed(0)
    model = build_model(spec).to(device)
    parts = [m for m in (model.dense_arch, model.layers, model.over_arch) if m is not None]
    optimizer = torch.optim.Adam([p for m in parts for p in m.parameters()], lr=1e-3)
    context = torch.autocast(device.type, dtype=torch.bfloat16) if autocast else nullcontext()

    def step() -> None:
        with context:
            x = x0
            if model.dense_arch is not None:
                x = torch.cat([model.dense_arch(dense).unsqueeze(1), x0], dim=1)
            logits = model.over_arch(model.layers(x).flatten(1)).squeeze(-1)
            loss = torch.nn.functional.binary_cross_entropy_with_logits(logits.float(), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--preset", default="wukong")
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=10, help="steps per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--formats", default=",".join(PRECISIONS))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--autocast-bf16", action="store_true")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    device = torch.device(args.device)
    dataset = load_dataset("movielens100k", seed=0)
    base = preset(args.preset, dataset.schema)
    batch = next(iter(dataset.loader("train", args.batch_size, shuffle=False, seed=0)))
    with torch.no_grad():
        x0 = build_model(base).embed(batch.dense_features, batch.sparse_features)
    dense, labels = batch.dense_features.to(device), batch.labels.to(device)
    x0 = x0[:, 1:] if base.n_dense else x0
    x0 = x0.to(device)
    formats = [f for f in args.formats.split(",") if f]
    if "fp32" not in formats:
        formats.insert(0, "fp32")
    steps = {f: dense_step(with_precision(base, f), x0, dense, labels, device) for f in formats}
    if args.autocast_bf16:
        steps["bf16-autocast"] = dense_step(base, x0, dense, labels, device, autocast=True)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    for step in steps.values():  # warm up: allocator, lazy init, kernels
        step()
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(args.rounds):
        for name, step in steps.items():
            sync()
            start = time.perf_counter()
            for _ in range(args.steps):
                step()
            sync()
            times[name].append((time.perf_counter() - start) / args.steps)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu"
    print(f"device: {name}, {torch.get_num_threads()} threads, torch {torch.__version__}; {args.preset} "
          f"dense part, batch {args.batch_size}, {args.rounds} rounds x {args.steps} steps")
    print("| precision | ms/step (median round) | x fp32 (median of rounds) | spread of ratios |")
    print("|---|---|---|---|")
    for name, values in times.items():
        ratios = [v / f for v, f in zip(values, times["fp32"], strict=True)]
        print(f"| {name} | {statistics.median(values) * 1e3:.1f} | {statistics.median(ratios):.2f} | "
              f"{min(ratios):.2f}-{max(ratios):.2f} |")


if __name__ == "__main__":
    main()
