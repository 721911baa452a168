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
from autorec.costs.throughput import CPU_EMULATION_FACTOR, PEAK_FLOPS, emulation_factor, peak_flops

__all__ = ["CPU_EMULATION_FACTOR", "PEAK_FLOPS", "PRECISION_BITS", "TRAIN_FLOPS_FACTOR", "ArchCost",
           "PartCost", "arch_cost", "bytes_per_element", "emulation_factor", "measure_latency",
           "peak_flops", "tensor_bytes"]
