"""DLRM's pairwise dots: the indexing form (what torchrec runs) against ``pair_dots``; DLRM's
whole layout (the dense vector passed through, the dots, the pad) from slice, cat and pad around
``pair_dots`` against ``pair_dots`` building it in one buffer; and the two DLRM training steps
of ``benchmarks/train_throughput.py`` in one loop each, with their costliest operators.

    .venv/bin/python -m benchmarks.pair_dots [--batch-size 4096] [--repeats 20] [--steps 10] [--no-steps]
    # -> ms of the dots' and the layout's forward + backward each way (min of --repeats,
    #    alternating), then each DLRM step's ms over --steps and torch.profiler's top
    #    operators (prints only)
"""

from __future__ import annotations

import argparse
import logging
import time
import warnings
from collections.abc import Callable

import torch
from torch.profiler import ProfilerActivity, profile

from autorec.blocks.gram import pair_dots


def dots_ms(batch: int, num_in: int, dim: int, repeats: int) -> dict[str, float]:
    """Min ms of forward + backward (into a fixed linear read-out) of each form, alternating."""
    first, second = torch.triu_indices(num_in, num_in, offset=1)
    pad = -(dim + first.numel()) % dim

    def plain_layout(x: torch.Tensor) -> torch.Tensor:  # DotInteraction's forward before 2026-12-06
        flat = torch.cat((x[:, :1].flatten(1), pair_dots(x, first, second)), dim=1)
        return torch.nn.functional.pad(flat, (0, pad))

    forms: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
        "indexing": lambda x: torch.bmm(x, x.transpose(1, 2))[:, first, second],
        "pair_dots": lambda x: pair_dots(x, first, second),
        "layout_plain": plain_layout,
        "layout_fused": lambda x: pair_dots(x, first, second, passthrough=1, pad=pad)}
    x0, readout = torch.randn(batch, num_in, dim), torch.randn(dim + first.numel() + pad, 8)
    best = dict.fromkeys(forms, float("inf"))
    for _ in range(repeats):
        for name, form in forms.items():
            x = x0.clone().requires_grad_()
            start = time.perf_counter()
            out = form(x)
            (out @ readout[: out.shape[1]]).sum().backward()
            best[name] = min(best[name], 1e3 * (time.perf_counter() - start))
    return best


def step_loops(batch_size: int, steps: int) -> None:
    """torchrec's DLRM step and autorec's, on train_throughput's data and sizes, one loop each."""
    from autorec.data import load_dataset
    from autorec.presets import preset
    from autorec.train.trainer import TrainConfig, Trainer
    from benchmarks.train_throughput import reference_step

    data = load_dataset("synthetic", preset="criteo_like", rows=1_000_000,
                        num_samples=max(10 * batch_size, 10_000) * 10 // 8)
    batches = [b for b, _ in zip(data.batches("train", batch_size, shuffle=True), range(steps), strict=False)]
    config = TrainConfig(batch_size=batch_size, progress=False)
    spec = preset("dlrm", data.schema, dim=64)
    for name, make in (("torchrec DLRM", lambda: reference_step(spec, config.dense_lr, config.embedding_lr,
                                                                     config.dense_weight_decay)),
                       ("autorec dlrm", lambda: Trainer(spec, data, config).train_step)):
        step = make()
        for batch in batches[:3]:
            step(batch)
        start = time.perf_counter()
        for batch in batches:
            step(batch)
        ms = 1e3 * (time.perf_counter() - start) / len(batches)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for batch in batches[:4]:
                step(batch)
        top = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)[:6]
        ops = "; ".join(f"{e.key} {e.self_cpu_time_total / 4e3:.1f}" for e in top)
        print(f"{name}: {ms:.1f} ms/step; top operators, ms per step: {ops}", flush=True)
        del step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch-size", type=int, default=4096)
    parser.add_argument("--num-in", type=int, default=27, help="F: the dense vector and 26 features")
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--no-steps", action="store_true", help="only the dots")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    logging.getLogger().setLevel(logging.ERROR)
    best = dots_ms(args.batch_size, args.num_in, args.dim, args.repeats)
    print(f"dots forward + backward, B {args.batch_size}, F {args.num_in}, D {args.dim}, "
          f"{torch.get_num_threads()} threads: indexing {best['indexing']:.1f} ms, "
          f"pair_dots {best['pair_dots']:.1f} ms ({best['indexing'] / best['pair_dots']:.2f}x); "
          f"the layout with the dense vector passed through: slice + cat + pad "
          f"{best['layout_plain']:.1f} ms, in one buffer {best['layout_fused']:.1f} ms "
          f"({best['layout_plain'] / best['layout_fused']:.2f}x)", flush=True)
    if not args.no_steps:
        step_loops(args.batch_size, args.steps)


if __name__ == "__main__":
    main()
