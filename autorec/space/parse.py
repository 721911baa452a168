"""Parsing the ``embedding`` and ``layers`` sections of a space file into their choices; each
kind's section has the fields of its registered config (:mod:`autorec.blocks.registry`)."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from autorec.arch import EMBEDDING_PRECISIONS, PRECISIONS, TABLE_WIDTH_MULTIPLE, BlockConfig
from autorec.blocks import default_kind, kind_names
from autorec.blocks import kind as block_kind
from autorec.space.values import (
    Invalid,
    Values,
    describe_value,
    key_path,
    parse_mapping,
    parse_values,
)

EMBEDDING_KEYS = ("dim", "dim_ratio", "groups", "precision", "hash")
LAYER_KEYS = ("num", "kinds", "precision")  # and a section per registered kind (autorec.blocks)


@dataclass(frozen=True)
class EmbeddingChoices:
    """Table widths (absolute ``dim``, 0 dropping the features, or ``dim_ratio`` of D), their
    grouping, precision and hash size (``hash``: fractions of the rows, autorec.space.tables)."""

    dim: Values | None = None
    dim_ratio: Values = (1,)
    groups: str | tuple[tuple[str, tuple[str, ...]], ...] = "per_feature"
    precision: Values = ("fp32",)
    hash: Values = (1,)


@dataclass(frozen=True)
class LayerChoices:
    """Number of layers, the kinds a layer may be, and per kind the values of each config field."""

    num: Values = (1,)
    kinds: tuple[str, ...] = field(default_factory=lambda: (default_kind(),))
    blocks: Mapping[str, Mapping[str, Values]] = field(default_factory=dict)

_KERNEL_WIDTHS = "torchrec's fused embedding kernels (fbgemm) train only such table widths"


def parse_embedding(data: Any, dims: Values) -> EmbeddingChoices:
    emb = parse_mapping(data, "embedding", EMBEDDING_KEYS)
    if "dim" in emb and "dim_ratio" in emb:
        raise Invalid("embedding", "give dim (absolute widths) or dim_ratio (of D), not both")
    width = parse_values(emb["dim"], "embedding.dim", "int", minimum=0) if "dim" in emb else None
    if width is not None and not any(width):
        raise Invalid("embedding.dim", "expected at least one width > 0 (0 drops a feature)")
    for i, w in enumerate(width or ()):
        if w % TABLE_WIDTH_MULTIPLE:
            where = key_path("embedding.dim", i) if len(width or ()) > 1 else "embedding.dim"
            raise Invalid(where, f"expected 0 or a multiple of {TABLE_WIDTH_MULTIPLE}, got {w}: "
                          f"{_KERNEL_WIDTHS}")
    hashes = parse_values(emb.get("hash", 1), "embedding.hash", "ratio")
    for i, fraction in enumerate(hashes):
        if fraction > 1:
            where = key_path("embedding.hash", i) if len(hashes) > 1 else "embedding.hash"
            raise Invalid(where, f"expected a fraction of the rows in (0, 1], got {fraction}")
    ratios = parse_values(emb.get("dim_ratio", 1), "embedding.dim_ratio", "ratio")
    for i, ratio in enumerate(ratios):
        for d in dims:
            cols = Fraction(str(ratio)) * d
            where = key_path("embedding.dim_ratio", i) if len(ratios) > 1 else "embedding.dim_ratio"
            if cols.denominator != 1 or cols < 1:
                raise Invalid(where, f"{ratio} * dim {d} = {float(cols):g} is not a whole number >= 1 "
                              "of columns")
            if cols % TABLE_WIDTH_MULTIPLE:
                raise Invalid(where, f"{ratio} * dim {d} = {cols} columns is not a multiple of "
                              f"{TABLE_WIDTH_MULTIPLE}: {_KERNEL_WIDTHS}")
    precision = parse_values(emb.get("precision", "fp32"), "embedding.precision", "str",
                        one_of=EMBEDDING_PRECISIONS)
    return EmbeddingChoices(dim=width, dim_ratio=ratios, groups=parse_groups(emb.get("groups")),
                            precision=precision, hash=hashes)


def parse_groups(data: Any) -> str | tuple[tuple[str, tuple[str, ...]], ...]:
    path = "embedding.groups"
    if data is None:
        return "per_feature"
    if isinstance(data, str):
        if data not in ("per_feature", "all"):
            raise Invalid(path, f"expected per_feature, all or a mapping of group name to features, "
                           f"got {data!r}")
        return data
    if not isinstance(data, Mapping) or not data:
        raise Invalid(path, f"expected per_feature, all or a mapping of group name to features, "
                       f"got {describe_value(data)}")
    groups = []
    seen: dict[str, str] = {}
    for group, features in data.items():
        where = key_path(path, str(group))
        if not isinstance(group, str) or not group:
            raise Invalid(where, "expected a group name")
        if not isinstance(features, list) or not features:
            raise Invalid(where, "expected a non-empty list of feature names, got "
                          f"{describe_value(features)}")
        for j, feature in enumerate(features):
            if not isinstance(feature, str):
                raise Invalid(key_path(where, j), "expected a feature name, got "
                              f"{describe_value(feature)}")
            if feature in seen:
                raise Invalid(key_path(where, j),
                              f"feature {feature!r} is already in group {seen[feature]!r}")
            seen[feature] = group
        groups.append((group, tuple(features)))
    return tuple(groups)


def parse_layers(data: Any) -> LayerChoices:
    known = kind_names()
    layers = parse_mapping(data, "layers", (*LAYER_KEYS, *known))
    num = parse_values(layers.get("num", 1), "layers.num", "int", minimum=0)
    kinds = parse_values(layers.get("kinds", [default_kind()]), "layers.kinds", "str", one_of=known)
    assert isinstance(kinds, tuple)
    precision = parse_values(layers.get("precision", "fp32"), "layers.precision", "str", one_of=PRECISIONS)
    blocks = {name: parse_block(name, layers.get(name), precision) for name in known}
    return LayerChoices(num=num, kinds=kinds, blocks=blocks)


def field_types(cls: type[BlockConfig]) -> dict[str, str]:
    names = {int: "int", bool: "bool", str: "str", tuple[int, ...]: "ints", tuple[str, ...]: "strs"}
    hints = typing.get_type_hints(cls)
    return {f.name: names[hints[f.name]] for f in dataclasses.fields(cls) if f.init}


def parse_block(name: str, data: Any, precision: Values) -> dict[str, Values]:
    """Each config field's values; fields the section leaves out keep their default."""
    entry = block_kind(name)
    cls = entry.config
    types = field_types(cls) if entry.rules.searched else {}  # nothing searched: counts once
    section = parse_mapping(data, f"layers.{name}", tuple(types))
    fields: dict[str, Values] = {}
    for key, ftype in types.items():
        path = f"layers.{name}.{key}"
        if key in section:
            fields[key] = parse_values(section[key], path, ftype, config=(cls, key))
        elif key == "precision":
            fields[key] = precision
        else:
            fields[key] = (next(f.default for f in dataclasses.fields(cls) if f.name == key),)
    return fields


