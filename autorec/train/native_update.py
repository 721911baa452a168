"""The CPU tables' row-wise Adagrad as one compiled pass (``autorec/native/rowwise_adagrad.cpp``).

:mod:`autorec.train.cpu_lookup` replaces fbgemm's CPU fused backward by the same update in
torch's operators: about twenty passes over the looked-up rows (sort, unique, sums, gathers,
scatters), 5-7 ms a step at the scale workload's shapes. This module does it in one C++ pass:
the rows of every table grouped at once by a stable radix sort, then each row's gradient summed
and its state and weights updated in place, split over torch's intra-op threads. Written by hand
because neither fbgemm (17 ms on this CPU; see ``cpu_lookup``) nor torch offers that kernel.
:mod:`autorec.native.build` compiles and loads it; where it cannot (no compiler,
``AUTOREC_NATIVE=0``), :func:`library` is None and ``cpu_lookup`` keeps torch's ops.

Example:
    >>> import torch
    >>> from fbgemm_gpu.split_table_batched_embeddings_ops_training import OptimType
    >>> from autorec.train.cpu_lookup import TBE
    >>> from fbgemm_gpu.split_table_batched_embeddings_ops_common import EmbeddingLocation
    >>> from fbgemm_gpu.split_table_batched_embeddings_ops_training import ComputeDevice
    >>> one_table = [(5, 4, EmbeddingLocation.HOST, ComputeDevice.CPU)]  # 5 rows of 4
    >>> tbe = TBE(one_table, optimizer=OptimType.EXACT_ROWWISE_ADAGRAD, learning_rate=0.1)
    >>> # B 3 bags: [1, 4], [4], []; each row's gradient summed over its bags, then its update
    >>> rowwise_adagrad(tbe, torch.tensor([1, 4, 4]), torch.tensor([0, 2, 3, 3]),
    ...                 torch.ones(3, 4), mean=False)
    >>> tbe.momentum1_host.tolist()  # mean(g^2): row 1 g = (1, 1, 1, 1), row 4 g = (2, 2, 2, 2)
    [0.0, 1.0, 0.0, 0.0, 4.0]
"""

from __future__ import annotations

from typing import Any

import torch

from autorec.native import build


def library() -> Any | None:
    """The kernel's entry point, or None where it cannot be built (see :mod:`autorec.native.build`)."""
    return build.load("rowwise_adagrad", "autorec_rowwise_adagrad", build.ROWWISE_ADAGRAD_ARGS)


def rowwise_adagrad(tbe: Any, indices: torch.Tensor, offsets: torch.Tensor, grad: torch.Tensor,
                    *, mean: bool) -> None:
    """Exact row-wise Adagrad on the rows ``indices`` looked up, in place in ``tbe``'s tables.

    Args:
        tbe: fbgemm's TBE with every feature the same width D and ``weights_host`` row r at state
            row r (``cpu_lookup``'s aligned case).
        indices: [n] int64, feature-major; offsets: [T * B + 1] int64 (bags as fbgemm's).
        grad: [B, T * D] float32, the gradient of the lookup's output (rows may be a slice of
            a wider tensor: read in place).
        mean: mean pooling (each occurrence's gradient scaled by 1 / its bag's length).

    Raises:
        RuntimeError: the kernel is unavailable (:func:`library` is None), or a row falls
            outside the tables.
    """
    fn = required(library(), "row-wise Adagrad")
    (features, dim, base, _), batch, indices, offsets = bags(tbe, indices, offsets)
    grad = grad.float()
    if grad.dim() != 2 or grad.stride(1) != 1:  # rows of a wider tensor are read in place
        grad = grad.contiguous()
    weights, state = tbe.weights_host, tbe.momentum1_host
    if grad.shape != (batch, features * dim) or not (weights.is_contiguous() and state.is_contiguous()):
        raise RuntimeError(f"native row-wise Adagrad: gradient {tuple(grad.shape)}, expected "
                           f"({batch}, {features * dim}), and contiguous tables")
    bad = fn(indices.data_ptr(), offsets.data_ptr(), features, batch, base.data_ptr(), grad.data_ptr(),
             grad.stride(0), dim, weights.data_ptr(), state.data_ptr(), state.numel(),
             float(tbe.get_learning_rate()), float(tbe.optimizer_args.eps), int(mean),
             torch.get_num_threads())
    if bad:
        raise RuntimeError(f"index {int(indices[bad - 1])} (position {bad - 1}) is out of bounds: "
                           f"its row falls outside the tables' {state.numel()} rows")


def required(fn: Any | None, what: str) -> Any:
    """``fn``, a kernel's entry point; a RuntimeError naming ``what`` where it is None."""
    if fn is None:
        raise RuntimeError(f"the native {what} kernel is unavailable (see the log)")
    return fn


Layout = tuple[int, int, torch.Tensor, torch.Tensor]  # T, D, first state row [T], table rows [T]


def bags(tbe: Any, indices: torch.Tensor,
         offsets: torch.Tensor) -> tuple[Layout, int, torch.Tensor, torch.Tensor]:
    """(:func:`layout`, the batch B, indices and offsets as contiguous int64) for a kernel call."""
    shape = layout(tbe)
    return shape, (offsets.numel() - 1) // shape[0], indices.long().contiguous(), offsets.long().contiguous()


def layout(tbe: Any) -> Layout:
    """(T features, their width D, each feature's first state row [T] int64, the rows of each
    feature's table [T] int64), read once per TBE (its layout is fixed) rather than every step."""
    cached = tbe.__dict__.get("_autorec_native_layout")
    if cached is None:
        features = tbe.D_offsets.numel() - 1
        dim = int(tbe.D_offsets[1] - tbe.D_offsets[0])
        # fbgemm's rows_per_table holds one entry per feature, its table's rows (a feature sharing
        # a table repeats them; hash_size_cumsum does not give them there)
        cached = (features, dim, tbe.momentum1_offsets[:features].long().contiguous(),
                  tbe.rows_per_table[:features].long().contiguous())
        tbe.__dict__["_autorec_native_layout"] = cached
    return cached
