"""Format throughput: how fast a device multiplies matrices in each precision.

Two kinds of figure, never mixed:

- ``h100``: peak dense (non-sparse) matmul throughput in FLOP/s (ops/s for int8) of an NVIDIA
  H100 SXM, from NVIDIA's published figures. A time computed from them is a lower bound:
  the peak, never a measured rate.
- ``cpu``: relative step-time factors against fp32, measured on this project's 2-core CPU
  machine by ``benchmarks/precision_overhead.py`` (BENCHMARKS.md, "Emulation overhead on the
  CPU"). They are emulation costs (quantise-dequantise around fp32 kernels), not hardware
  rates, so the CPU gets no FLOP/s figure: ``FLOPs x factor`` is its "fp32-equivalent FLOPs".

Example:
    >>> round(peak_flops("h100", "bf16") / peak_flops("h100", "fp32"), 2)
    14.79
    >>> emulation_factor("mxfp4_e2m1")
    4.99
"""

from __future__ import annotations

from autorec.precision.quantisers import MX_BLOCK

# NVIDIA H100 SXM5, dense tensor-core peaks (sparsity doubles them; not used here). Source: the
# H100 Tensor Core GPU datasheet (67 / 495 / 989 / 1,979 / 1,979 TFLOPS or TOPS) and the
# "NVIDIA H100 Tensor Core GPU Architecture" whitepaper (2022), table of H100 SXM5 peaks, whose
# unrounded figures these are. "fp32" is the CUDA-core rate: the models run fp32 Linear layers
# without TF32 (torch's default), so they do not reach the tf32 row.
H100_SXM_NATIVE: dict[str, float] = {
    "fp64": 66.9e12,  # FP64 tensor core
    "fp32": 66.9e12,  # no tensor cores
    "tf32": 494.7e12,
    "bf16": 989.4e12,
    "fp16": 989.4e12,
    "fp8": 1978.9e12,  # E4M3 and E5M2
    "int8": 1978.9e12,  # TOPS
}

# Hopper has no MX matmul. Assumed here: MX elements are upcast without loss to the native
# operand (FP8 E4M3/E5M2, FP6 and FP4 all fit in FP8 E4M3 or E5M2; MX INT8's 7 significant
# bits need int8) and multiplied at its tensor rate; the shared E8M0 scale of each block of 32
# along K is applied to every 32-long partial sum on the CUDA cores: 2 FLOPs (scale, add) per
# output per block, 1/32 of the matmul's FLOPs, at the fp32 rate and not overlapped with the
# tensor cores (so this is a bound on the time, not a prediction). Effective rate:
# 1 / (1 / native + 1 / (32 x fp32)), about 1.03 PFLOP/s: MX FP4 and FP6 are no faster than
# FP8 on Hopper. Blackwell's native MX rates are out of scope (no B200 column).
_H100_OPERAND: dict[str, str] = {
    "fp32": "fp32", "bf16": "bf16", "fp16": "fp16",
    "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "fp8_e4m3_rowwise": "fp8", "fp8_e5m2_rowwise": "fp8",
    "int8": "int8",
    "mxfp8_e4m3": "fp8", "mxfp8_e5m2": "fp8", "mxfp6_e3m2": "fp8", "mxfp6_e2m3": "fp8",
    "mxfp4_e2m1": "fp8", "mxint8": "int8",
}


def _h100_rate(precision: str) -> float:
    native = H100_SXM_NATIVE[_H100_OPERAND[precision]]
    if not precision.startswith("mx"):
        return native
    scaling = MX_BLOCK * H100_SXM_NATIVE["fp32"]  # matmul FLOPs per second of block-scale work
    return 1.0 / (1.0 / native + 1.0 / scaling)


# device -> autorec precision -> peak dense matmul FLOP/s
PEAK_FLOPS: dict[str, dict[str, float]] = {"h100": {p: _h100_rate(p) for p in _H100_OPERAND}}

# Step time of the wukong preset's dense part in each format against fp32 (median of per-round
# ratios): emulation costs measured by benchmarks/precision_overhead.py on 2026-11-21 on the
# 2-core x86_64 machine, torch 2.13.0+cpu (BENCHMARKS.md, "Emulation overhead on the CPU").
CPU_EMULATION_FACTOR: dict[str, float] = {
    "fp32": 1.00, "bf16": 1.34, "fp16": 1.29,
    "fp8_e4m3": 2.40, "fp8_e5m2": 2.11, "fp8_e4m3_rowwise": 2.54, "fp8_e5m2_rowwise": 2.31,
    "int8": 2.14,
    "mxfp8_e4m3": 4.29, "mxfp8_e5m2": 3.83, "mxfp6_e3m2": 5.52, "mxfp6_e2m3": 5.26,
    "mxfp4_e2m1": 4.99, "mxint8": 4.66,
}

DEVICES = (*PEAK_FLOPS, "cpu")


def peak_flops(device: str, precision: str) -> float:
    """Peak dense matmul FLOP/s of ``device`` in ``precision`` (see the module docstring)."""
    if device == "cpu":
        raise ValueError("device 'cpu' has no peak FLOP/s table: its figures are measured emulation "
                         "factors; use emulation_factor() / ArchCost.fp32_equivalent_flops")
    if device not in PEAK_FLOPS:
        raise ValueError(f"unknown device {device!r}; expected one of {', '.join(DEVICES)}")
    rates = PEAK_FLOPS[device]
    if precision not in rates:
        raise ValueError(f"unknown precision {precision!r} for device {device!r}; expected one of "
                         f"{', '.join(rates)}")
    return rates[precision]


def emulation_factor(precision: str) -> float:
    """Measured CPU step time of ``precision`` against fp32 (emulated formats cost more)."""
    if precision not in CPU_EMULATION_FACTOR:
        raise ValueError(f"unknown precision {precision!r} for device 'cpu'; expected one of "
                         f"{', '.join(CPU_EMULATION_FACTOR)}")
    return CPU_EMULATION_FACTOR[precision]
