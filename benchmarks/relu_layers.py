"""The MLPs' ReLU layers on the compiled backward pass (``autorec.native.relu_linear``) against
torchrec's layers (ReLU, ``threshold_backward``, the bias's column sum in ``addmm``'s backward).

First the over-arch's MLP alone at the presets' shapes on the scale workload (batch 4096,
368 -> 256 -> 128, DLRM's), forward and backward, each way in alternating repeats; then two
Trainers of each preset, the default (the kernel) and one whose steps run torchrec's layers, on
the same batches in alternating rounds (``benchmarks/step_ab.py``).

    OMP_NUM_THREADS=2 .venv/bin/python -m benchmarks.relu_layers [--presets dlrm,wukong] [--rounds 12] \
        [--autocast off]

Flat keys ``relu_layers[_bf16]_alone_{native,torch}_{fwd,bwd}_ms``,
``relu_layers[_bf16]_alone_speedup`` (torch's forward + backward over the kernel's),
``relu_layers_<preset>[_bf16]_{new,before}_step_ms`` and ``relu_layers_<preset>[_bf16]_speedup``
(before over new, paired by round; with ``_min``, ``_max``), merged into
``benchmarks/results/throughput.json``.
"""

from __future__ import annotations

from typing import Any

import torch

from autorec.blocks.mlp import ReluMLP
from autorec.native import relu_linear
from autorec.train.trainer import Trainer
from benchmarks.step_ab import before_after_main, native_against_torch

SHAPES = (4096, 368, (256, 128))  # B, the over-arch's input and its layers (the dlrm preset's)


class TorchReluLayers(Trainer):
    """A Trainer whose steps run torchrec's ReLU layers (the compiled pass off)."""

    def train_step(self, batch: Any) -> Any:
        with relu_linear.disabled():
            return super().train_step(batch)


def alone(repeats: int, autocast: str) -> dict[str, float]:
    """The over-arch's MLP forward and backward alone, each way, alternating (medians, ms)."""
    b, width, sizes = SHAPES
    gen = torch.Generator().manual_seed(0)
    mlp = ReluMLP(width, list(sizes))
    x = torch.randn(b, width, generator=gen)
    upstream = torch.randn(b, sizes[-1], generator=gen)
    if autocast == "bf16":
        upstream = upstream.to(torch.bfloat16)
    return native_against_torch("relu_layers", mlp, x, upstream, relu_linear.disabled, repeats, autocast)


def main() -> None:
    if not relu_linear.available():
        raise SystemExit("relu_layers: the kernel could not be built here (see the warning above)")
    before_after_main(__doc__, TorchReluLayers, "relu_layers", presets="dlrm,wukong", autocast="bf16",
                      alone=alone)


if __name__ == "__main__":
    main()
