"""Warm start: copy a supernet's weights into a derived model where they line up.

The supernet's embeddings are the widest width choice, masked to a prefix of columns, and its
projections take that prefix; so a derived table of width w is the supernet table's first w
columns, and its projection the first w input columns. The dense arch is the same module. The
interaction layers and the over-arch are named and shaped differently (max-size ops on padded
inputs) and start fresh. :func:`warm_start` copies by those leading blocks (the bilevel DNAS's
supernets); :func:`warm_embeddings` copies what a one-shot supernet's path reads, whatever its
width layout (``width_columns: own`` puts width w at its own column offset) and hash size (a
table of r rows reads the supernet table's rows [0, r), the ids folded modulo r).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn

if TYPE_CHECKING:
    from autorec.supernet.supernet import Supernet


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


@torch.no_grad()
def warm_embeddings(net: Supernet, supernet: nn.Module, model: nn.Module) -> list[str]:
    """Copy into a derived ``model`` (a RecModel, maybe wrapped in DistributedModelParallel) the
    embedding weights its path read in the supernet ``net`` (``supernet``: ``net`` itself or its
    wrapper): each table ``t_<f>`` of r rows and width w gets rows [0, r) of the supernet's
    ``t_<f>`` at width w's columns, its projection to D those columns' input weights, and the dense
    arch its weights where the shapes agree. The interaction layers and the over-arch start fresh.
    Returns the names copied; a ValueError names a table whose width is no width choice of ``net``
    or whose rows exceed the supernet table's, before anything is copied.

    Example (a supernet and a derived model built and compared: ``tests/supernet/test_warm.py``)::

        copied = warm_embeddings(training.search.supernet, training.search.model, trainer.model)
    """
    if net.row_layout != "shared":
        raise ValueError("warm_embeddings: a supernet with hash_rows: own keeps each hash size's rows "
                         "in its own block; only hash_rows: shared puts a derived table's rows first")
    source = supernet.state_dict()
    offset_of: dict[int, int] = {}
    for width, offset in zip(net.emb_widths, net.emb_offsets, strict=True):
        if width:
            offset_of.setdefault(width, offset)
    plan: list[tuple[str, torch.Tensor, torch.Tensor]] = []  # checked in full before any copy
    for name, value in model.state_dict().items():
        dst, src = _local(value), _local(source.get(name))
        if dst is None or src is None or dst.dim() != src.dim():
            continue
        table = name.startswith("sparse_arch.") and name.endswith(".weight")
        projection = name.startswith("projections.") and name.endswith(".weight")
        if table or projection:
            width = dst.shape[1]
            if width not in offset_of:
                raise ValueError(f"warm_embeddings: {name} is {width} wide, not one of the supernet's "
                                 f"widths {sorted(offset_of)}")
            columns = slice(offset_of[width], offset_of[width] + width)
            if table and dst.shape[0] > src.shape[0]:
                raise ValueError(f"warm_embeddings: {name} has {dst.shape[0]} rows, the supernet's "
                                 f"{src.shape[0]}")
            plan.append((name, dst, src[: dst.shape[0], columns] if table else src[:, columns]))
        elif name.startswith("dense_arch.") and tuple(dst.shape) == tuple(src.shape):
            plan.append((name, dst, src))
    for _, dst, src in plan:
        dst.copy_(src)
    copied = [name for name, _, _ in plan]
    return copied
