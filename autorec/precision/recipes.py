"""Recipes: what a layer's ``precision`` means for its weights, activations and gradients.

MX training recipes quantise the three operand kinds separately (Rouhani et al. 2023,
"Microscaling Data Formats for Deep Learning"): forward products take weights and activations
in the layer's format; the backward products take the output gradient in a format with more
range (E5M2), since gradients span more binades than they need mantissa bits.

================== ================== ================== ==================
precision          weights            activations        gradients
================== ================== ================== ==================
fp32               fp32               fp32               fp32
bf16, fp16         same               same               same
fp8_e4m3           fp8_e4m3 (tensor)  fp8_e4m3 (tensor)  fp8_e5m2 (tensor)
fp8_e4m3_rowwise   fp8_e4m3 (row)     fp8_e4m3 (row)     fp8_e5m2 (row)
fp8_e5m2[_rowwise] fp8_e5m2           fp8_e5m2           fp8_e5m2
int8               int8 (tensor)      int8 (tensor)      bf16
mxfp8_e4m3         mxfp8_e4m3         mxfp8_e4m3         mxfp8_e5m2
mxfp8_e5m2         mxfp8_e5m2         mxfp8_e5m2         mxfp8_e5m2
mxfp6_e3m2         mxfp6_e3m2         mxfp6_e3m2         mxfp8_e5m2
mxfp6_e2m3         mxfp6_e2m3         mxfp6_e2m3         mxfp8_e5m2
mxfp4_e2m1         mxfp4_e2m1         mxfp4_e2m1         mxfp8_e5m2
mxint8             mxint8             mxint8             mxint8
================== ================== ================== ==================

Example:
    >>> recipe("mxfp8_e4m3")
    Recipe(weight='mxfp8_e4m3', activation='mxfp8_e4m3', gradient='mxfp8_e5m2')
    >>> recipe("fp32").is_identity
    True
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

from autorec.arch import PRECISIONS, ArchSpec
from autorec.precision.quantisers import Quantiser, quantiser


@dataclass(frozen=True)
class Recipe:
    """Tensor formats (names in :data:`~autorec.precision.quantisers.QUANTISERS`) of a layer's
    weights, input activations and output gradients."""

    weight: str
    activation: str
    gradient: str

    def __post_init__(self) -> None:
        for role in ("weight", "activation", "gradient"):
            quantiser(getattr(self, role))  # fails naming the unknown format

    @property
    def is_identity(self) -> bool:
        return self.weight == self.activation == self.gradient == "fp32"

    @property
    def quantisers(self) -> tuple[Quantiser, Quantiser, Quantiser]:
        """(weight, activation, gradient) quantisers."""
        return quantiser(self.weight), quantiser(self.activation), quantiser(self.gradient)


def _recipes() -> dict[str, Recipe]:
    gradient = {"fp8_e4m3": "fp8_e5m2", "fp8_e4m3_rowwise": "fp8_e5m2_rowwise", "int8": "bf16",
                "mxfp8_e4m3": "mxfp8_e5m2", "mxfp6_e3m2": "mxfp8_e5m2", "mxfp6_e2m3": "mxfp8_e5m2",
                "mxfp4_e2m1": "mxfp8_e5m2"}
    return {p: Recipe(p, p, gradient.get(p, p)) for p in PRECISIONS}


RECIPES: dict[str, Recipe] = _recipes()


def recipe(precision: str | Recipe) -> Recipe:
    """The recipe of a layer ``precision`` (a name of ``autorec.arch.PRECISIONS``), or a
    :class:`Recipe` as it is."""
    if isinstance(precision, Recipe):
        return precision
    try:
        return RECIPES[precision]
    except KeyError:
        raise ValueError(f"unknown precision {precision!r}; expected one of {', '.join(RECIPES)}") from None


def with_precision(spec: ArchSpec, precision: str, parts: Iterable[str] | None = None) -> ArchSpec:
    """``spec`` with ``precision`` in the given dense parts (``dense_arch``, ``layers.<i>``,
    ``over_arch``; default: all of them). Embedding tables keep theirs.

    Example:
        >>> from autorec.arch import TableSpec, DotConfig
        >>> spec = ArchSpec(dim=4, tables=(TableSpec(name="t", features=("f",), num_embeddings=5, dim=4),),
        ...                 layers=(DotConfig(self_interaction=True),))
        >>> mx = with_precision(spec, "mxfp8_e4m3", ["over_arch"])
        >>> mx.over_arch_precision, mx.layers[0].precision
        ('mxfp8_e4m3', 'fp32')
    """
    recipe(precision)
    names = part_names(spec)
    chosen = set(names if parts is None else parts)
    unknown = sorted(chosen - set(names))
    if unknown:
        raise ValueError(f"unknown part {unknown[0]!r}; this architecture has {', '.join(names)}")
    layers = tuple(dataclasses.replace(layer, precision=precision) if f"layers.{i}" in chosen else layer
                   for i, layer in enumerate(spec.layers))
    changes: dict[str, object] = {"layers": layers}
    if "dense_arch" in chosen:
        changes["dense_arch_precision"] = precision
    if "over_arch" in chosen:
        changes["over_arch_precision"] = precision
    return spec.replace(**changes)


def part_names(spec: ArchSpec) -> list[str]:
    """The dense parts of ``spec`` that carry a precision, in model order."""
    return [*(["dense_arch"] if spec.n_dense else []), *(f"layers.{i}" for i in range(len(spec.layers))),
            "over_arch"]
