"""The dense optimizer's fused form against torch's default, on each preset's training step.

Two Trainers per preset on the ``scale`` workload's schema (batch 4096, fused row-wise Adagrad on
the tables either way): one whose dense Adam is torch's fused kernel (what
:func:`autorec.train.records.dense_optimizer` gives on the CPU), one in torch's default form
(per tensor on the CPU). Both step on the same batches in alternating rounds; the figure is the
median over rounds of each form's round time and their ratio, so a load that comes and goes
weighs on both alike. Also the optimizer's own ``step()`` each way.

    OMP_NUM_THREADS=2 .venv/bin/python -m benchmarks.dense_optimizer [--presets dlrm,wukong] [--rounds 8]

Flat keys ``dense_fused_<preset>_step_ms``, ``dense_default_<preset>_step_ms``,
``dense_fused_<preset>_speedup`` (default over fused) and ``dense_<form>_<preset>_optimizer_ms``,
merged into ``benchmarks/results/throughput.json``.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

import torch

from autorec.presets import preset
from autorec.train import records
from autorec.train.trainer import TrainConfig, Trainer
from benchmarks.results_file import merge_results
from benchmarks.step_ab import ab_parser, alternating_rounds, scale_data


def trainer(name: str, data: Any, batch_size: int, fused: bool) -> Trainer:
    """``name``'s Trainer with its dense optimizer fused or in torch's default form."""
    saved = dict(records.FUSED_DEVICES)
    if not fused:
        records.FUSED_DEVICES.update({k: () for k in saved})
    try:
        out = Trainer(preset(name, data.schema), data, TrainConfig(batch_size=batch_size, progress=False))
    finally:
        records.FUSED_DEVICES.update(saved)
    groups = [g for g in out.optimizer.param_groups if "betas" in g]
    assert groups and all(bool(g["fused"]) == fused for g in groups), "the form was not the one asked for"
    return out


def optimizer_ms(run: Trainer) -> float:
    """The optimizers' ``step`` alone (the dense update: the tables' fused update ran in the
    backward), on the gradients of one more forward and backward; median of 5 steps on them."""
    batch = next(iter(run._batches("train", run.config.batch_size, True, 1)))
    loss, _ = run._step_loss(batch)
    run.optimizer.zero_grad()
    loss.backward()
    times = []
    for _ in range(5):
        start = time.perf_counter()
        run.optimizer.step()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def measure(name: str, data: Any, batch_size: int, rounds: int, steps: int) -> dict[str, float]:
    runs = {"fused": trainer(name, data, batch_size, True), "default": trainer(name, data, batch_size, False)}
    times = alternating_rounds(runs, rounds, steps)
    out = {f"dense_{form}_{name}_step_ms": 1e3 * statistics.median(t) for form, t in times.items()}
    out[f"dense_fused_{name}_speedup"] = (out[f"dense_default_{name}_step_ms"]
                                         / out[f"dense_fused_{name}_step_ms"])
    for form, run in runs.items():
        out[f"dense_{form}_{name}_optimizer_ms"] = optimizer_ms(run)
    return out


def main() -> None:
    args = ab_parser(__doc__).parse_args()
    data = scale_data(args)
    figures: dict[str, Any] = {"dense_threads": torch.get_num_threads(), "dense_rounds": args.rounds}
    print("| preset | fused ms/step | default ms/step | speedup | optimizer ms fused / default |")
    print("|---|---|---|---|---|")
    for name in args.presets.split(","):
        got = measure(name, data, args.batch_size, args.rounds, args.steps)
        figures.update(got)
        cells = [f"{got[f'dense_{form}_{name}_step_ms']:.1f}" for form in ("fused", "default")]
        cells.append(f"{got[f'dense_fused_{name}_speedup']:.3f}")
        cells.append(" / ".join(f"{got[f'dense_{form}_{name}_optimizer_ms']:.2f}"
                                for form in ("fused", "default")))
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)
    merge_results(Path(args.json), figures, prefix="dense")


if __name__ == "__main__":
    main()
