"""The contract every registered quantiser meets (one suite, every implementation)."""

from __future__ import annotations

import pytest
import torch

from autorec.costs import bytes_per_element
from autorec.precision.quantisers import MX, QUANTISERS, Cast, Identity, Quantiser, Scaled, quantiser

# Relative Frobenius error a format may show on Gaussian data: about 2^-(mantissa bits).
MAX_RELATIVE_ERROR = {"fp32": 0.0, "bf16": 2**-8, "fp16": 2**-11, "fp8_e4m3": 2**-3, "fp8_e5m2": 2**-2,
                      "fp8_e4m3_rowwise": 2**-3, "fp8_e5m2_rowwise": 2**-2, "int8": 2**-5,
                      "mxfp8_e4m3": 2**-3, "mxfp8_e5m2": 2**-2, "mxfp6_e3m2": 2**-2, "mxfp6_e2m3": 2**-3,
                      "mxfp4_e2m1": 2**-1, "mxint8": 2**-5}


@pytest.fixture(params=list(QUANTISERS), ids=list(QUANTISERS))
def q(request: pytest.FixtureRequest) -> Quantiser:
    return QUANTISERS[request.param]


def _data(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def test_every_quantiser_has_a_bound() -> None:
    assert set(QUANTISERS) == set(MAX_RELATIVE_ERROR)
    assert all(type(q) in (Identity, Cast, Scaled, MX) for q in QUANTISERS.values())


def test_shape_dtype_and_error_bound(q: Quantiser) -> None:
    x = _data(8, 96)
    out = q.quantise(x)
    assert out.shape == x.shape and out.dtype == torch.float32
    error = ((out - x).norm() / x.norm()).item()
    assert error <= MAX_RELATIVE_ERROR[q.name]
    if q.name != "fp32":
        assert error > 0  # it does quantise


def test_idempotent(q: Quantiser) -> None:
    once = q.quantise(_data(4, 64, seed=1))
    torch.testing.assert_close(q.quantise(once), once, rtol=1e-6, atol=0)


def test_odd_symmetric_and_zero_preserving(q: Quantiser) -> None:
    x = _data(5, 40, seed=2)
    assert torch.equal(q.quantise(-x), -q.quantise(x))
    assert torch.equal(q.quantise(torch.zeros(3, 33)), torch.zeros(3, 33))


def test_power_of_two_scaling_commutes(q: Quantiser) -> None:
    x = _data(4, 64, seed=3)
    for k in (-6, 5):
        torch.testing.assert_close(q.quantise(x * 2.0**k), q.quantise(x) * 2.0**k, rtol=1e-6, atol=0)


def test_axis_is_the_scaling_axis(q: Quantiser) -> None:
    x = _data(48, 6, seed=4)
    assert torch.equal(q.quantise(x, axis=0), q.quantise(x.T).T)
    assert torch.equal(q.quantise(x.unsqueeze(0), axis=1), q.quantise(x, axis=0).unsqueeze(0))


def test_nan_stays_nan_and_stays_in_its_group(q: Quantiser) -> None:
    x = _data(2, 64, seed=5)
    x[0, 3] = torch.nan
    out = q.quantise(x)
    assert torch.isnan(out[0, 3])
    if q.name in ("fp32", "bf16", "fp16"):
        assert torch.isfinite(out[1]).all() and torch.isfinite(out[0, 4:]).all()
    elif isinstance(q, MX):  # only its block of 32
        assert torch.isnan(out[0, :32]).all() and torch.isfinite(out[0, 32:]).all()
    elif isinstance(q, Scaled) and q.rowwise:
        assert torch.isfinite(out[1]).all()


def test_meta_tensors_pass_through(q: Quantiser) -> None:
    x = torch.empty(4, 40, device="meta")
    assert q.quantise(x).shape == x.shape


def test_storage_bits_are_what_the_cost_model_charges(q: Quantiser) -> None:
    assert bytes_per_element(q.name) * 8 == q.storage_bits


def test_saturated_share() -> None:
    x = torch.ones(2, 64)
    x[0, 0] = 1.9  # amax 1.9: E2M1's scale 2^(0 - 2) puts it at 7.6 > 6, so its block clips
    assert QUANTISERS["mxfp4_e2m1"].saturated(x) == 0.25
    assert QUANTISERS["mxfp8_e4m3"].saturated(x) == 0.25  # 1.9 * 2^8 = 486 > 448
    assert QUANTISERS["mxfp8_e4m3"].saturated(x * 1.7) == 0.0  # 1.7 * 2^8 = 435, 3.23 * 2^7 = 413
    assert QUANTISERS["mxfp4_e2m1"].saturated(x * 1.7) == 1.0  # 1.7 * 4 = 6.8 > 6 in every block
    assert QUANTISERS["fp16"].saturated(x * 1e5) == 1.0
    assert QUANTISERS["fp8_e4m3"].saturated(x * 1e5) == 0.0  # amax scaling never clips


def test_unknown_format_is_named() -> None:
    with pytest.raises(ValueError, match=r"unknown tensor format 'fp7'.*mxfp8_e4m3"):
        quantiser("fp7")
