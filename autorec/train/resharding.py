"""Loading a sharded checkpoint into another sharding: other world size, other plan.

Measured (DESIGN.md): ``dcp.load`` of a DistributedModelParallel state at another world size
raises nothing yet leaves the embeddings as they were. So each rank here asks
torch.distributed.checkpoint for the *whole* of every ShardedTensor (DCP assembles a plain
tensor from whatever shards were saved), then copies the rows and columns its own shards hold.
It costs one full table at a time in memory per rank, acceptable for resuming; DTensors
(FSDP2 dense parts) and plain tensors are resharded by DCP itself.

Example:
    >>> import torch
    >>> full_like_sharded({"w": torch.ones(2)})["w"].shape
    torch.Size([2])
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import torch
from torch.distributed._shard.sharded_tensor import ShardedTensor

from autorec.train.checkpoint_reader import load_state


def _map(tree: Any, leaf: Any) -> Any:
    if isinstance(tree, dict):
        return {k: _map(v, leaf) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_map(v, leaf) for v in tree]
    return leaf(tree)


def full_like_sharded(state: Any) -> Any:
    """``state`` with every ShardedTensor replaced by an empty full-size plain tensor."""
    def leaf(value: Any) -> Any:
        if isinstance(value, ShardedTensor):
            with warnings.catch_warnings():  # torchrec 1.8 still hands out ShardedTensors
                warnings.simplefilter("ignore", FutureWarning)
                return torch.empty(value.size(), dtype=value.dtype)
        return value
    return _map(state, leaf)


def _copy_shards(target: Any, full: Any) -> None:
    if isinstance(target, dict):
        for key, value in target.items():
            _copy_shards(value, full[key])
    elif isinstance(target, list):
        for value, source in zip(target, full, strict=True):
            _copy_shards(value, source)
    elif isinstance(target, ShardedTensor):
        for shard in target.local_shards():
            where = tuple(slice(o, o + n) for o, n in zip(shard.metadata.shard_offsets,
                                                          shard.metadata.shard_sizes, strict=True))
            shard.tensor.detach().copy_(full[where])


def load_resharded(state: dict[str, Any], path: str | Path) -> None:
    """Fill ``state`` (a model/optimizer state_dict tree of this rank) from the checkpoint at
    ``path``, whatever sharding wrote it. Collective: every rank calls it."""
    full = full_like_sharded(state)
    load_state(full, path)
    _copy_shards(state, full)

    def take(target: Any, source: Any) -> Any:  # non-sharded leaves: DCP loaded them into `full`
        if isinstance(target, dict):
            return {k: take(v, source[k]) for k, v in target.items()}
        if isinstance(target, list):
            return [take(v, s) for v, s in zip(target, source, strict=True)]
        return target if isinstance(target, ShardedTensor) else source

    state.update(take(state, full))
