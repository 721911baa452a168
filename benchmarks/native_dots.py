"""DLRM's pairwise dots on the compiled kernel (``autorec.native.pair_dots``) against torch's path
(batched products in blocks of 512 samples, a gather and, backward, a fold with two scatters).

First the dots alone at the DLRM preset's shapes on the scale workload (B = 4096, F = 27 vectors
of D = 16, the dense vector passed through), forward and backward, each way in alternating
repeats; then two Trainers of each preset, the default (the kernel) and one whose steps take
torch's path (:class:`benchmarks.dot_blocks.TorchDots`), on the same batches in alternating
rounds (``benchmarks/step_ab.py``).

    OMP_NUM_THREADS=2 .venv/bin/python -m benchmarks.native_dots [--presets dlrm,dhen] [--rounds 12]

``--autocast bf16`` runs both arms under bf16 autocast (the kernel computes the dots of DLRM's
fp32 vectors in fp32 there, torch's path in bf16 products; keys with ``_bf16``).

Flat keys ``native_dots_alone_{native,torch}_{fwd,bwd}_ms``, ``native_dots_alone_speedup``
(torch's forward + backward over the kernel's), ``native_dots_<preset>_{new,before}_step_ms`` and
``native_dots_<preset>_speedup`` (before over new, paired by round; with ``_min``, ``_max``),
merged into ``benchmarks/results/throughput.json``.
"""

from __future__ import annotations

import torch

from autorec.blocks.gram import pair_dots
from autorec.native import pair_dots as native_dots
from benchmarks.dot_blocks import TorchDots
from benchmarks.step_ab import before_after_main, native_against_torch

SHAPES = (4096, 27, 16)  # B, F, D of the dlrm preset on the scale workload


def alone(repeats: int, autocast: str) -> dict[str, float]:
    """The dots' forward and backward alone, each way, in alternating repeats (medians, ms);
    under ``autocast`` bf16 (the fp32 input, as DLRM's, on the kernel in fp32, on torch's path in
    bf16 products)."""
    b, f, d = SHAPES
    first, second = torch.triu_indices(f, f, offset=1)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(b, f, d, generator=gen)
    upstream = torch.randn(b, d + first.numel(), generator=gen)
    return native_against_torch("native_dots", lambda t: pair_dots(t, first, second, passthrough=1), x,
                                upstream, native_dots.disabled, repeats, autocast)


def main() -> None:
    if not native_dots.available():
        raise SystemExit("native_dots: the kernel could not be built here (see the warning above)")
    before_after_main(__doc__, TorchDots, "native_dots", presets="dlrm,dhen", autocast="off", alone=alone)


if __name__ == "__main__":
    main()
