"""Numeric precision: FP8 and OCP MX quantisers, quantised layers, the per-layer probe."""

from autorec.precision.formats import ELEMENTS, ElementFormat
from autorec.precision.quantisers import QUANTISERS, Quantiser, quantiser

__all__ = ["ELEMENTS", "QUANTISERS", "ElementFormat", "Quantiser", "quantiser"]
