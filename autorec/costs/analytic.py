"""Analytic costs of an ArchSpec: FLOPs, parameters and bytes, and a measured latency.

FLOPs come from ``torch.utils.flop_counter.FlopCounterMode`` over one forward pass of the
dense part of the model (dense arch, feature projections, interaction layers, over-arch)
built on the meta device with batch size 1, so nothing is allocated and the count follows
the modules exactly as ``build_model`` builds them. Like every FLOP counter of its kind it
counts matrix products (mm, addmm, bmm, convolution, attention) at 2 FLOPs per
multiply-add; element-wise work, normalisation and the embedding lookups are left out (the
lookups are memory-bound and costed in bytes instead).

Bytes follow the precision of each part (see :func:`bytes_per_element`). Inside a layer whose
``precision`` is not fp32, the matrices (parameters of 2 or more dimensions) take that
precision; biases, norm scales and other vectors stay fp32, as quantised layers keep them.
The dense arch and over-arch take ``dense_arch_precision`` / ``over_arch_precision``; the
feature projections stay fp32.

Format throughput (:mod:`autorec.costs.throughput`): :meth:`ArchCost.compute_time` divides each
part's forward FLOPs by a device's peak dense matmul rate in the part's precision (seconds per
sample, a lower bound); on the CPU, whose formats are emulated,
:attr:`ArchCost.fp32_equivalent_flops` weights each part's FLOPs by the format's measured
emulation overhead instead.

Example:
    >>> from autorec.arch import ArchSpec, TableSpec
    >>> spec = ArchSpec(dim=4, tables=(TableSpec(name="t", features=("f",), num_embeddings=10, dim=4),),
    ...                 over_arch=(8,))
    >>> cost = arch_cost(spec)
    >>> cost.forward_flops == 2 * (4 * 8 + 8 * 1)  # over-arch: Linear(4, 8), Linear(8, 1)
    True
    >>> cost.embedding_bytes, cost.embedding_lookup_bytes
    (160, 16.0)
"""

from __future__ import annotations

import dataclasses
import functools
import math
import statistics
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from autorec.arch import ArchSpec, BlockConfig, TableSpec
from autorec.costs.throughput import emulation_factor, peak_flops

# Storage bits per element. MX formats also store one shared 8-bit scale per block of 32.
PRECISION_BITS: dict[str, float] = {
    "fp32": 32, "bf16": 16, "fp16": 16,
    "fp8_e4m3": 8, "fp8_e5m2": 8, "mxfp8_e4m3": 8, "mxfp8_e5m2": 8,
    "mxfp6_e3m2": 6, "mxfp6_e2m3": 6, "mxfp4_e2m1": 4,
    "mxint8": 8, "int8": 8, "fp8_e4m3_rowwise": 8, "fp8_e5m2_rowwise": 8,
}
MX_BLOCK = 32
TRAIN_FLOPS_FACTOR = 3  # backward costs about twice the forward: grads w.r.t. inputs and weights


def bytes_per_element(precision: str) -> float:
    """Storage bytes per element of ``precision``, the MX block scale included.

    Example:
        >>> bytes_per_element("bf16"), bytes_per_element("mxfp4_e2m1")
        (2.0, 0.53125)
    """
    if precision not in PRECISION_BITS:
        raise ValueError(f"unknown precision {precision!r}; expected one of {', '.join(PRECISION_BITS)}")
    scale_bits = 8 / MX_BLOCK if precision.startswith("mx") else 0.0
    return (PRECISION_BITS[precision] + scale_bits) / 8


def tensor_bytes(numel: int, precision: str) -> int:
    """Bytes to store ``numel`` elements in ``precision``: packed bits rounded up to whole
    bytes, plus one scale byte per started block of 32 for MX formats."""
    if precision not in PRECISION_BITS:
        raise ValueError(f"unknown precision {precision!r}; expected one of {', '.join(PRECISION_BITS)}")
    scales = math.ceil(numel / MX_BLOCK) if precision.startswith("mx") else 0
    return math.ceil(numel * PRECISION_BITS[precision] / 8) + scales


@dataclass(frozen=True)
class PartCost:
    """The cost of one dense part of a model, per sample.

    ``name`` is the attribute path in :class:`~autorec.models.RecModel` (``dense_arch``,
    ``projections``, ``layers.0``, ..., ``over_arch``); ``kind`` the block kind or ``mlp``.
    """

    name: str
    kind: str
    precision: str
    forward_flops: int
    params: int
    bytes: int


@dataclass(frozen=True)
class ArchCost:
    """Analytic costs of an ArchSpec; FLOPs and lookup bytes are per sample.

    Attributes:
        forward_flops: dense compute of one forward pass (matrix products, 2 per multiply-add).
        train_flops: forward + backward, estimated as ``TRAIN_FLOPS_FACTOR`` (3) x forward.
        dense_params, dense_bytes: every parameter outside the embedding tables.
        embedding_params, embedding_bytes: rows x dim of every table, at the table's precision.
        embedding_lookup_bytes: embedding rows read per sample: dim x bytes x ids, summed over
            features (ids per sample = the feature's mean pooling factor, 1 by default).
        parts: the dense parts in model order (with DMT towers, ``towers`` holds every tower
            module).
        exchange_bytes: fp32 bytes per sample that leave the ranks holding the tables (forward;
            the backward returns as many): every pooled embedding (F x D x 4) for a flat model,
            only the tower outputs (K x n_out x D x 4) with towers. Under table-wise sharding on
            W ranks, (W - 1) / W of them cross ranks (autorec.towers.sharding).
    """

    forward_flops: int
    train_flops: int
    dense_params: int
    dense_bytes: int
    embedding_params: int
    embedding_bytes: int
    embedding_lookup_bytes: float
    parts: tuple[PartCost, ...] = ()
    exchange_bytes: float = 0.0

    @property
    def params(self) -> int:
        return self.dense_params + self.embedding_params

    @property
    def bytes(self) -> int:
        return self.dense_bytes + self.embedding_bytes

    def compute_time(self, device: str = "h100") -> float:
        """Seconds of dense forward compute per sample on ``device`` at its peak: the sum over
        parts of FLOPs / peak FLOP/s in the part's precision (``throughput.PEAK_FLOPS``)."""
        return sum(p.forward_flops / peak_flops(device, p.precision) for p in self.parts)

    @property
    def fp32_equivalent_flops(self) -> float:
        """Forward FLOPs per sample weighted by the CPU's measured emulation overhead of each
        part's precision (``throughput.CPU_EMULATION_FACTOR``; fp32 counts 1)."""
        return sum(p.forward_flops * emulation_factor(p.precision) for p in self.parts)

    def summary(self) -> dict[str, float]:
        """The costs a study records and optimises, by their names there (``flops`` is forward
        FLOPs per sample, ``params_bytes`` the dense bytes, ...); the supernet's cost metrics
        use the same names."""
        return {"flops": self.forward_flops, "train_flops": self.train_flops,
                "params_bytes": self.dense_bytes, "embedding_bytes": self.embedding_bytes,
                "dense_params": self.dense_params, "embedding_params": self.embedding_params,
                "embedding_lookup_bytes": self.embedding_lookup_bytes,
                "compute_time_h100": self.compute_time("h100"), "exchange_bytes": self.exchange_bytes}

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict: every field, the totals, and ``parts`` as a list of dicts."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "parts"}
        out["params"], out["bytes"] = self.params, self.bytes
        out["parts"] = [dataclasses.asdict(p) for p in self.parts]
        return out


def arch_cost(spec: ArchSpec, pooling_factors: Mapping[str, float] | None = None) -> ArchCost:
    """FLOPs, parameters and bytes of ``spec`` (see the module docstring for what counts).

    Args:
        spec: the architecture.
        pooling_factors: mean ids per sample of each sparse feature (multi-hot features read
            more rows); features left out read one row per sample.
    """
    parts = _dense_parts(spec)
    forward = sum(p.forward_flops for p in parts)
    embedding_params = sum(t.num_embeddings * t.dim for t in spec.tables)
    embedding_bytes = sum(tensor_bytes(t.num_embeddings * t.dim, t.precision) for t in spec.tables)
    factors = _pooling_factors(spec, pooling_factors)
    lookup = sum(factors[f] * t.dim * bytes_per_element(t.precision)
                 for t in spec.tables for f in t.features)
    return ArchCost(forward_flops=forward, train_flops=TRAIN_FLOPS_FACTOR * forward,
                    dense_params=sum(p.params for p in parts), dense_bytes=sum(p.bytes for p in parts),
                    embedding_params=embedding_params, embedding_bytes=embedding_bytes,
                    embedding_lookup_bytes=float(lookup), parts=parts,
                    exchange_bytes=float(_exchanged_vectors(spec) * spec.dim * 4))


def probe_tables(num: int, dim: int) -> tuple[TableSpec, ...]:
    """``num`` one-row tables of width ``dim``: the inputs of a probe spec that costs one part
    alone (a layer on ``num`` vectors, the over-arch on their flattened width)."""
    return tuple(TableSpec(name=f"p{j}", features=(f"p{j}",), num_embeddings=1, dim=dim) for j in range(num))


def layer_part(config: BlockConfig, num_in: int, dim: int) -> PartCost:
    """The cost of one interaction layer alone, taking [B, num_in, dim].

    Example:
        >>> from autorec.arch import DotConfig
        >>> layer_part(DotConfig(), 4, 8).kind
        'dlrm'
    """
    spec = ArchSpec(dim=dim, tables=probe_tables(num_in, dim), layers=(config,), over_arch=(1,))
    return next(p for p in arch_cost(spec).parts if p.name == "layers.0")


def _exchanged_vectors(spec: ArchSpec) -> int:
    """Vectors per sample that leave the embedding side: one per feature, or K x n_out."""
    if spec.towers is None:
        return len(spec.feature_names)
    return spec.towers.num_towers * spec.towers.n_out


def _pooling_factors(spec: ArchSpec, given: Mapping[str, float] | None) -> dict[str, float]:
    factors = dict.fromkeys(spec.feature_names, 1.0)
    for name, value in (given or {}).items():
        if name not in factors:
            raise ValueError(f"pooling_factors: unknown feature {name!r}; the architecture has "
                             f"{', '.join(spec.feature_names)}")
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"pooling_factors[{name!r}]: expected a finite number >= 0, got {value!r}")
        factors[name] = float(value)
    return factors


class _PooledStub(nn.Module):
    """Stands in for the EmbeddingBagCollection: zero pooled embeddings [B, sum of table dims]."""

    def __init__(self, spec: ArchSpec) -> None:
        super().__init__()
        self.keys = list(spec.feature_names)
        self.dims = [t.dim for t in spec.tables for _ in t.features]

    def forward(self, batch_size: int) -> Any:
        from torchrec.sparse.jagged_tensor import KeyedTensor

        values = torch.zeros(batch_size, sum(self.dims), device="meta")
        return KeyedTensor(keys=self.keys, length_per_key=self.dims, values=values)


@functools.lru_cache(maxsize=1024)
def _dense_parts(spec: ArchSpec) -> tuple[PartCost, ...]:
    """Per-part FLOPs and parameters of ``spec``'s dense model, counted once per spec."""
    from autorec.models import build_model

    with torch.device("meta"):
        model = build_model(spec)
    model.sparse_arch = _PooledStub(spec)  # RecModel.embed calls it with the "KJT": here B = 1
    model.folded = {}  # hashed tables fold ids before the lookup: no dense compute, nothing to fold
    # Training mode keeps nn.MultiheadAttention off its fused inference kernel, which the
    # counter does not know; there is no dropout or batch norm to make the modes differ.
    model.train()
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(torch.zeros(1, spec.n_dense, device="meta"), 1)
    counts = counter.get_flop_counts()
    root = type(model).__name__

    def flops(name: str) -> int:
        # Counts nest (a module's include its children's). A container never called itself,
        # like the projections' ModuleDict, is the sum of its direct children.
        prefix = f"{root}.{name}"
        if prefix in counts:
            return int(sum(counts[prefix].values()))
        return int(sum(sum(ops.values()) for key, ops in counts.items()
                       if key.startswith(f"{prefix}.") and "." not in key[len(prefix) + 1:]))

    def part(name: str, module: nn.Module | None, kind: str, precision: str = "fp32") -> PartCost:
        params = list(module.parameters()) if module is not None else []
        size = sum(p.numel() for p in params)
        nbytes = sum(tensor_bytes(p.numel(), precision if p.dim() >= 2 else "fp32") for p in params)
        return PartCost(name, kind, precision, flops(name), size, nbytes)

    parts = [part("dense_arch", model.dense_arch, "mlp", spec.dense_arch_precision),
             part("projections", model.projections, "linear")]
    if spec.towers is not None:
        parts.append(part("towers", model.towers, "towers", spec.towers.module.precision))
    parts += [part(f"layers.{i}", block, config.kind, config.precision)
              for i, (block, config) in enumerate(zip(model.layers, spec.layers, strict=True))]
    parts.append(part("over_arch", model.over_arch, "mlp", spec.over_arch_precision))
    total = int(counter.get_total_flops())
    if sum(p.forward_flops for p in parts) != total:  # a matmul outside every part: count it
        raise RuntimeError(f"FLOPs of the parts ({sum(p.forward_flops for p in parts)}) do not add up "
                           f"to the model's ({total}); a new part of RecModel needs costing")
    return tuple(p for p in parts if p.params or p.forward_flops or p.name.startswith("layers"))


def measure_latency(model_or_spec: nn.Module | ArchSpec, batch: Any, repeats: int = 20,
                    warmup: int = 3) -> float:
    """Median wall-clock seconds of one inference forward pass over ``batch``.

    Args:
        model_or_spec: a model called as ``model(dense, sparse)`` (a RecModel, or a trainer's
            DistributedModelParallel), or an ArchSpec to build freshly initialised on the CPU.
        batch: a :class:`~torchrec.datasets.utils.Batch`; moved to the model's device.
        repeats: timed passes; the median is returned.
        warmup: untimed passes first (allocator, caches, lazy init).
    """
    if repeats < 1 or warmup < 0:
        raise ValueError(f"expected repeats >= 1 and warmup >= 0, got {repeats} and {warmup}")
    if isinstance(model_or_spec, ArchSpec):
        from autorec.models import build_model

        model: nn.Module = build_model(model_or_spec)
    else:
        model = model_or_spec
    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    batch = batch.to(device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    was_training = model.training
    model.eval()
    times = []
    try:
        with torch.no_grad():
            for i in range(warmup + repeats):
                sync()
                start = time.perf_counter()
                model(batch.dense_features, batch.sparse_features)
                sync()
                if i >= warmup:
                    times.append(time.perf_counter() - start)
    finally:
        model.train(was_training)
    return statistics.median(times)
