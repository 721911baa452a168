"""Cost models of an ArchSpec: analytic FLOPs and bytes, and measured latency."""

from autorec.costs.analytic import (
    PRECISION_BITS,
    TRAIN_FLOPS_FACTOR,
    ArchCost,
    PartCost,
    arch_cost,
    bytes_per_element,
    measure_latency,
    tensor_bytes,
)

__all__ = ["PRECISION_BITS", "TRAIN_FLOPS_FACTOR", "ArchCost", "PartCost", "arch_cost",
           "bytes_per_element", "measure_latency", "tensor_bytes"]
