"""fp32 products at bf16 input precision (``train.fp32_matmul: bf16``) against IEEE fp32 and bf16
autocast, on each preset's training step, with each arm's share of the same fp32 roofline floor.

Three Trainers per preset on the ``scale`` workload's schema (batch 4096, the Trainer's own step):
``ieee`` (the default), ``bf16mm`` (every fp32 product, forward and backward, rounds its inputs
to bf16 and accumulates in fp32 on oneDNN's AMX / AVX512-BF16 kernels; every tensor stays fp32)
and ``autocast`` (``train.autocast: bf16``: the forward's products and activations in bf16). They
step on the same batches in alternating rounds (:mod:`benchmarks.step_ab`), so a load that comes
and goes weighs on all three alike. Each arm's floor share is the preset's roofline floor
(:mod:`benchmarks.roofline`: FLOPs over the IEEE fp32 ``torch.mm`` rate, bytes over the copy
bandwidth, both measured in this run before and after the steps, best of each) over its median
step: the issue's definition, so an arm with bf16 products can pass 1; ``_at_bf16_rate`` is the
same share against the floor at the bf16 product rate measured beside it.

    OMP_NUM_THREADS=2 .venv/bin/python -m benchmarks.fp32_matmul [--presets dlrm,wukong] [--rounds 12]

Flat keys ``fp32_matmul_<preset>_<arm>_step_ms``, ``..._floor_share``,
``..._floor_share_at_bf16_rate`` and ``fp32_matmul_<preset>_<arm>_speedup`` (ieee over the arm,
median of the rounds' ratios, with ``_min`` and ``_max``), merged into
``benchmarks/results/throughput.json``.
"""

from __future__ import annotations

import itertools
import statistics
from pathlib import Path
from typing import Any

import torch

from autorec.presets import preset
from autorec.train.trainer import TrainConfig, Trainer
from benchmarks.results_file import merge_results
from benchmarks.roofline import Rates, measure_rates, pooling_factors, step_floor
from benchmarks.step_ab import ab_parser, alternating_rounds, scale_data
from benchmarks.step_profile import best_rates

ARMS = {"ieee": {}, "bf16mm": {"fp32_matmul": "bf16"}, "autocast": {"autocast": "bf16"}}


def rates() -> tuple[Rates, Rates]:
    """The IEEE fp32 and the bf16 product rates (and copy bandwidth), measured outside any step."""
    assert torch.backends.mkldnn.matmul.fp32_precision != "bf16", "the fp32 rate must be IEEE's"
    return measure_rates(), measure_rates(dtype=torch.bfloat16)


def measure(name: str, data: Any, args: Any) -> tuple[dict[str, list[float]], Any]:
    """``name``'s three arms in alternating rounds: each arm's seconds per step by round, and the
    spec and pooling factors its floor is computed from."""
    spec = preset(name, data.schema)
    runs = {arm: Trainer(spec, data, TrainConfig(batch_size=args.batch_size, progress=False, **extra))
            for arm, extra in ARMS.items()}
    times = alternating_rounds(runs, args.rounds, args.steps)
    seen = list(itertools.islice(runs["ieee"]._batches("train", args.batch_size, True, 0),
                                 args.rounds * args.steps))  # the batches the rounds timed
    return times, (spec, pooling_factors(seen))


def figures_of(name: str, times: dict[str, list[float]], floor: tuple[Any, Any], batch_size: int,
               fp32: Rates, bf16: Rates) -> dict[str, float]:
    """Step ms, floor shares (at the fp32 and the bf16 rate) and speedups over ieee of each arm."""
    spec, factors = floor
    at_fp32, at_bf16 = (step_floor(spec, batch_size, r, factors).seconds for r in (fp32, bf16))
    out: dict[str, float] = {f"fp32_matmul_{name}_floor_ms": 1e3 * at_fp32}
    for arm, seconds in times.items():
        step = statistics.median(seconds)
        key = f"fp32_matmul_{name}_{arm}"
        out |= {f"{key}_step_ms": 1e3 * step, f"{key}_floor_share": at_fp32 / step,
                f"{key}_floor_share_at_bf16_rate": at_bf16 / step}
        if arm != "ieee":
            ratios = [i / a for i, a in zip(times["ieee"], seconds, strict=True)]
            out |= {f"{key}_speedup": statistics.median(ratios), f"{key}_speedup_min": min(ratios),
                    f"{key}_speedup_max": max(ratios)}
    return out


def main() -> None:
    parser = ab_parser(__doc__)
    parser.set_defaults(presets="dlrm,wukong,dcnv2,dhen", rounds=12)
    args = parser.parse_args()
    data = scale_data(args)
    fp32, bf16 = rates()
    measured = {}
    for name in args.presets.split(","):
        measured[name] = measure(name, data, args)
        again = rates()  # the floor is a best case: at the best rates seen over the run
        fp32, bf16 = best_rates(fp32, again[0]), best_rates(bf16, again[1])
        print(f"{name}: " + ", ".join(f"{arm} {1e3 * statistics.median(t):.1f} ms"
                                      for arm, t in measured[name][0].items()), flush=True)
    figures: dict[str, Any] = {"fp32_matmul_threads": torch.get_num_threads(),
                               "fp32_matmul_rounds": args.rounds, "fp32_matmul_steps": args.steps,
                               "fp32_matmul_matmul_gflops": fp32.matmul_flops / 1e9,
                               "fp32_matmul_matmul_bf16_gflops": bf16.matmul_flops / 1e9,
                               "fp32_matmul_bandwidth_gbs": fp32.bandwidth / 1e9}
    for name, (times, floor) in measured.items():
        figures |= figures_of(name, times, floor, args.batch_size, fp32, bf16)
    print(f"\nrates: fp32 {fp32.matmul_flops / 1e9:.0f} GFLOP/s, bf16 {bf16.matmul_flops / 1e9:.0f} GFLOP/s, "
          f"copy {fp32.bandwidth / 1e9:.1f} GB/s")
    print("| preset | arm | ms per step | speedup over ieee | floor share (fp32 floor) | at the bf16 rate |")
    print("|---|---|---|---|---|---|")
    for name in measured:
        for arm in ARMS:
            key = f"fp32_matmul_{name}_{arm}"
            speed = f"{figures[f'{key}_speedup']:.2f}" if arm != "ieee" else "1"
            print(f"| {name} | {arm} | {figures[f'{key}_step_ms']:.1f} | {speed} | "
                  f"{figures[f'{key}_floor_share']:.2f} | {figures[f'{key}_floor_share_at_bf16_rate']:.3f} |")
    merge_results(Path(args.json), figures, prefix="fp32_matmul")


if __name__ == "__main__":
    main()
