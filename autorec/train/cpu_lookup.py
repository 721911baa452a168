"""Row-wise Adagrad for fbgemm's CPU tables, applied in backward by autorec's own update.

torchrec trains a sharded table with fbgemm's TBE, which fuses the row-wise Adagrad update
into the lookup's backward. On the CPU that backward (``split_embedding_backward_codegen_
rowwise_adagrad_cpu``) transposes every table's (sample, row) pairs on its own (a radix sort and
several allocations and parallel regions per table) and then updates the rows it found. At the
scale workload's shapes (batch 4096, 19 fused tables of 16 columns) it took 16-17 ms of a 52 ms
DLRM step on an Intel Xeon with AVX512 and did not get faster with a second thread, whatever the
tables' sizes (12 ms with every table 1,000 rows, in a probe not kept; the 17 ms and the
replacement's 5 ms are ``benchmarks/embedding_update.py``'s).

:func:`use_own_update` keeps fbgemm's tables and optimizer state (the same tensors:
checkpoints, resharding and the fused optimizer's learning rate see no difference), and
replaces the backward by one pass over all tables at once, on one of two kernels:

- ``native`` (the default): :mod:`autorec.train.native_update`, one compiled pass (a stable
  radix sort of the looked-up rows, then each row's sum and update in place), and the forward
  on :mod:`autorec.train.native_lookup`'s compiled pooled lookup (the same values as fbgemm's),
  where every feature has one width and the kernels could be built; else ``torch``;
- ``torch``: fbgemm's forward; torch's ops for the update, one stable sort of the looked-up
  rows, one ``embedding_bag`` that sums each row's gradients, the row-wise Adagrad step on the
  unique rows.

Either is the same update (``tests/train/test_cpu_lookup.py`` checks both against fbgemm's after
several steps: same weights and state to float rounding).

Only a TBE whose update is exactly that is switched: fp32 weights on the CPU, exact row-wise
Adagrad with no weight decay and no gradient clipping, sum or mean pooling. A lookup with
per-sample weights or variable batch sizes goes to fbgemm's own path at that call.

Example:
    >>> import torch
    >>> from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
    ...     ComputeDevice, EmbeddingLocation, OptimType, SplitTableBatchedEmbeddingBagsCodegen)
    >>> tbe = SplitTableBatchedEmbeddingBagsCodegen(
    ...     [(10, 4, EmbeddingLocation.HOST, ComputeDevice.CPU)] * 2,
    ...     optimizer=OptimType.EXACT_ROWWISE_ADAGRAD, learning_rate=0.1)
    >>> switch(tbe)
    True
    >>> out = tbe(torch.tensor([1, 2, 2, 5]), torch.tensor([0, 1, 2, 3, 4]))  # B 2, 2 features
    >>> tuple(out.shape)
    (2, 8)
    >>> before = tbe.weights_host.detach().clone()
    >>> out.sum().backward()  # rows 1 and 2 of table 0, rows 2 and 5 of table 1 move
    >>> int((tbe.weights_host != before).view(-1, 4).any(1).sum())
    4
"""

from __future__ import annotations

import types
from typing import Any

import torch
from fbgemm_gpu.split_embedding_configs import SparseType
from fbgemm_gpu.split_table_batched_embeddings_ops_common import PoolingMode
from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
    OptimType,
    SplitTableBatchedEmbeddingBagsCodegen,
)
from torch import nn

from autorec.train import native_lookup, native_update

TBE = SplitTableBatchedEmbeddingBagsCodegen
KERNELS = ("native", "torch")


def unsupported(tbe: nn.Module) -> str | None:
    """Why ``tbe``'s update cannot be done here (None when it can)."""
    if not isinstance(tbe, TBE):
        return f"not an fbgemm SplitTableBatchedEmbeddingBagsCodegen ({type(tbe).__name__})"
    if tbe.weights_host.numel() == 0 or tbe.weights_dev.numel() > 0:
        return "tables not on the CPU (host)"
    if tbe.optimizer != OptimType.EXACT_ROWWISE_ADAGRAD:
        return f"optimizer {tbe.optimizer.value}, not exact row-wise Adagrad"
    if tbe.weights_precision != SparseType.FP32:
        return f"{tbe.weights_precision.value} weights, not fp32"
    args = tbe.optimizer_args
    if args.weight_decay != 0.0:
        return f"weight decay {args.weight_decay}"
    if args.gradient_clipping:
        return "gradient clipping"
    if tbe.pooling_mode not in (PoolingMode.SUM, PoolingMode.MEAN):
        return f"pooling {PoolingMode(tbe.pooling_mode).name}"
    return None


class _Lookup(torch.autograd.Function):
    """:func:`lookup` forward; backward: :func:`rowwise_adagrad_step` (no gradient flows on)."""

    @staticmethod
    def forward(ctx: Any, placeholder: torch.Tensor, tbe: TBE, indices: torch.Tensor,
                offsets: torch.Tensor) -> torch.Tensor:
        ctx.tbe = tbe
        ctx.save_for_backward(indices, offsets)
        return lookup(tbe, indices, offsets)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[None, None, None, None]:
        indices, offsets = ctx.saved_tensors
        rowwise_adagrad_step(ctx.tbe, indices, offsets, grad)
        return None, None, None, None


def lookup(tbe: TBE, indices: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """The pooled lookup [B, total_D]: on :mod:`autorec.train.native_lookup`'s kernel where the
    TBE's kernel is ``native`` and the tables allow it (:func:`native_ready`), else fbgemm's CPU
    forward; the same values."""
    native = tbe.__dict__.get("_autorec_kernel", "native") == "native" and native_lookup.enabled()
    if native and native_ready(tbe) and offsets.numel() <= 2**32:
        return native_lookup.pooled_lookup(tbe, indices, offsets)
    return torch.ops.fbgemm.split_embedding_codegen_forward_cpu(
        tbe.weights_host, tbe.weights_offsets, tbe.D_offsets, tbe.total_D, tbe.hash_size_cumsum,
        indices, offsets, int(tbe.pooling_mode), None, SparseType.FP32.as_int())


def rowwise_adagrad_step(tbe: TBE, indices: torch.Tensor, offsets: torch.Tensor,
                         grad: torch.Tensor, kernel: str | None = None) -> None:
    """Apply exact row-wise Adagrad to the rows of ``tbe`` that ``indices`` looked up.

    Args:
        tbe: the tables (``weights_host``, one state value per row in ``momentum1_host``).
        indices: [n] int64, the rows looked up, feature-major (all of feature 0's bags, then 1's).
        offsets: [T * B + 1] int64, bag ``t * B + b`` is ``indices[offsets[tB+b]:offsets[tB+b+1]]``.
        grad: [B, total_D] float32, the gradient of the lookup's output.
        kernel: ``native`` (:mod:`autorec.train.native_update`, where the tables allow it and
            the kernel could be built) or ``torch`` (torch's ops); None: what :func:`switch` set.

    Each row's gradient is the sum over the bags that read it (scaled by 1 / bag length under
    mean pooling); then, per row, ``state += mean(g ** 2)`` and ``w -= lr * g / (sqrt(state) + eps)``.
    """
    kernel = _known(kernel or tbe.__dict__.get("_autorec_kernel", "native"))
    with torch.no_grad():
        if kernel == "native" and native_ready(tbe) and offsets.numel() <= 2**32:
            mean = tbe.pooling_mode == PoolingMode.MEAN
            native_update.rowwise_adagrad(tbe, indices, offsets, grad, mean=mean)
        else:
            _step(tbe, indices, offsets, grad)


def _known(kernel: str) -> str:
    if kernel not in KERNELS:
        raise ValueError(f"kernel {kernel!r}: expected one of {', '.join(KERNELS)}")
    return kernel


def native_ready(tbe: TBE) -> bool:
    """Whether :mod:`autorec.train.native_update` can update ``tbe``: its kernel built, every
    feature one width with weights and state rows aligned, and rows and bags within 32 bits."""
    if native_update.library() is None:
        return False
    ready = tbe.__dict__.get("_autorec_native_ready")  # the tables' layout is fixed: once per TBE
    if ready is None:
        dims = tbe.D_offsets.diff().long()
        ready = (dims.numel() > 0 and _aligned(tbe, dims) and tbe.momentum1_host.numel() < 2**32
                 and tbe.weights_host.is_contiguous() and tbe.momentum1_host.is_contiguous())
        tbe.__dict__["_autorec_native_ready"] = ready
    return ready


def _step(tbe: TBE, indices: torch.Tensor, offsets: torch.Tensor, grad: torch.Tensor) -> None:
    T = tbe.D_offsets.numel() - 1
    B = (offsets.numel() - 1) // T
    n = indices.numel()
    if n == 0:
        return
    grad = grad.float().contiguous()
    dims = tbe.D_offsets.diff().long()
    lengths = offsets.diff()
    one_hot = n == T * B and bool((lengths == 1).all())
    if one_hot:
        bag = torch.arange(n)
    else:  # the bag of each occurrence: count the bag ends at or before it
        ends = torch.zeros(n + 1, dtype=torch.long).index_add_(0, offsets[1:], torch.ones_like(offsets[1:]))
        bag = ends[:n].cumsum(0)
    feature = bag.div(B, rounding_mode="floor")
    sample = bag - feature * B
    state_rows = tbe.momentum1_offsets.index_select(0, feature).add_(indices)
    # Group the occurrences by row: a stable sort (int32 keys sort faster; a TBE holds far fewer
    # than 2^31 rows), then each row's gradient is one bag of an embedding_bag over the
    # occurrences' gradient rows, summed in the bags' order as fbgemm sums them.
    keys = state_rows.int() if tbe.momentum1_host.numel() < 2**31 else state_rows
    keys, order = keys.sort(stable=True)
    unique, counts = torch.unique_consecutive(keys, return_counts=True)
    unique = unique.long()
    starts = counts.cumsum(0).sub_(counts)
    width = int(dims.max())
    aligned = _aligned(tbe, dims)
    if aligned:  # the gradient [B, T * D] is one D-wide row per (sample, feature)
        rows, picks = grad.view(B * T, width), (sample * T + feature).index_select(0, order)
    else:  # each occurrence reads its feature's columns, zero-padded to the widest
        cols = tbe.D_offsets[:-1].long().index_select(0, feature).add_(sample * grad.shape[1])
        valid = torch.arange(width).unsqueeze(0) < dims.index_select(0, feature).unsqueeze(1)
        flat = (cols.unsqueeze(1) + torch.arange(width)).masked_fill_(~valid, 0)
        rows, picks = grad.view(-1).index_select(0, flat.view(-1)).view(n, width).mul_(valid), order
    scale = None
    if not one_hot and tbe.pooling_mode == PoolingMode.MEAN:
        scale = lengths.index_select(0, bag).index_select(0, order).to(grad.dtype).reciprocal_()
    summed = torch.nn.functional.embedding_bag(picks, rows, starts, mode="sum", per_sample_weights=scale)
    if aligned:
        row_dim: torch.Tensor | int = width
    else:  # each unique row's width and first element in weights_host
        first_seen = order.index_select(0, starts)
        row_dim = dims.index_select(0, feature.index_select(0, first_seen))
        first = tbe.weights_offsets.index_select(0, feature.index_select(0, first_seen)).add_(
            indices.index_select(0, first_seen) * row_dim)
    mean_square = summed.square().sum(1)
    mean_square = mean_square.div_(row_dim) if isinstance(row_dim, int) else mean_square.div_(row_dim.float())
    state = tbe.momentum1_host.index_select(0, unique).add_(mean_square)
    tbe.momentum1_host.index_copy_(0, unique, state)
    step = summed.mul_((-tbe.get_learning_rate()) / state.sqrt_().add_(tbe.optimizer_args.eps)
                       .unsqueeze(1))
    if aligned:  # state row r is weights row r (unique rows: select, add, copy back)
        weights = tbe.weights_host.view(-1, width)
        weights.index_copy_(0, unique, weights.index_select(0, unique).add_(step))
    else:
        valid = torch.arange(width).unsqueeze(0) < row_dim.unsqueeze(1)
        where = (first.unsqueeze(1) + torch.arange(width))[valid]
        tbe.weights_host.index_add_(0, where, step[valid])


def _aligned(tbe: TBE, dims: torch.Tensor) -> bool:
    """Every feature D wide and its table's first weight at D x its first state row, so that
    ``weights_host`` viewed as rows of D and ``momentum1_host`` share their row numbers."""
    cached = tbe.__dict__.get("_autorec_aligned")
    if cached is None:
        width = int(dims.max())
        cached = bool((dims == width).all()) and tbe.weights_host.numel() % width == 0 and bool(
            torch.equal(tbe.weights_offsets, tbe.momentum1_offsets * width))
        tbe.__dict__["_autorec_aligned"] = cached
    return cached


def _forward(self: TBE, indices: torch.Tensor, offsets: torch.Tensor,
             per_sample_weights: torch.Tensor | None = None, **kwargs: Any) -> torch.Tensor:
    if per_sample_weights is not None or any(v is not None for v in kwargs.values()):
        return TBE.forward(self, indices, offsets, per_sample_weights, **kwargs)
    if not torch.is_grad_enabled():  # evaluation: the same lookup, nothing saved
        return lookup(self, indices.long(), offsets.long())
    self.step += 1
    return _Lookup.apply(self.placeholder_autograd_tensor, self, indices.long(), offsets.long())


def switch(tbe: nn.Module, kernel: str = "native") -> bool:
    """Train ``tbe`` with :func:`rowwise_adagrad_step` on ``kernel`` from now on; False (and
    unchanged) where :func:`unsupported` gives a reason."""
    kernel = _known(kernel)
    if unsupported(tbe) is not None:
        return False
    tbe.forward = types.MethodType(_forward, tbe)
    tbe.__dict__["_autorec_kernel"] = kernel
    return True


def restore(tbe: nn.Module) -> None:
    """Give ``tbe`` back fbgemm's own forward and backward."""
    tbe.__dict__.pop("forward", None)
    tbe.__dict__.pop("_autorec_kernel", None)


def fused_tables(model: nn.Module) -> list[nn.Module]:
    """The fbgemm TBEs of every sharded embedding collection in ``model``. torchrec keeps its
    lookups outside the module tree (``ShardedEmbeddingBagCollection._lookups`` is a plain list,
    with no public accessor in torchrec 1.x), so they are found there; each lookup's kernels
    (``_emb_modules``) expose their TBE as ``emb_module``."""
    found: list[nn.Module] = []
    for module in model.modules():
        for lookup in getattr(module, "_lookups", None) or []:
            inner = getattr(lookup, "module", lookup)  # a DDP-wrapped (replicated) lookup
            for emb in getattr(inner, "_emb_modules", []):
                tbe = getattr(emb, "emb_module", None)
                if isinstance(tbe, TBE):
                    found.append(tbe)
    return found


def use_own_update(model: nn.Module) -> int:
    """Switch every eligible TBE in ``model`` (see :func:`switch`); how many were switched."""
    return sum(switch(tbe) for tbe in fused_tables(model))
