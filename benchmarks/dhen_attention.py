"""DHEN's self-attention written out for the CPU (:func:`autorec.blocks.attention.self_attention`)
against ``nn.MultiheadAttention``'s own call, the form before it.

First the attention module alone (:class:`~autorec.blocks.dhen.AttentionModule`, forward and
backward, batch 4096, D 16, two heads) at the dhen preset's two layers' inputs (27 vectors, then
the 12 its first layer's concat ensemble gives) and at 8: the min over ``--repeats`` timings,
each way in turn. Then two Trainers of the dhen preset on the ``scale`` workload's schema: the
default, and one whose attention modules call ``nn.MultiheadAttention`` while it steps, on the
same batches in alternating rounds (``benchmarks/step_ab.py``).

    OMP_NUM_THREADS=2 .venv/bin/python -m benchmarks.dhen_attention [--rounds 12] [--repeats 20] \
        [--no-steps] [--autocast bf16]

Under ``--autocast bf16`` the part alone is timed under autocast three ways: as shipped (the
attention by hand in fp32, the projection in bf16), the module's own call, and the attention by
hand in bf16 (``..._bf16_hand_bf16_ms``, and ``..._bf16_in_bf16_slowdown``: in bf16 over in
fp32), which is why :class:`~autorec.blocks.dhen.AttentionModule` keeps it in fp32.

Flat keys ``dhen_attention_alone_f<F>[_bf16]_{hand,module}_ms`` and ``..._speedup`` (module over hand),
``dhen_attention_dhen[_bf16]_{new,before}_step_ms`` and ``dhen_attention_dhen[_bf16]_speedup``
(before over new, paired by round; with ``_min``, ``_max``), merged into
``benchmarks/results/throughput.json``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from autorec.blocks import dhen
from autorec.blocks.attention import self_attention
from autorec.train.trainer import Trainer
from benchmarks.step_ab import before_after_main

INPUTS = (27, 12, 8)  # the preset's two layers' vectors, and fewer


@contextmanager
def module_attention() -> Iterator[None]:
    """Every :class:`~autorec.blocks.dhen.AttentionModule` calls its ``nn.MultiheadAttention``."""
    kept = dhen.by_hand
    dhen.by_hand = lambda mha, x: False
    try:
        yield
    finally:
        dhen.by_hand = kept


class Before(Trainer):
    """A Trainer whose attention modules call ``nn.MultiheadAttention``."""

    def train_step(self, batch: Any) -> Any:
        with module_attention():
            return super().train_step(batch)


def in_bf16(module: dhen.AttentionModule, x: torch.Tensor) -> torch.Tensor:
    """``module``'s forward with its attention by hand under the caller's autocast (in bf16)."""
    return module.project(self_attention(module.attention, x))


def alone(repeats: int, autocast: str = "off", batch: int = 4096, dim: int = 16,
          heads: int = 2) -> dict[str, float]:
    """Min ms of the attention module's forward + backward by hand and by the module (under bf16
    autocast also by hand in bf16), the ways alternating."""
    figures: dict[str, float] = {}
    bf16 = autocast == "bf16"
    for num_in in INPUTS:
        torch.manual_seed(0)
        module, x0 = dhen.AttentionModule(num_in, 4, dim, heads), torch.randn(batch, num_in, dim)
        best = {"hand": float("inf"), "module": float("inf")} | ({"hand_bf16": float("inf")} if bf16 else {})
        for _ in range(repeats):
            for way in best:
                x = x0.clone().requires_grad_()
                with module_attention() if way == "module" else contextlib.nullcontext(), \
                        torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                    start = time.perf_counter()
                    (in_bf16(module, x) if way == "hand_bf16" else module(x)).float().sum().backward()
                    best[way] = min(best[way], 1e3 * (time.perf_counter() - start))
        key = f"dhen_attention_alone_f{num_in}{'_bf16' if bf16 else ''}"
        figures |= {f"{key}_{way}_ms": ms for way, ms in best.items()}
        figures[f"{key}_speedup"] = best["module"] / best["hand"]
        if bf16:
            figures[f"{key}_in_bf16_slowdown"] = best["hand_bf16"] / best["hand"]
    return figures


def main() -> None:
    before_after_main(__doc__, Before, "dhen_attention", presets="dhen", autocast="off", alone=alone)


if __name__ == "__main__":
    main()
