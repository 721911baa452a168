"""The CPU tables' pooled lookup as one compiled pass (``autorec/native/pooled_lookup.cpp``).

:mod:`autorec.train.cpu_lookup` trains fbgemm's CPU tables with its own backward; this module
gives it the forward too: each bag's rows summed (or averaged) into the [B, T * D] output that
fbgemm's ``split_embedding_codegen_forward_cpu`` writes, the same values (each bag's rows added
in the bag's order, as fbgemm adds them), with the samples split over torch's OpenMP team and
the rows a few samples ahead prefetched (each is a cache miss in tables of hundreds of MB).
Written by hand because no library but fbgemm offers that lookup for fbgemm's layout, and its
CPU forward is 1.3x slower alone and 1.05x on the DLRM step (``python -m
benchmarks.native_lookup``); built and loaded by :mod:`autorec.native.build` (None where it
cannot be, and ``cpu_lookup`` keeps fbgemm's forward). :func:`disabled` gives fbgemm's forward
for A/B runs.

Shapes: indices [n] int64 (feature-major bags), offsets [T * B + 1] int64 -> [B, T * D] fp32.

Example:
    >>> import torch
    >>> from fbgemm_gpu.split_table_batched_embeddings_ops_training import OptimType
    >>> from fbgemm_gpu.split_table_batched_embeddings_ops_common import EmbeddingLocation
    >>> from fbgemm_gpu.split_table_batched_embeddings_ops_training import ComputeDevice
    >>> from autorec.train.cpu_lookup import TBE
    >>> one_table = [(5, 4, EmbeddingLocation.HOST, ComputeDevice.CPU)]  # 5 rows of 4
    >>> tbe = TBE(one_table, optimizer=OptimType.EXACT_ROWWISE_ADAGRAD)
    >>> with torch.no_grad():
    ...     _ = tbe.weights_host.copy_(torch.arange(20.0))  # row r holds 4r .. 4r + 3
    >>> # B 3 bags of the one feature: rows [1, 4], [4], none
    >>> pooled_lookup(tbe, torch.tensor([1, 4, 4]), torch.tensor([0, 2, 3, 3])).tolist()
    [[20.0, 22.0, 24.0, 26.0], [16.0, 17.0, 18.0, 19.0], [0.0, 0.0, 0.0, 0.0]]
"""

from __future__ import annotations

from typing import Any

import torch
from fbgemm_gpu.split_table_batched_embeddings_ops_common import PoolingMode

from autorec.native import build
from autorec.train.native_update import bags, required

SWITCH = build.Switch()
disabled = SWITCH.disabled  # inside, fbgemm's forward runs (A/B benchmarks, tests)


def library() -> Any | None:
    """The kernel's entry point, or None where it cannot be built (see :mod:`autorec.native.build`)."""
    return build.load("pooled_lookup", "autorec_pooled_lookup", build.POOLED_LOOKUP_ARGS)


def enabled() -> bool:
    """Whether lookups may run here: the kernel built and not :func:`disabled`."""
    return SWITCH.on and library() is not None


def pooled_lookup(tbe: Any, indices: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """Each bag's rows of ``tbe``'s tables pooled (sum, or mean under mean pooling): [B, T * D].

    Args:
        tbe: fbgemm's TBE with every feature one width D and ``weights_host`` row r at state
            row r (``cpu_lookup.native_ready``).
        indices: [n] int64, feature-major; offsets: [T * B + 1] int64 (bags as fbgemm's).

    Raises:
        RuntimeError: the kernel is unavailable, or an index falls outside its feature's table
            (the message names the feature, the position and the index).
    """
    fn = required(library(), "pooled-lookup")
    (features, dim, base, rows), batch, indices, offsets = bags(tbe, indices, offsets)
    out = torch.empty(batch, features * dim, dtype=torch.float32)
    bad = fn(indices.data_ptr(), offsets.data_ptr(), features, batch, base.data_ptr(), rows.data_ptr(),
             tbe.weights_host.data_ptr(), dim, int(tbe.pooling_mode == PoolingMode.MEAN), out.data_ptr(),
             torch.get_num_threads())
    if bad:
        bag = int(torch.searchsorted(offsets, bad - 1, right=True)) - 1  # the bag holding it
        feature = bag // max(batch, 1)
        raise RuntimeError(f"feature {feature}: the index at position {bad - 1} is out of bounds: "
                           f"{int(indices[bad - 1])}, its table's rows are 0 to {int(rows[feature])}")
    return out
