"""benchmarks/one_process.py and benchmarks/dots_bf16_out.py: the "before" arm takes the old
path (DDP over one process; fp32 dots cast by the over-arch's linear), the default arm the new
one, and both train the same model bit for bit."""

from __future__ import annotations

import torch
from torch.nn.parallel import DistributedDataParallel

import autorec.train.trainer as trainer_module
from autorec.data import load_dataset
from autorec.models import RecModel
from autorec.presets import preset
from autorec.train.trainer import TrainConfig, Trainer
from benchmarks import dots_bf16_out, one_process
from tests.ab_trainers import new_and_before


def _losses(trainer: Trainer, batches: list) -> list[float]:
    return [trainer.train_step(batch)[0] for batch in batches]


def test_one_process_before_wraps_ddp_and_trains_alike() -> None:
    shard = trainer_module.shard
    new, before, batches = new_and_before(one_process.Before, "dlrm")
    assert trainer_module.shard is shard  # put back
    assert type(new.model._dmp_wrapped_module) is RecModel
    assert isinstance(before.model._dmp_wrapped_module, DistributedDataParallel)
    assert _losses(new, batches) == _losses(before, batches)


def test_dots_bf16_out_before_keeps_fp32_dots_and_trains_alike() -> None:
    data = load_dataset("synthetic", preset="tiny", num_samples=600)
    config = TrainConfig(batch_size=64, progress=False, keep_freed_memory=False, autocast="bf16")
    runs = []
    for kind in (Trainer, dots_bf16_out.Before):
        torch.manual_seed(0)
        runs.append(kind(preset("dlrm", data.schema), data, config))
    assert [r.model.module.layers[-1].feeds_linear for r in runs] == [True, False]
    batches = list(runs[0]._batches("train", 64, True, 0))[:3]
    assert _losses(runs[0], batches) == _losses(runs[1], batches)
