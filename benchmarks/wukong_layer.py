"""Wukong's layer on the compiled kernels (``autorec.native.wukong_layer``: one pass before the
FM's MLP, one after it) against the same layer in torch's ops.

First the preset's first layer alone (F = 27 -> 16, D = 16, batch 4096), forward and backward,
each way in alternating repeats; then two Trainers of the wukong preset on the ``scale``
workload's schema (batch 4096; F = 27 then 16, D = 16): the default, and one whose steps keep the
layer on torch's ops (:class:`TorchLayer`). Both step on the same batches in alternating rounds
(``benchmarks/step_ab.py``); the figures are the medians over rounds and the median of the
rounds' ratios.

    OMP_NUM_THREADS=2 .venv/bin/python -m benchmarks.wukong_layer [--rounds 12] [--autocast bf16] [--dim 32]

Flat keys ``wukong_layer[_bf16]_alone_{native,torch}_{fwd,bwd}_ms``, ``wukong_layer[_bf16]_alone_speedup``,
``wukong_layer_wukong[_dim<D>][_bf16]_{new,before}_step_ms`` and
``wukong_layer_wukong[_dim<D>][_bf16]_speedup`` (before over new, paired by round; with ``_min``,
``_max``), merged into ``benchmarks/results/throughput.json``.
"""

from __future__ import annotations

from typing import Any

import torch

from autorec.arch import WukongConfig
from autorec.blocks.wukong import WukongLayer
from autorec.native import wukong_layer as native_wukong
from autorec.train.trainer import Trainer
from benchmarks.step_ab import before_after_main, native_against_torch

SHAPE = (4096, 27, 16)  # the preset's first layer on the scale workload: [B, 1 + 26 tables, D]


class TorchLayer(Trainer):
    """A Trainer whose steps run Wukong's layer in torch's ops (the kernels off)."""

    def train_step(self, batch: Any) -> Any:
        with native_wukong.disabled():
            return super().train_step(batch)


def alone(repeats: int, autocast: str) -> dict[str, float]:
    """The preset's first layer (n_fm = n_lcb = 8, rank 8, MLP (128,), a projecting residual)
    alone, forward and backward, each way in alternating repeats (medians, ms)."""
    torch.manual_seed(0)
    layer = WukongLayer(WukongConfig(n_fm=8, n_lcb=8, rank=8, mlp=(128,)), SHAPE[1], SHAPE[2])
    x, upstream = torch.randn(*SHAPE), torch.randn(SHAPE[0], layer.num_out, SHAPE[2])
    return native_against_torch("wukong_layer", lambda t: layer(t).float(), x, upstream,
                                native_wukong.disabled, repeats, autocast)


def main() -> None:
    if not native_wukong.available():
        raise SystemExit("wukong_layer: the kernel could not be built here (see the warning above)")
    before_after_main(__doc__, TorchLayer, "wukong_layer", presets="wukong", autocast="off", alone=alone)


if __name__ == "__main__":
    main()
