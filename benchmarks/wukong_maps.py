"""Wukong's three maps over the feature axis in one product, against one product per module.

A Wukong layer maps X [B, F, D] over its feature axis three times: the FM projection Y [F, k],
the LCB W_L [n_lcb, F] and a projecting residual W_R [F_out, F]. With plain linears the layer
runs them as one product X^T [Y, W_L^T, W_R^T] (``WukongLayer._fused``); a quantised or hooked
linear sends it through each module. Two Trainers of the wukong preset on the ``scale``
workload's schema (batch 4096): the default, and one whose LCB and residual linears carry a
no-op forward pre-hook, which takes the per-module path (the layer's form before the change).
Both step on the same batches in alternating rounds (``benchmarks/step_ab.py``); the figures are
the medians over rounds and the median of the rounds' ratios.

    OMP_NUM_THREADS=2 .venv/bin/python -m benchmarks.wukong_maps [--rounds 8] [--autocast bf16]

Flat keys ``wukong_maps[_bf16]_{one_product,per_module}_step_ms`` and
``wukong_maps[_bf16]_speedup`` (per-module over one-product, paired by round), merged into
``benchmarks/results/throughput.json``.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import torch

from autorec.blocks.mlp import FeatureLinear
from autorec.blocks.wukong import WukongLayer
from autorec.presets import preset
from autorec.train.trainer import TrainConfig, Trainer
from benchmarks.results_file import merge_results
from benchmarks.step_ab import ab_parser, alternating_rounds, paired_speedup, scale_data


def trainer(data: Any, batch_size: int, autocast: str, per_module: bool) -> Trainer:
    """The wukong preset's Trainer; with ``per_module`` its layers take the per-module path."""
    run = Trainer(preset("wukong", data.schema), data,
                  TrainConfig(batch_size=batch_size, progress=False, autocast=autocast))
    layers = [m for m in run.model.modules() if isinstance(m, WukongLayer)]
    assert layers, "the wukong preset has no Wukong layer"
    for layer in layers:
        if per_module:
            for m in (layer.lcb, layer.residual):
                if isinstance(m, FeatureLinear):
                    m.linear.register_forward_pre_hook(lambda module, args: None)
        assert bool(layer._plain_maps()) != per_module, "the path was not the one asked for"
    return run


def main() -> None:
    parser = ab_parser(__doc__)
    parser.add_argument("--autocast", choices=("off", "bf16"), default="off")
    args = parser.parse_args()
    data = scale_data(args)
    runs = {form: trainer(data, args.batch_size, args.autocast, form == "per_module")
            for form in ("one_product", "per_module")}
    times = alternating_rounds(runs, args.rounds, args.steps)
    key = "wukong_maps" if args.autocast == "off" else f"wukong_maps_{args.autocast}"
    figures: dict[str, Any] = {f"{key}_{form}_step_ms": 1e3 * statistics.median(t)
                               for form, t in times.items()}
    ratios = [b / n for b, n in zip(times["per_module"], times["one_product"], strict=True)]
    figures[f"{key}_speedup"] = paired_speedup(times["per_module"], times["one_product"])
    figures[f"{key}_speedup_min"], figures[f"{key}_speedup_max"] = min(ratios), max(ratios)
    figures[f"{key}_rounds"] = args.rounds
    figures[f"{key}_threads"] = torch.get_num_threads()
    for name, value in figures.items():
        print(f"{name:40s} {value:.3f}" if isinstance(value, float) else f"{name:40s} {value}")
    merge_results(Path(args.json), figures, prefix=key)


if __name__ == "__main__":
    main()
