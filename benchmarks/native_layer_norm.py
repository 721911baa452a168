"""LayerNorm over short rows on the compiled kernel (``autorec.native.layer_norm``) against
torch's CPU LayerNorm.

First Wukong's [4096, 16, 16] LayerNorm alone, forward and backward, each way in alternating
repeats; then two Trainers of each preset (Wukong normalizes D = 16 after each layer; DHEN after
its ensembles), the default and one whose steps take torch's LayerNorm (:class:`TorchNorm`), on
the same batches in alternating rounds (``benchmarks/step_ab.py``). Both arms keep Wukong's layer
on torch's ops (:class:`KernelNorm`): its own kernel (``autorec.native.wukong_layer``) normalises
inside it, and ``benchmarks/wukong_layer.py`` measures that one.

    OMP_NUM_THREADS=2 .venv/bin/python -m benchmarks.native_layer_norm [--presets wukong,dhen] [--rounds 12]

``--autocast bf16`` runs both arms under bf16 autocast (keys with ``_bf16``).

Flat keys ``native_layer_norm_alone_{native,torch}_{fwd,bwd}_ms``, ``native_layer_norm_alone_speedup``
(torch's forward + backward over the kernel's), ``native_layer_norm_<preset>_{new,before}_step_ms``
and ``native_layer_norm_<preset>_speedup`` (before over new, paired by round; with ``_min``,
``_max``), merged into ``benchmarks/results/throughput.json``.
"""

from __future__ import annotations

from typing import Any

import torch

from autorec.blocks.layout import FloatLayerNorm
from autorec.native import layer_norm as native_norm
from autorec.native import wukong_layer as native_wukong
from autorec.train.trainer import Trainer
from benchmarks.step_ab import before_after_main, native_against_torch

SHAPE = (4096, 16, 16)  # Wukong's X after each layer on the scale workload: [B, n_fm + n_lcb, D]


class KernelNorm(Trainer):
    """A Trainer whose steps take the LayerNorm kernel, Wukong's layer on torch's ops."""

    def train_step(self, batch: Any) -> Any:
        with native_wukong.disabled():
            return super().train_step(batch)


class TorchNorm(Trainer):
    """A Trainer whose steps take torch's LayerNorm (the compiled kernel off), Wukong's layer on
    torch's ops."""

    def train_step(self, batch: Any) -> Any:
        with native_norm.disabled(), native_wukong.disabled():
            return super().train_step(batch)


def alone(repeats: int, autocast: str) -> dict[str, float]:
    """The LayerNorm's forward and backward alone, each way, in alternating repeats (medians, ms);
    under ``autocast`` bf16 its input is bf16, as Wukong's layers hand it (normalised in fp32
    either way)."""
    gen = torch.Generator().manual_seed(0)
    x, upstream = torch.randn(*SHAPE, generator=gen), torch.randn(*SHAPE, generator=gen)
    if autocast == "bf16":
        x = x.bfloat16()
    return native_against_torch("native_layer_norm", FloatLayerNorm(SHAPE[-1]), x, upstream,
                                native_norm.disabled, repeats, autocast)


def main() -> None:
    if not native_norm.available():
        raise SystemExit("native_layer_norm: the kernel could not be built here (see the warning above)")
    before_after_main(__doc__, TorchNorm, "native_layer_norm", presets="wukong,dhen", autocast="off",
                      alone=alone, new=KernelNorm)


if __name__ == "__main__":
    main()
