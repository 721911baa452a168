"""Bit-exactness of the element formats and MX scales: hand-derived vectors, and torch's own
float8_e4m3fn / float8_e5m2 / float8_e8m0fnu casts over every representable and boundary value."""

from __future__ import annotations

import pytest
import torch

from autorec.precision.formats import ELEMENTS, e8m0_encode, exp2_int, floor_log2
from autorec.precision.quantisers import QUANTISERS

TORCH_FP8 = {"fp8_e4m3": torch.float8_e4m3fn, "fp8_e5m2": torch.float8_e5m2}


def _bits(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.float32).contiguous().view(torch.int32)


def _boundary_values(name: str) -> torch.Tensor:
    """Every representable value, every midpoint between neighbours (the ties), one float32 ulp
    either side of each midpoint, values past the largest and below the smallest subnormal."""
    fmt = ELEMENTS[name]
    grid = fmt.representable().to(torch.float64)
    mids = ((grid[1:] + grid[:-1]) / 2).to(torch.float32)
    up = torch.nextafter(mids, torch.full_like(mids, torch.inf))
    down = torch.nextafter(mids, torch.full_like(mids, -torch.inf))
    tiny = exp2_int(torch.tensor(fmt.emin - fmt.mbits))
    edges = torch.tensor([fmt.max_normal * 1.01, fmt.max_normal * 4, 1e30, -1e30, 0.0, -0.0])
    small = torch.stack([tiny / 2, tiny / 2 * 1.0001, tiny * 0.49, tiny * 1.5, tiny * 2.5])
    values = torch.cat([grid.to(torch.float32), mids, up, down, edges, small, -small])
    log_uniform = torch.exp2(torch.empty(20000).uniform_(fmt.emin - fmt.mbits - 4, fmt.emax + 3))
    signs = torch.where(torch.rand(20000) < 0.5, -1.0, 1.0)
    return torch.cat([values, log_uniform * signs])


@pytest.mark.parametrize("name", list(TORCH_FP8))
def test_reference_rounding_matches_torch_fp8_casts(name: str) -> None:
    torch.manual_seed(0)
    fmt, dtype = ELEMENTS[name], TORCH_FP8[name]
    x = _boundary_values(name)
    ours = fmt.quantise_reference(x)
    theirs = x.clamp(-fmt.max_normal, fmt.max_normal).to(dtype).to(torch.float32)
    assert torch.equal(_bits(ours), _bits(theirs))
    assert torch.equal(fmt.encode(ours), theirs.to(dtype).view(torch.uint8).to(torch.int64))


@pytest.mark.parametrize("name", list(TORCH_FP8))
def test_decode_of_every_code_matches_torch(name: str) -> None:
    fmt, dtype = ELEMENTS[name], TORCH_FP8[name]
    codes = torch.arange(256)
    theirs = codes.to(torch.uint8).view(dtype).to(torch.float32)
    ours = fmt.decode(codes)
    assert torch.equal(torch.isnan(ours), torch.isnan(theirs))
    finite = ~torch.isnan(theirs)
    assert torch.equal(_bits(ours[finite]), _bits(theirs[finite]))


@pytest.mark.parametrize("name", list(ELEMENTS))
def test_every_code_round_trips(name: str) -> None:
    fmt = ELEMENTS[name]
    grid = fmt.representable()
    assert torch.equal(fmt.quantise_reference(grid), grid)
    assert torch.equal(fmt.quantise(grid), grid)
    assert torch.equal(fmt.decode(fmt.encode(grid)), grid)
    assert grid.max().item() == fmt.max_normal == -grid.min().item()
    assert floor_log2(torch.tensor(fmt.max_normal)).item() == fmt.emax


@pytest.mark.parametrize(("name", "count"), [("fp8_e4m3", 253), ("fp8_e5m2", 247), ("fp6_e3m2", 63),
                                             ("fp6_e2m3", 63), ("fp4_e2m1", 15), ("int8", 255)])
def test_number_of_distinct_values(name: str, count: int) -> None:
    # 2^bits codes, minus NaN/Inf codes, minus the duplicate zero (floats) or -2 (MX INT8).
    assert len(ELEMENTS[name].representable()) == count


@pytest.mark.parametrize(("name", "given", "expected"), [
    # E2M1 grid 0, .5, 1, 1.5, 2, 3, 4, 6: ties to the even mantissa, 6.5 saturates.
    ("fp4_e2m1", [0.25, 0.75, 2.5, 5.0, 6.5, 0.3, -1.2], [0.0, 1.0, 2.0, 4.0, 6.0, 0.5, -1.0]),
    # E3M2 between 16 and 28 spaced by 4: 22 ties to 24 (mantissa 10), 21 -> 20, 29 -> 28.
    ("fp6_e3m2", [22.0, 21.0, 29.0, 0.0625, 0.09375], [24.0, 20.0, 28.0, 0.0625, 0.125]),
    # E2M3 subnormals spaced 1/8: 1/16 ties to 0, 3/16 ties to 1/4; 7.9 saturates to 7.5.
    ("fp6_e2m3", [0.0625, 0.1875, 7.9, 3.3], [0.0, 0.25, 7.5, 3.25]),
    # MX INT8: k / 64; 0.5/64 ties to 0, 1.5/64 ties to 2/64; 2 saturates to 127/64.
    ("int8", [0.5 / 64, 1.5 / 64, 2.0, -0.3], [0.0, 2 / 64, 127 / 64, -19 / 64]),
    # E4M3: 464 ties between 448 and (NaN-coded) 480 -> saturates; the smallest subnormal 2^-9.
    ("fp8_e4m3", [464.0, 2.0**-10, 2.0**-10 * 1.01, 17.0], [448.0, 0.0, 2.0**-9, 16.0]),
])
def test_hand_derived_element_vectors(name: str, given: list[float], expected: list[float]) -> None:
    assert ELEMENTS[name].quantise_reference(torch.tensor(given)).tolist() == expected


@pytest.mark.parametrize(("name", "codes", "values"), [
    ("fp4_e2m1", [0b0001, 0b0111, 0b1010], [0.5, 6.0, -1.0]),
    ("fp6_e3m2", [0b011111, 0b000001], [28.0, 0.0625]),
    ("fp6_e2m3", [0b011111, 0b001000], [7.5, 1.0]),
    ("int8", [0x7F, 0xFF, 0x01], [127 / 64, -1 / 64, 1 / 64]),
])
def test_hand_derived_codes(name: str, codes: list[int], values: list[float]) -> None:
    fmt = ELEMENTS[name]
    assert fmt.decode(torch.tensor(codes)).tolist() == values
    assert fmt.encode(torch.tensor(values)).tolist() == codes


def test_e8m0_codes_match_torch_over_the_whole_range() -> None:
    exponents = torch.arange(-127, 128)
    theirs = exp2_int(exponents).to(torch.float8_e8m0fnu).view(torch.uint8)
    assert torch.equal(e8m0_encode(exponents), theirs)
    nan = torch.tensor([torch.nan])
    assert e8m0_encode(nan).item() == nan.to(torch.float8_e8m0fnu).view(torch.uint8).item() == 255
    # The scales are exact powers of two down to E8M0's 2^-127 (an fp32 subnormal).
    assert torch.equal(exp2_int(exponents).double(), torch.tensor([2.0**int(e) for e in exponents]).double())


def _block(*head: float) -> torch.Tensor:
    return torch.cat([torch.tensor(head), torch.zeros(32 - len(head))])


@pytest.mark.parametrize(("name", "given", "expected", "scale_code"), [
    # amax 6.5: 2^(2 - 2) = 1.
    ("mxfp4_e2m1", _block(0.3, 6.5, -1.2, 0.25, 2.5, 5.0), _block(0.5, 6.0, -1.0, 0.0, 2.0, 4.0), 127),
    # amax 1000: 2^(9 - 8) = 2; 1000 / 2 = 500 saturates to 448 (x2 = 896); 2^-12 / 2 underflows.
    ("mxfp8_e4m3", _block(1000.0, 1.0, 2.0**-12, -3.0), _block(896.0, 1.0, 0.0, -3.0), 128),
    # amax 0.75: 2^(-1 - 15) = 2^-16; 0.1 is E5M2's 0.1 (1.5 * 2^-4 and 1.75 * 2^-4 bracket it).
    ("mxfp8_e5m2", _block(0.75, 0.1), _block(0.75, 0.09375), 111),
    # amax 20: 2^(4 - 4) = 1; 22 ties to 24.
    ("mxfp6_e3m2", _block(20.0, 22.0, -0.3), _block(20.0, 24.0, -0.3125), 127),
    # amax 0.3: 2^(-2 - 2) = 1/16; 0.3 * 16 = 4.8 -> 5 (spacing 0.5 in [4, 8)) -> 0.3125.
    ("mxfp6_e2m3", _block(0.3, -0.01), _block(0.3125, -0.0078125), 123),
    # amax 3: 2^(1 - 0) = 2; 3 / 128 / 2 * 64 = 0.75 -> 1 -> 2 / 64.
    ("mxint8", _block(3.0, 3 / 128, 1 / 64), _block(3.0, 2 / 64, 0.0), 128),
])
def test_hand_derived_mx_blocks(name: str, given: torch.Tensor, expected: torch.Tensor,
                                scale_code: int) -> None:
    q = QUANTISERS[name]
    assert q.quantise(given).tolist() == expected.tolist()
    _, scales = q.encode(given)
    assert scales.tolist() == [scale_code]


def test_mx_special_blocks() -> None:
    q = QUANTISERS["mxfp8_e4m3"]
    x = torch.cat([_block(1.0, torch.nan), _block(torch.inf, 2.0), torch.zeros(32), _block(-4.0, 1.0)])
    out = q.quantise(x)
    assert torch.isnan(out[:64]).all()  # a NaN or an Inf makes the whole block's scale NaN
    assert torch.equal(out[64:], x[64:])  # the other blocks are untouched by them
    _, scales = q.encode(x)
    assert scales.tolist() == [255, 255, 0, 129 - 8]  # zero block: 2^-127; 4 = 2^2 -> 2^(2-8)


def test_mx_blocks_run_along_the_axis_and_the_tail_is_padded() -> None:
    q = QUANTISERS["mxfp4_e2m1"]
    x = torch.zeros(3, 40)
    x[:, 0], x[:, 1], x[:, 32], x[:, 33] = 6.0, 0.7, 0.75, 0.1  # second block: 8 values + 24 pad
    out = q.quantise(x)
    assert out[0, 1].item() == 0.5  # scale 1 in the first block
    assert out[0, 32].item() == 0.75 and out[0, 33].item() == 0.125  # scale 2^(-1-2) in the second
    assert torch.equal(q.quantise(x.T, axis=0), out.T)


@pytest.mark.parametrize("name", ["mxfp8_e4m3", "mxfp8_e5m2"])
def test_mx_element_codes_match_torch_fp8(name: str) -> None:
    torch.manual_seed(1)
    q = QUANTISERS[name]
    x = torch.randn(16, 64) * torch.exp2(torch.randint(-20, 20, (16, 1)).float())
    codes, scales = q.encode(x)
    scale = exp2_int(scales.to(torch.int32) - 127).unsqueeze(-1)
    limit = q.element.max_normal  # torch's cast overflows to Inf/NaN; MX saturates
    theirs = (x.unflatten(-1, (-1, 32)) / scale).clamp(-limit, limit).to(TORCH_FP8[name[2:]])
    theirs = theirs.view(torch.uint8)
    assert torch.equal(codes, theirs.to(torch.int64))
