"""Element formats of OCP Microscaling (MX) v1.0 and FP8, bit-exact on the CPU.

An element format is a small float (sign, ``ebits`` exponent bits, ``mbits`` mantissa bits,
exponent ``bias``) or MX's INT8 (two's complement with an implicit scale 2^-6). Rounding is to
nearest, ties to even (RNE), and saturating: magnitudes above the largest normal become it, as
the MX spec's conversion clamps. NaN stays NaN.

torch has float8_e4m3fn, float8_e5m2 and float8_e8m0fnu but no FP6, and no MX quantiser on the
CPU, so the rounding is written here once, for every format; tests check it against torch's own
casts over every representable value, every midpoint between neighbours and the range's edges.

======== ===== ===== ==== ==== =========== ============
format   ebits mbits bias emax max normal  specials
======== ===== ===== ==== ==== =========== ============
fp8_e4m3 4     3     7    8    448         NaN S.1111.111
fp8_e5m2 5     2     15   15   57344       Inf, NaN
fp6_e3m2 3     2     3    4    28          none
fp6_e2m3 2     3     1    2    7.5         none
fp4_e2m1 2     1     1    2    6           none
int8     -     -     -    0    1.984375    none (k / 64, k in [-127, 127])
======== ===== ===== ==== ==== =========== ============

Example:
    >>> x = torch.tensor([0.25, 0.75, 2.5, 5.0, 7.0, -1.2])
    >>> ELEMENTS["fp4_e2m1"].quantise(x).tolist()  # ties go to the even code; 7 saturates to 6
    [0.0, 1.0, 2.0, 4.0, 6.0, -1.0]
    >>> ELEMENTS["fp4_e2m1"].encode(torch.tensor([6.0, -0.5])).tolist()
    [7, 9]
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


def exp2_int(exponent: torch.Tensor) -> torch.Tensor:
    """2^e as float32 for integer ``e`` in [-149, 127], exactly (subnormals included)."""
    return torch.exp2(exponent.to(torch.float32))


def floor_log2(magnitude: torch.Tensor) -> torch.Tensor:
    """floor(log2(|x|)) as int32, exactly (frexp, never a rounded log); 0 gives -127 - 22."""
    _, exponent = torch.frexp(magnitude)
    return exponent.to(torch.int32) - 1


@dataclass(frozen=True)
class ElementFormat:
    """One element format; see the module docstring's table.

    Args:
        name: e.g. ``fp8_e4m3``.
        bits: storage bits per element.
        ebits, mbits, bias: the float layout (``ebits`` 0 means MX INT8).
        max_normal: the largest finite magnitude.
        emax: the exponent of the largest normal, ``floor(log2(max_normal))`` (MX's emax_elem).
        nan_code, inf_code: codes of NaN / +Inf where the format has them, else None.
        torch_dtype: torch's own dtype of this format, where it has one.
    """

    name: str
    bits: int
    ebits: int
    mbits: int
    bias: int
    max_normal: float
    emax: int
    nan_code: int | None = None
    inf_code: int | None = None
    torch_dtype: torch.dtype | None = None

    @property
    def is_int(self) -> bool:
        return self.ebits == 0

    @property
    def emin(self) -> int:
        """Exponent of the smallest normal (1 - bias); below it the spacing stays fixed."""
        return 1 - self.bias

    def quantise(self, x: torch.Tensor) -> torch.Tensor:
        """The nearest representable value (RNE, saturating) of every element, as float32.

        Uses torch's cast where torch has the format (the same result, tested, and faster);
        :meth:`quantise_reference` is the one algorithm for every format.
        """
        x = x.to(torch.float32)
        if self.torch_dtype is not None:
            return x.clamp(-self.max_normal, self.max_normal).to(self.torch_dtype).to(torch.float32)
        return self.quantise_reference(x)

    def quantise_reference(self, x: torch.Tensor) -> torch.Tensor:
        """RNE to the element grid, written out: the spacing at |x| is 2^(e - mbits) with
        e = max(floor(log2 |x|), emin); dividing by a power of two is exact, so torch.round
        (ties to even) rounds on the element's own grid."""
        x = x.to(torch.float32)
        magnitude = x.abs()
        if self.is_int:
            step_exp = torch.full_like(magnitude, -6, dtype=torch.int32)
        else:
            step_exp = floor_log2(magnitude).clamp(min=self.emin) - self.mbits
        # An infinite x keeps a finite step; it saturates below like any large value.
        step = exp2_int(step_exp.clamp(-149, 127))
        rounded = torch.round(magnitude / step) * step
        return torch.copysign(rounded.clamp(max=self.max_normal), x)

    # ---- codes: the bit patterns, for tests and packed storage ----------------------------
    def encode(self, q: torch.Tensor) -> torch.Tensor:
        """Codes (int64, ``bits`` wide) of values that are already representable."""
        q = q.to(torch.float32)
        sign = torch.signbit(q).to(torch.int64) << (self.bits - 1)
        magnitude = q.abs()
        if self.is_int:
            ints = torch.round(q * 64).to(torch.int64)
            return torch.where(ints < 0, ints + (1 << self.bits), ints)
        exponent = floor_log2(magnitude).clamp(min=self.emin)
        normal = magnitude >= exp2_int(torch.tensor(self.emin))
        biased = torch.where(normal, exponent + self.bias, torch.zeros_like(exponent)).to(torch.int64)
        implicit = torch.where(normal, 1.0, 0.0)
        mantissa = torch.round((magnitude / exp2_int(exponent) - implicit) * (1 << self.mbits))
        codes = sign | (biased << self.mbits) | mantissa.to(torch.int64)
        if self.nan_code is not None:
            codes = torch.where(torch.isnan(q), torch.full_like(codes, self.nan_code), codes)
        if self.inf_code is not None:
            inf = torch.isinf(q)
            codes = torch.where(inf, self.inf_code | sign, codes)
        return codes

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """Values (float32) of ``bits``-wide codes."""
        codes = codes.to(torch.int64)
        if self.is_int:
            ints = torch.where(codes >= 1 << (self.bits - 1), codes - (1 << self.bits), codes)
            return ints.to(torch.float32) / 64
        negative = (codes >> (self.bits - 1)) & 1
        biased = (codes >> self.mbits) & ((1 << self.ebits) - 1)
        mantissa = (codes & ((1 << self.mbits) - 1)).to(torch.float32) / (1 << self.mbits)
        normal = biased > 0
        exponent = torch.where(normal, biased - self.bias, torch.full_like(biased, self.emin))
        magnitude = (mantissa + normal.to(torch.float32)) * exp2_int(exponent)
        value = torch.where(negative.bool(), -magnitude, magnitude)
        unsigned = codes & ((1 << (self.bits - 1)) - 1)
        if self.inf_code is not None:
            value = torch.where(unsigned == self.inf_code, torch.copysign(torch.tensor(torch.inf), value),
                                value)
            nan = (biased == (1 << self.ebits) - 1) & (unsigned != self.inf_code)
            value = torch.where(nan, torch.nan, value)
        elif self.nan_code is not None:
            value = torch.where(unsigned == self.nan_code, torch.nan, value)
        return value

    def representable(self) -> torch.Tensor:
        """Every value the quantiser produces, ascending, without duplicates (float32); MX INT8's
        -2 (code 0x80) is left out, as the range is kept symmetric."""
        values = self.decode(torch.arange(1 << self.bits))
        return torch.unique(values[torch.isfinite(values) & (values.abs() <= self.max_normal)])


ELEMENTS: dict[str, ElementFormat] = {f.name: f for f in (
    ElementFormat("fp8_e4m3", 8, 4, 3, 7, 448.0, 8, nan_code=0x7F, torch_dtype=torch.float8_e4m3fn),
    ElementFormat("fp8_e5m2", 8, 5, 2, 15, 57344.0, 15, nan_code=0x7F, inf_code=0x7C,
                  torch_dtype=torch.float8_e5m2),
    ElementFormat("fp6_e3m2", 6, 3, 2, 3, 28.0, 4),
    ElementFormat("fp6_e2m3", 6, 2, 3, 1, 7.5, 2),
    ElementFormat("fp4_e2m1", 4, 2, 1, 1, 6.0, 2),
    # MX INT8: 2's complement with an implicit 2^-6; -128 is left out so the range is symmetric.
    ElementFormat("int8", 8, 0, 6, 0, 127 / 64, 0),
)}

# The shared scale of MX: E8M0, an unsigned power of two 2^(code - 127), code 255 is NaN.
E8M0_BIAS = 127
E8M0_NAN = 0xFF
SCALE_EMIN, SCALE_EMAX = -127, 127


def e8m0_encode(exponent: torch.Tensor) -> torch.Tensor:
    """E8M0 codes (uint8) of shared exponents in [-127, 127]; NaN where ``exponent`` is NaN."""
    codes = torch.nan_to_num(exponent.to(torch.float32), nan=E8M0_NAN - E8M0_BIAS) + E8M0_BIAS
    return codes.to(torch.uint8)


def element_format(name: str) -> ElementFormat:
    """The element format ``name`` (see :data:`ELEMENTS`)."""
    try:
        return ELEMENTS[name]
    except KeyError:
        raise ValueError(f"unknown element format {name!r}; expected one of {', '.join(ELEMENTS)}") from None


__all__ = ["E8M0_BIAS", "E8M0_NAN", "ELEMENTS", "SCALE_EMAX", "SCALE_EMIN", "ElementFormat",
           "e8m0_encode", "element_format", "exp2_int", "floor_log2"]
