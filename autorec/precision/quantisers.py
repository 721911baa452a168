"""Quantisers: one base class, one registry, every tensor format autorec emulates.

A quantiser maps a float tensor to the float32 values its format stores (quantise, then
dequantise: "fake quantisation"), grouping elements for their scales along ``axis``, the
reduction axis of the matrix product that consumes the tensor:

- ``fp32``: the identity.
- ``bf16``, ``fp16``: torch's round-to-nearest-even casts (fp16 saturates at 65504).
- ``fp8_e4m3``, ``fp8_e5m2``, ``int8``: one float32 scale per tensor, amax / max_normal.
- ``fp8_e4m3_rowwise``, ``fp8_e5m2_rowwise``: one scale per row (every slice along ``axis``),
  as ``torch._scaled_mm``'s row-wise scaling takes them.
- ``mxfp8_e4m3``, ``mxfp8_e5m2``, ``mxfp6_e3m2``, ``mxfp6_e2m3``, ``mxfp4_e2m1``, ``mxint8``:
  OCP MX v1.0, blocks of 32 along ``axis`` (the last one zero-padded) sharing an E8M0 scale
  X = 2^(floor(log2(amax)) - emax_elem), clamped to [2^-127, 2^127]. A block holding NaN or Inf
  gets the NaN scale, so all its elements read NaN; an all-zero block gets 2^-127 and stays 0.
  Elements round to nearest even and saturate: with this scale the block's amax lands in
  [2^emax, 2^(emax+1)), above max_normal for some values (E2M1: 6 < 8), and those clip.

Example:
    >>> q = QUANTISERS["mxfp4_e2m1"]
    >>> x = torch.tensor([[0.3, 6.5, -1.2, 0.25]])
    >>> q.quantise(x)  # amax 6.5: scale 2^(2 - 2) = 1; 6.5 saturates to 6
    tensor([[ 0.5000,  6.0000, -1.0000,  0.0000]])
    >>> q.storage_bits
    4.25
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch
import torch.nn.functional as F

from autorec.precision.formats import (
    ELEMENTS,
    SCALE_EMAX,
    SCALE_EMIN,
    ElementFormat,
    e8m0_encode,
    exp2_int,
    floor_log2,
)

MX_BLOCK = 32


class Quantiser(ABC):
    """Fake quantisation to one tensor format.

    Subclasses set ``name`` and ``storage_bits`` (bits per element, shared scales included)
    and implement :meth:`_quantise` on a float32 tensor whose last axis is the scaling axis.
    """

    name: str
    storage_bits: float

    def quantise(self, x: torch.Tensor, axis: int = -1) -> torch.Tensor:
        """``x`` as this format stores it, as float32 of the same shape.

        Args:
            x: any float tensor; on the meta device it passes through (for FLOP counting).
            axis: the reduction axis the scales group along (ignored by per-tensor formats).
        """
        x = x.to(torch.float32)
        if x.device.type == "meta" or x.numel() == 0:
            return x
        return self._quantise(x.movedim(axis, -1)).movedim(-1, axis)

    def saturated(self, x: torch.Tensor, axis: int = -1) -> float:
        """Share of the scale groups (blocks, rows, or the tensor) in which some finite
        element clips at the format's largest value (0.0 for formats scaled by amax)."""
        return 0.0

    @abstractmethod
    def _quantise(self, x: torch.Tensor) -> torch.Tensor: ...

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class Identity(Quantiser):
    """fp32: the tensor as it is."""

    name, storage_bits = "fp32", 32.0

    def _quantise(self, x: torch.Tensor) -> torch.Tensor:
        return x


class Cast(Quantiser):
    """A torch dtype (bf16, fp16): torch's own round-to-nearest-even cast, saturating."""

    def __init__(self, name: str, dtype: torch.dtype) -> None:
        self.name, self.dtype = name, dtype
        self.storage_bits = float(torch.finfo(dtype).bits)
        self.max = torch.finfo(dtype).max

    def _quantise(self, x: torch.Tensor) -> torch.Tensor:
        return x.clamp(-self.max, self.max).to(self.dtype).to(torch.float32)

    def saturated(self, x: torch.Tensor, axis: int = -1) -> float:
        x = x.to(torch.float32)
        return float(((x.abs() > self.max) & torch.isfinite(x)).any())


class Scaled(Quantiser):
    """One float32 scale, amax / max_normal, per tensor or per row (slice along the axis)."""

    def __init__(self, name: str, element: ElementFormat, rowwise: bool = False) -> None:
        self.name, self.element, self.rowwise = name, element, rowwise
        self.storage_bits = float(element.bits)

    def scales(self, x: torch.Tensor) -> torch.Tensor:
        """The scale of each group of ``x`` (last axis = scaling axis): [..., 1] or []."""
        magnitude = x.abs()
        amax = magnitude.amax(dim=-1, keepdim=True) if self.rowwise else magnitude.amax()
        scale = amax / self.element.max_normal
        # An all-zero group needs no scale; 1 keeps the division defined.
        return torch.where(amax == 0, torch.ones_like(scale), scale)

    def _quantise(self, x: torch.Tensor) -> torch.Tensor:
        scale = self.scales(x)
        q = self.element.quantise(x / scale) * scale
        return torch.where(torch.isfinite(scale), q, torch.nan)


class MX(Quantiser):
    """OCP MX v1.0: blocks of 32 along the axis sharing an E8M0 power-of-two scale."""

    def __init__(self, name: str, element: ElementFormat, block: int = MX_BLOCK) -> None:
        self.name, self.element, self.block = name, element, block
        self.storage_bits = element.bits + 8 / block

    def blocks(self, x: torch.Tensor) -> torch.Tensor:
        """[..., K] -> [..., ceil(K / 32), 32], the last block zero-padded."""
        pad = (-x.shape[-1]) % self.block
        return F.pad(x, (0, pad)).unflatten(-1, (-1, self.block))

    def shared_exponents(self, blocks: torch.Tensor) -> torch.Tensor:
        """floor(log2(amax)) - emax_elem per block, clamped to E8M0's range; NaN for a block
        holding NaN or Inf; the smallest scale (-127) for an all-zero block. Float32 [..., nb, 1]."""
        amax = blocks.abs().amax(dim=-1, keepdim=True)
        exponent = (floor_log2(amax) - self.element.emax).clamp(SCALE_EMIN, SCALE_EMAX)
        exponent = torch.where(amax == 0, SCALE_EMIN, exponent).to(torch.float32)
        return torch.where(torch.isfinite(amax), exponent, torch.nan)

    def encode(self, x: torch.Tensor, axis: int = -1) -> tuple[torch.Tensor, torch.Tensor]:
        """(element codes [..., nb, 32], E8M0 scale codes [..., nb]) of ``x`` along ``axis``."""
        blocks = self.blocks(x.to(torch.float32).movedim(axis, -1))
        exponent = self.shared_exponents(blocks)
        scaled = self.element.quantise(blocks / exp2_int(torch.nan_to_num(exponent)))
        return self.element.encode(scaled), e8m0_encode(exponent.squeeze(-1))

    def _quantise(self, x: torch.Tensor) -> torch.Tensor:
        blocks = self.blocks(x)
        exponent = self.shared_exponents(blocks)
        scale = exp2_int(torch.nan_to_num(exponent))
        q = self.element.quantise(blocks / scale) * scale
        q = torch.where(torch.isnan(exponent), torch.nan, q)
        return q.flatten(-2)[..., : x.shape[-1]]

    def saturated(self, x: torch.Tensor, axis: int = -1) -> float:
        blocks = self.blocks(x.to(torch.float32).movedim(axis, -1))
        exponent = self.shared_exponents(blocks)
        finite = torch.isfinite(exponent)
        amax = blocks.abs().amax(dim=-1, keepdim=True)
        clips = (amax / exp2_int(torch.nan_to_num(exponent)) > self.element.max_normal) & finite
        return float(clips.sum() / finite.sum().clamp(min=1))


QUANTISERS: dict[str, Quantiser] = {q.name: q for q in (
    Identity(),
    Cast("bf16", torch.bfloat16),
    Cast("fp16", torch.float16),
    Scaled("fp8_e4m3", ELEMENTS["fp8_e4m3"]),
    Scaled("fp8_e5m2", ELEMENTS["fp8_e5m2"]),
    Scaled("fp8_e4m3_rowwise", ELEMENTS["fp8_e4m3"], rowwise=True),
    Scaled("fp8_e5m2_rowwise", ELEMENTS["fp8_e5m2"], rowwise=True),
    # Per-tensor INT8 is MX's element grid (k / 64) under an amax scale: k in [-127, 127].
    Scaled("int8", ELEMENTS["int8"]),
    MX("mxfp8_e4m3", ELEMENTS["fp8_e4m3"]),
    MX("mxfp8_e5m2", ELEMENTS["fp8_e5m2"]),
    MX("mxfp6_e3m2", ELEMENTS["fp6_e3m2"]),
    MX("mxfp6_e2m3", ELEMENTS["fp6_e2m3"]),
    MX("mxfp4_e2m1", ELEMENTS["fp4_e2m1"]),
    MX("mxint8", ELEMENTS["int8"]),
)}


def quantiser(name: str) -> Quantiser:
    """The quantiser of tensor format ``name`` (see :data:`QUANTISERS`)."""
    try:
        return QUANTISERS[name]
    except KeyError:
        raise ValueError(f"unknown tensor format {name!r}; expected one of {', '.join(QUANTISERS)}") from None
