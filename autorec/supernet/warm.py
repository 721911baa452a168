"""Warm start: copy a supernet's weights into a derived model where they line up.

The supernet's embeddings are the widest width choice, masked to a prefix of columns, and its
projections take that prefix; so a derived table of width w is the supernet table's first w
columns, and its projection the first w input columns. The dense arch is the same module. The
interaction layers and the over-arch are named and shaped differently (max-size ops on padded
inputs) and start fresh.
"""

from __future__ import annotations

import torch
from torch import nn


def _local(value: object) -> torch.Tensor | None:
    """The tensor behind a state-dict value: a plain tensor or the one local shard (1 process)."""
    if hasattr(value, "local_shards"):
        shards = value.local_shards()
        if len(shards) != 1 or tuple(shards[0].tensor.shape) != tuple(value.size()):
            return None  # really sharded across processes: not handled here
        return shards[0].tensor
    return value if isinstance(value, torch.Tensor) else None


@torch.no_grad()
def warm_start(supernet: nn.Module, model: nn.Module) -> list[str]:
    """Copy into ``model`` every tensor that ``supernet`` holds under the same state-dict name
    with a shape at least as large in every dimension (its leading block). Both may be wrapped in
    DistributedModelParallel. Returns the names copied.

    Example:
        >>> a, b = nn.Linear(4, 3), nn.Linear(2, 3)
        >>> warm_start(a, b), bool((b.weight == a.weight[:, :2]).all())
        (['weight', 'bias'], True)
    """
    source = supernet.state_dict()
    copied = []
    for name, value in model.state_dict().items():
        dst, src = _local(value), _local(source.get(name))
        if dst is None or src is None or dst.dim() != src.dim():
            continue
        if any(d > s for d, s in zip(dst.shape, src.shape, strict=True)):
            continue
        dst.copy_(src[tuple(slice(0, d) for d in dst.shape)])
        copied.append(name)
    return copied
