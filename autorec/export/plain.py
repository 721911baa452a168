"""From a trainer's model (sharded by torchrec, maybe across processes) to a plain RecModel.

A DistributedModelParallel's state_dict holds ShardedTensors (or DTensors) for sharded tables;
:func:`gather_state_dict` assembles them into ordinary CPU tensors under the same keys, which
:func:`plain_model` loads into ``build_model(spec)``.
"""

from __future__ import annotations

import warnings

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed._shard.sharded_tensor import ShardedTensor
from torch.distributed.tensor import DTensor

from autorec.arch import ArchSpec
from autorec.export.layout import ExportError
from autorec.models import RecModel, build_model


def gather_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """``model.state_dict()`` with sharded tensors assembled into ordinary CPU tensors.

    In a multi-process run every rank must call it (gathering is collective); rank 0 gets the
    full state and the other ranks an empty dict.
    """
    distributed = dist.is_initialized() and dist.get_world_size() > 1
    rank = dist.get_rank() if distributed else 0
    out = {}
    for key, value in model.state_dict().items():
        full = _full_tensor(value, distributed, rank)
        if rank == 0:
            out[key] = full
    return out


def _full_tensor(value: torch.Tensor, distributed: bool, rank: int) -> torch.Tensor:
    if isinstance(value, ShardedTensor):
        with warnings.catch_warnings():  # torchrec 1.8 still hands out ShardedTensors, not DTensors
            warnings.filterwarnings("ignore", "Please use DTensor instead", FutureWarning)
            full = torch.empty(value.size(), dtype=value.dtype)
        if distributed:
            value.gather(dst=0, out=full if rank == 0 else None)
            return full
        for shard in value.local_shards():
            where = tuple(slice(o, o + n) for o, n in zip(shard.metadata.shard_offsets,
                                                          shard.metadata.shard_sizes, strict=True))
            full[where] = shard.tensor.detach().cpu()
        return full
    if isinstance(value, DTensor):
        return value.full_tensor().detach().cpu()
    return value.detach().cpu().clone()


def plain_model(model: nn.Module, spec: ArchSpec) -> RecModel:
    """A CPU :class:`RecModel` of ``spec`` holding ``model``'s weights (sharded or not), in
    eval mode. Collective in a multi-process run (see :func:`gather_state_dict`)."""
    state = gather_state_dict(model)
    plain = build_model(spec)
    if not dist.is_initialized() or dist.get_rank() == 0:  # the other ranks hold no state
        try:
            plain.load_state_dict(state, strict=True)
        except RuntimeError as exc:
            raise ExportError(f"the trained model's state does not fit build_model(arch): {exc}") from None
    return plain.eval()
