"""DLRM's interaction layout built in one buffer by ``pair_dots`` (the dense vector's gradient
added into the dots' in place), against the form before it: slice, ``cat`` and ``pad`` around
the dots, whose backward builds a zero [B, F, D] gradient for the slice and adds it to the dots'.

Two Trainers of the dlrm preset on the ``scale`` workload's schema (batch 4096; F = 27, D = 64):
the default, and one whose :class:`~autorec.blocks.dlrm.DotInteraction` runs the plain form
while it steps. Both step on the same batches in alternating rounds (``benchmarks/step_ab.py``);
the figures are the medians over rounds and the median of the rounds' ratios. The interaction
alone is timed by ``python -m benchmarks.pair_dots --no-steps``.

    OMP_NUM_THREADS=2 .venv/bin/python -m benchmarks.dot_layout [--rounds 12] [--autocast bf16] [--dim 64]

Flat keys ``dot_layout_dlrm[_dim<D>][_bf16]_{new,before}_step_ms`` and
``dot_layout_dlrm[_dim<D>][_bf16]_speedup``
(before over new, paired by round; with ``_min``, ``_max``), merged into
``benchmarks/results/throughput.json``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.nn.functional as F

from autorec.blocks.dlrm import DotInteraction
from autorec.train.trainer import Trainer
from benchmarks.step_ab import before_after_main


def plain_forward(self: DotInteraction, x: torch.Tensor | list[torch.Tensor]) -> torch.Tensor:
    """DotInteraction's forward before the layout went into ``pair_dots`` (its input whole, as
    the model gave it then)."""
    if not isinstance(x, torch.Tensor):
        x = torch.cat(list(x), dim=1)
    passthrough = x[:, : self.n_passthrough].flatten(1)
    out = F.pad(torch.cat((passthrough, self.dots(x)), dim=1), (0, self.pad))
    return out.view(-1, self.num_out, self.dim)


@contextmanager
def plain_layout() -> Iterator[None]:
    """Every DotInteraction runs :func:`plain_forward` inside the block."""
    kept = DotInteraction.forward
    DotInteraction.forward = plain_forward  # type: ignore[method-assign]
    try:
        yield
    finally:
        DotInteraction.forward = kept  # type: ignore[method-assign]


class Before(Trainer):
    """A Trainer whose steps build the interaction's layout from slice, cat and pad."""

    def train_step(self, batch: Any) -> Any:
        with plain_layout():
            return super().train_step(batch)


def main() -> None:
    before_after_main(__doc__, Before, "dot_layout", presets="dlrm", autocast="off")


if __name__ == "__main__":
    main()
