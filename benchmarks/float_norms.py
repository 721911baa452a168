"""LayerNorm in fp32 and X^T with a contiguous gradient (``autorec/blocks/layout.py``), against
the layers' form before them, under bf16 autocast.

Two Trainers of a preset on the ``scale`` workload's schema (batch 4096): the default, and the
form before the change: every :class:`~autorec.blocks.layout.FloatLayerNorm` turned back into a
plain ``nn.LayerNorm`` (which CPU autocast runs in bf16), and Wukong's X^T taken as
``x.transpose(1, 2).contiguous()`` (its gradient a transposed view) while that Trainer steps.
Both step on the same batches in alternating rounds (``benchmarks/step_ab.py``); the figures
are the medians over rounds and the median of the rounds' ratios.

    OMP_NUM_THREADS=2 .venv/bin/python -m benchmarks.float_norms [--presets wukong,dhen] [--rounds 12] \
        [--autocast bf16]

Flat keys ``float_norms_<preset>[_bf16]_{new,before}_step_ms`` and
``float_norms_<preset>[_bf16]_speedup`` (before over new, paired by round), merged into
``benchmarks/results/throughput.json``.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from torch import nn

import autorec.blocks.wukong as wukong_module
from autorec.blocks.layout import FloatLayerNorm
from autorec.presets import preset
from autorec.train.trainer import TrainConfig, Trainer
from benchmarks.results_file import merge_results
from benchmarks.step_ab import ab_parser, alternating_rounds, paired_speedup, scale_data


@contextmanager
def plain_transpose() -> Iterator[None]:
    """Wukong's X^T as it was taken before ``transposed``: a copy whose gradient is a view."""
    kept = wukong_module.transposed
    wukong_module.transposed = lambda x: x.transpose(1, 2).contiguous()
    try:
        yield
    finally:
        wukong_module.transposed = kept


class Before(Trainer):
    """A Trainer whose norms are plain ``nn.LayerNorm`` and whose steps take the plain X^T."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        norms = [m for m in self.model.modules() if isinstance(m, FloatLayerNorm)]
        assert norms, "the preset has no FloatLayerNorm"
        for norm in norms:
            norm.__class__ = nn.LayerNorm

    def train_step(self, batch: Any) -> Any:
        with plain_transpose():
            return super().train_step(batch)


def main() -> None:
    parser = ab_parser(__doc__)
    parser.set_defaults(presets="wukong,dhen", rounds=12)
    parser.add_argument("--autocast", choices=("off", "bf16"), default="bf16")
    args = parser.parse_args()
    data = scale_data(args)
    figures: dict[str, Any] = {}
    for name in args.presets.split(","):
        config = TrainConfig(batch_size=args.batch_size, progress=False, autocast=args.autocast)
        runs = {"new": Trainer(preset(name, data.schema), data, config),
                "before": Before(preset(name, data.schema), data, config)}
        times = alternating_rounds(runs, args.rounds, args.steps)
        key = f"float_norms_{name}" + ("" if args.autocast == "off" else f"_{args.autocast}")
        figures |= {f"{key}_{form}_step_ms": 1e3 * statistics.median(t) for form, t in times.items()}
        ratios = [b / n for b, n in zip(times["before"], times["new"], strict=True)]
        figures[f"{key}_speedup"] = paired_speedup(times["before"], times["new"])
        figures[f"{key}_speedup_min"], figures[f"{key}_speedup_max"] = min(ratios), max(ratios)
        figures[f"{key}_rounds"] = args.rounds
    figures["float_norms_threads"] = torch.get_num_threads()
    for name, value in figures.items():
        print(f"{name:44s} {value:.3f}" if isinstance(value, float) else f"{name:44s} {value}")
    merge_results(Path(args.json), figures, prefix="float_norms")


if __name__ == "__main__":
    main()
