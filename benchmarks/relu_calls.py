"""torchrec's ReLU layers as one oneDNN call each under bf16 autocast (``autorec/blocks/relu_mlp.py``:
the product, its bias and the ReLU at once) against torchrec's ``addmm`` then ``relu``.

First the layers alone: the over-arch's MLP of the presets (256 -> 256 -> 128, batch 4096) under
bf16 autocast, forward and backward, each way in alternating repeats; then two Trainers of each
preset on the scale workload, the default and one whose steps run torchrec's layers as they are
(:func:`autorec.blocks.relu_mlp.disabled`), on the same batches in alternating rounds
(``benchmarks/step_ab.py``).

    OMP_NUM_THREADS=2 .venv/bin/python -m benchmarks.relu_calls [--rounds 12] [--presets dlrm,wukong]

Flat keys ``relu_calls_bf16_alone_{native,torch}_{fwd,bwd}_ms``, ``relu_calls_bf16_alone_speedup``
("native" is the one call), ``relu_calls_<preset>_bf16_{new,before}_step_ms`` and
``relu_calls_<preset>_bf16_speedup`` (before over new, paired by round; with ``_min``, ``_max``),
merged into ``benchmarks/results/throughput.json``.
"""

from __future__ import annotations

from typing import Any

import torch

from autorec.blocks import relu_mlp
from autorec.train.trainer import Trainer
from benchmarks.step_ab import before_after_main, native_against_torch


class TorchrecLayers(Trainer):
    """A Trainer whose steps run torchrec's ReLU layers as they are (addmm, then relu)."""

    def train_step(self, batch: Any) -> Any:
        with relu_mlp.disabled():
            return super().train_step(batch)


def alone(repeats: int, autocast: str) -> dict[str, float]:
    """The presets' over-arch MLP (256 -> 256 -> 128) alone, forward and backward, each way in
    alternating repeats (medians, ms)."""
    torch.manual_seed(0)
    mlp = relu_mlp.ReluMLP(256, [256, 128])
    x, upstream = torch.randn(4096, 256), torch.randn(4096, 128)
    return native_against_torch("relu_calls", lambda t: mlp(t).float(), x, upstream, relu_mlp.disabled,
                                repeats, autocast)


def main() -> None:
    before_after_main(__doc__, TorchrecLayers, "relu_calls", presets="dlrm,wukong", autocast="bf16",
                      alone=alone)


if __name__ == "__main__":
    main()
