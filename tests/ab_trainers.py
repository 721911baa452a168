"""The pair of Trainers a before/after benchmark's test compares (``benchmarks/step_ab.py``)."""

from __future__ import annotations

from typing import Any

import torch

from autorec.data import load_dataset
from autorec.presets import preset
from autorec.train.trainer import TrainConfig, Trainer


def new_and_before(before: type[Trainer], name: str, steps: int = 3,
                   new: type[Trainer] = Trainer) -> tuple[Trainer, Trainer, list[Any]]:
    """A ``new`` Trainer (the default one unless given) of preset ``name`` and a ``before`` one,
    from the same seed on the tiny synthetic data, and ``steps`` batches of its loader to step
    both on."""
    data = load_dataset("synthetic", preset="tiny", num_samples=600)
    config = TrainConfig(batch_size=64, progress=False, keep_freed_memory=False)
    torch.manual_seed(0)
    fresh = new(preset(name, data.schema), data, config)
    torch.manual_seed(0)
    old = before(preset(name, data.schema), data, config)
    return fresh, old, list(fresh._batches("train", 64, True, 0))[:steps]
