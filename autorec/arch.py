"""ArchSpec: the one frozen, JSON-serialisable description of a complete model.

Every part of autorec meets at an :class:`ArchSpec`: search strategies produce one,
``build_model`` turns one into an ``nn.Module``, cost models and sharding planners read one,
and export writes one as ``arch.json``.

A model described by an ArchSpec is::

    dense [B, n_dense] --dense_arch MLP--> [B, 1, D] --+
    sparse KJT --EmbeddingBagCollection--> [B, F, D] --+--> X0 [B, F0, D]
    X0 --layers[0]--> [B, F1, D] --layers[1]--> ... --> flatten --over_arch--> logit [B]

Every interaction layer maps ``[B, F_in, D] -> [B, F_out, D]``, so block kinds mix freely.
With DMT towers (``towers``, a :class:`TowerSpec`), the pooled embeddings ``[B, F, D]`` first go
through K tower modules, each compressing its features to ``n_out`` vectors, so that
X0 is ``[B, 1 + K * n_out, D]``.

Example:
    >>> spec = ArchSpec(
    ...     dim=16, n_dense=2, dense_arch=(32,),
    ...     tables=(TableSpec(name="t_user", features=("user",), num_embeddings=100, dim=16),),
    ...     layers=(WukongConfig(n_fm=4, n_lcb=4, rank=4, mlp=(64,)),), over_arch=(64,))
    >>> ArchSpec.from_json(spec.to_json()) == spec
    True
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from autorec.textfiles import read_text

FORMAT_VERSION = 1

# Dense-layer precisions: each names a recipe of weight/activation/gradient formats
# (autorec.precision.recipes). The rowwise ones scale FP8 per row, as torch._scaled_mm takes.
PRECISIONS = ("fp32", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "mxfp8_e4m3", "mxfp8_e5m2",
              "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4_e2m1", "mxint8", "int8",
              "fp8_e4m3_rowwise", "fp8_e5m2_rowwise")
# Embedding-table precisions that train: fbgemm's fused TBE kernel takes fp32 or fp16 weights.
EMBEDDING_PRECISIONS = ("fp32", "fp16")
# Why there are no int8 training tables (the error a TableSpec with precision "int8" raises).
INT8_TABLES = ("int8 tables cannot be trained: fbgemm's fused embedding kernel (TBE), which "
               "trains torchrec's tables, takes fp32 or fp16 weights only (its int8 rows of values "
               "plus a per-row scale and bias have a forward but no backward kernel on CPU). Train "
               "the table in fp16 (half the bytes of fp32) and quantise it to int8 for inference "
               "with autorec.precision.embeddings.quantize_tables")
DHEN_MODULES = ("dot", "attention", "dcn", "linear", "conv")
DHEN_ENSEMBLES = ("concat", "sum", "weighted_sum")


class ArchSpecError(ValueError):
    """An ArchSpec (or arch.json) is invalid; the message names the field at fault."""


def _fail(path: str, message: str) -> None:
    raise ArchSpecError(f"{path}: {message}")


def _check_int(path: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        _fail(path, f"expected an integer >= {minimum}, got {value!r}")
    if value < minimum:
        _fail(path, f"expected an integer >= {minimum}, got {value}")


def _check_sizes(path: str, value: Any, *, allow_empty: bool = True) -> None:
    if not isinstance(value, tuple):
        _fail(path, f"expected a list of layer sizes, got {value!r}")
    if not allow_empty and not value:
        _fail(path, "expected at least one layer size")
    for i, size in enumerate(value):
        _check_int(f"{path}[{i}]", size, 1)


def _check_choice(path: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        _fail(path, f"expected one of {', '.join(choices)}, got {value!r}")


@dataclass(frozen=True, kw_only=True)
class BlockConfig:
    """Base of every interaction-layer config. ``kind`` names the block in JSON."""

    kind: ClassVar[str] = ""
    precision: str = "fp32"

    def validate(self, path: str) -> None:
        _check_choice(f"{path}.precision", self.precision, PRECISIONS)

    def out_features(self, num_in: int, dim: int) -> int:
        """F_out of the layer for input ``[B, num_in, dim]``, or a ValueError naming the field that
        does not fit. Torch-free, so an ArchSpec sizes its stack without building (or importing)
        the blocks."""
        raise NotImplementedError(f"{type(self).__name__} does not give its output width")


def num_dots(num_in: int, self_interaction: bool = False) -> int:
    """How many pairwise dots ``num_in`` vectors give (i < j, or i <= j with self-interaction)."""
    return num_in * (num_in + 1) // 2 if self_interaction else num_in * (num_in - 1) // 2


@dataclass(frozen=True, kw_only=True)
class SkipConfig(BlockConfig):
    """Identity layer: lets a search drop a layer without changing the stack's length."""

    kind: ClassVar[str] = "skip"

    def out_features(self, num_in: int, dim: int) -> int:
        return num_in


@dataclass(frozen=True, kw_only=True)
class DotConfig(BlockConfig):
    """DLRM pairwise dot-product interaction.

    The output holds the first ``n_passthrough`` input vectors (DLRM keeps the dense vector),
    then the F(F-1)/2 pairwise dots (plus F self-dots with ``self_interaction``), packed into
    D-wide rows, the last row zero-padded.
    """

    kind: ClassVar[str] = "dlrm"
    n_passthrough: int = 1
    self_interaction: bool = False

    def validate(self, path: str) -> None:
        super().validate(path)
        _check_int(f"{path}.n_passthrough", self.n_passthrough, 0)
        if not isinstance(self.self_interaction, bool):
            _fail(f"{path}.self_interaction", f"expected true or false, got {self.self_interaction!r}")

    def out_features(self, num_in: int, dim: int) -> int:
        self.validate(self.kind)
        if self.n_passthrough > num_in:
            raise ValueError(f"{self.kind}.n_passthrough: {self.n_passthrough} exceeds the "
                             f"{num_in} input vectors")
        values = self.n_passthrough * dim + num_dots(num_in, self.self_interaction)
        if values == 0:
            raise ValueError(f"{self.kind}: {num_in} input vector(s) give no dots and nothing to pass "
                             "through; set n_passthrough or self_interaction")
        return math.ceil(values / dim)


@dataclass(frozen=True, kw_only=True)
class CrossConfig(BlockConfig):
    """DCNv2 cross network on the flattened input; ``rank`` 0 is full rank, else low rank."""

    kind: ClassVar[str] = "dcnv2"
    num_layers: int = 2
    rank: int = 0

    def validate(self, path: str) -> None:
        super().validate(path)
        _check_int(f"{path}.num_layers", self.num_layers, 1)
        _check_int(f"{path}.rank", self.rank, 0)

    def out_features(self, num_in: int, dim: int) -> int:
        self.validate(self.kind)
        return num_in


@dataclass(frozen=True, kw_only=True)
class WukongConfig(BlockConfig):
    """One Wukong layer: factorization-machine block (n_fm outputs, rank-k optimised FM,
    MLP sizes ``mlp``) beside a linear compress block (n_lcb outputs)."""

    kind: ClassVar[str] = "wukong"
    n_fm: int = 8
    n_lcb: int = 8
    rank: int = 8
    mlp: tuple[int, ...] = (256,)

    def validate(self, path: str) -> None:
        super().validate(path)
        _check_int(f"{path}.n_fm", self.n_fm, 1)
        _check_int(f"{path}.n_lcb", self.n_lcb, 0)
        _check_int(f"{path}.rank", self.rank, 1)
        _check_sizes(f"{path}.mlp", self.mlp)

    def out_features(self, num_in: int, dim: int) -> int:
        self.validate(self.kind)
        return self.n_fm + self.n_lcb


@dataclass(frozen=True, kw_only=True)
class DhenConfig(BlockConfig):
    """One DHEN layer: an ensemble of interaction modules plus a shortcut, layer-normed.

    Each module maps [B, F, D] -> [B, n_out, D]; ``concat`` stacks them (F' = n_out * len),
    ``sum`` and ``weighted_sum`` add them (F' = n_out).
    """

    kind: ClassVar[str] = "dhen"
    modules: tuple[str, ...] = ("dot", "attention")
    ensemble: str = "concat"
    n_out: int = 8
    num_heads: int = 2
    dcn_layers: int = 1

    def validate(self, path: str) -> None:
        super().validate(path)
        if not isinstance(self.modules, tuple) or not self.modules:
            _fail(f"{path}.modules", f"expected a non-empty list from {', '.join(DHEN_MODULES)}")
        for i, name in enumerate(self.modules):
            _check_choice(f"{path}.modules[{i}]", name, DHEN_MODULES)
        if len(set(self.modules)) != len(self.modules):
            _fail(f"{path}.modules", f"modules repeat: {list(self.modules)}")
        _check_choice(f"{path}.ensemble", self.ensemble, DHEN_ENSEMBLES)
        _check_int(f"{path}.n_out", self.n_out, 1)
        _check_int(f"{path}.num_heads", self.num_heads, 1)
        _check_int(f"{path}.dcn_layers", self.dcn_layers, 1)

    def out_features(self, num_in: int, dim: int) -> int:
        self.validate(self.kind)
        if "attention" in self.modules and dim % self.num_heads:
            raise ValueError(f"{self.kind}.num_heads: the attention module needs dim {dim} divisible "
                             f"by num_heads, got {self.num_heads}")
        if "dot" in self.modules and num_in < 2:
            raise ValueError(f"{self.kind}.modules: the dot module needs at least 2 input vectors, "
                             f"got {num_in}")
        return self.n_out * len(self.modules) if self.ensemble == "concat" else self.n_out


@dataclass(frozen=True, kw_only=True)
class MLPConfig(BlockConfig):
    """An MLP on the flattened input whose output is reshaped to [B, n_out, D]."""

    kind: ClassVar[str] = "mlp"
    hidden: tuple[int, ...] = (256,)
    n_out: int = 8

    def validate(self, path: str) -> None:
        super().validate(path)
        _check_sizes(f"{path}.hidden", self.hidden)
        _check_int(f"{path}.n_out", self.n_out, 1)

    def out_features(self, num_in: int, dim: int) -> int:
        self.validate(self.kind)
        return self.n_out


BLOCK_CONFIGS: dict[str, type[BlockConfig]] = {
    cls.kind: cls
    for cls in (SkipConfig, DotConfig, CrossConfig, WukongConfig, DhenConfig, MLPConfig)
}


@dataclass(frozen=True, kw_only=True)
class TableSpec:
    """One embedding table, shared by ``features`` (pooled by sum)."""

    name: str
    features: tuple[str, ...]
    num_embeddings: int
    dim: int
    precision: str = "fp32"

    def validate(self, path: str) -> None:
        if not isinstance(self.name, str) or not self.name:
            _fail(f"{path}.name", f"expected a non-empty string, got {self.name!r}")
        if not isinstance(self.features, tuple) or not self.features:
            _fail(f"{path}.features", "expected a non-empty list of feature names")
        for i, name in enumerate(self.features):
            if not isinstance(name, str) or not name:
                _fail(f"{path}.features[{i}]", f"expected a feature name, got {name!r}")
        _check_int(f"{path}.num_embeddings", self.num_embeddings, 1)
        _check_int(f"{path}.dim", self.dim, 1)
        if self.precision == "int8":
            _fail(f"{path}.precision", INT8_TABLES)
        _check_choice(f"{path}.precision", self.precision, EMBEDDING_PRECISIONS)


@dataclass(frozen=True, kw_only=True)
class TowerSpec:
    """DMT towers: the sparse features split into groups, each compressed by a tower module.

    Tower ``k`` takes the pooled embeddings of ``groups[k]`` ``[B, F_k, D]`` through ``module``
    (any block kind) and a linear compression to ``n_out`` vectors ``[B, n_out, D]``
    (autorec.blocks.towers); the towers' outputs, concatenated after the dense vector, are X0
    ``[B, 1 + K * n_out, D]`` of the interaction stack. Every sparse feature is in exactly one
    group, and the features of one table in the same group (a tower's tables live together).

    Example:
        >>> TowerSpec(groups=(("a", "b"), ("c",)), module=MLPConfig(hidden=(8,), n_out=2), n_out=1).num_towers
        2
    """

    groups: tuple[tuple[str, ...], ...]
    module: BlockConfig
    n_out: int = 1

    @property
    def num_towers(self) -> int:
        return len(self.groups)

    def validate(self, path: str) -> None:
        if not isinstance(self.groups, tuple) or not self.groups:
            _fail(f"{path}.groups", "expected a non-empty list of feature groups")
        for i, group in enumerate(self.groups):
            if not isinstance(group, tuple) or not group:
                _fail(f"{path}.groups[{i}]", f"expected a non-empty list of feature names, got {group!r}")
            for j, name in enumerate(group):
                if not isinstance(name, str) or not name:
                    _fail(f"{path}.groups[{i}][{j}]", f"expected a feature name, got {name!r}")
        if not isinstance(self.module, BlockConfig) or type(self.module) is BlockConfig:
            _fail(f"{path}.module", f"expected a block config, got {type(self.module).__name__}")
        self.module.validate(f"{path}.module")
        _check_int(f"{path}.n_out", self.n_out, 1)

    def check_features(self, path: str, tables: tuple[TableSpec, ...], dim: int) -> None:
        """What only the whole spec knows: groups against the tables, the module against D."""
        table_of = {f: t for t in tables for f in t.features}
        tower_of: dict[str, int] = {}
        for i, group in enumerate(self.groups):
            for j, name in enumerate(group):
                if name not in table_of:
                    _fail(f"{path}.groups[{i}][{j}]", f"unknown feature {name!r}; the tables' features "
                          f"are {', '.join(table_of)}")
                if name in tower_of:
                    _fail(f"{path}.groups[{i}][{j}]", f"feature {name!r} is already in "
                          f"{path}.groups[{tower_of[name]}]")
                tower_of[name] = i
        missing = [f for f in table_of if f not in tower_of]
        if missing:
            _fail(f"{path}.groups", f"every sparse feature must be in a tower; missing {', '.join(missing)}")
        for table in tables:
            towers = sorted({tower_of[f] for f in table.features})
            if len(towers) > 1:
                _fail(f"{path}.groups[{towers[1]}]", f"table {table.name!r} is split across towers "
                      f"{towers} (its features {list(table.features)} must share one tower)")
        for i, group in enumerate(self.groups):
            try:
                self.module.out_features(len(group), dim)
            except ValueError as exc:
                _fail(f"{path}.module", f"does not fit {path}.groups[{i}] ({len(group)} features): {exc}")


@dataclass(frozen=True, kw_only=True)
class ArchSpec:
    """A complete model. See the module docstring for the data flow and shapes."""

    name: str = "custom"
    dim: int
    tables: tuple[TableSpec, ...]
    n_dense: int = 0
    dense_arch: tuple[int, ...] = ()
    layers: tuple[BlockConfig, ...] = ()
    over_arch: tuple[int, ...] = (256,)
    metadata: tuple[tuple[str, str], ...] = field(default=())
    # Precision of the dense arch and of the over-arch MLP (its final Linear(., 1) included).
    dense_arch_precision: str = "fp32"
    over_arch_precision: str = "fp32"
    # DMT towers (None: every pooled embedding enters the interaction stack directly).
    towers: TowerSpec | None = None

    def __post_init__(self) -> None:
        self.validate()

    # ---- validation -------------------------------------------------------------------
    def validate(self) -> None:
        if not isinstance(self.name, str):
            _fail("name", f"expected a string, got {self.name!r}")
        _check_int("dim", self.dim, 1)
        if not isinstance(self.tables, tuple) or not self.tables:
            _fail("tables", "expected at least one embedding table")
        seen_tables: set[str] = set()
        seen_features: set[str] = set()
        for i, table in enumerate(self.tables):
            if not isinstance(table, TableSpec):
                _fail(f"tables[{i}]", f"expected a TableSpec, got {type(table).__name__}")
            table.validate(f"tables[{i}]")
            if table.name in seen_tables:
                _fail(f"tables[{i}].name", f"table name {table.name!r} repeats")
            seen_tables.add(table.name)
            for feature in table.features:
                if feature in seen_features:
                    _fail(f"tables[{i}].features", f"feature {feature!r} is in two tables")
                seen_features.add(feature)
        _check_int("n_dense", self.n_dense, 0)
        _check_sizes("dense_arch", self.dense_arch)
        if not isinstance(self.layers, tuple):
            _fail("layers", "expected a list of layers")
        for i, layer in enumerate(self.layers):
            if not isinstance(layer, BlockConfig) or type(layer) is BlockConfig:
                _fail(f"layers[{i}]", f"expected a block config, got {type(layer).__name__}")
            layer.validate(f"layers[{i}]")
        _check_sizes("over_arch", self.over_arch)
        _check_choice("dense_arch_precision", self.dense_arch_precision, PRECISIONS)
        _check_choice("over_arch_precision", self.over_arch_precision, PRECISIONS)
        if self.towers is not None:
            if not isinstance(self.towers, TowerSpec):
                _fail("towers", f"expected a TowerSpec, got {type(self.towers).__name__}")
            self.towers.validate("towers")
            self.towers.check_features("towers", self.tables, self.dim)
        self.layer_widths()

    def layer_widths(self) -> tuple[int, ...]:
        """(F0, F1, ..., F_L): vectors entering each layer, then leaving the last.

        Checks what only the stack knows (a layer's sizes against its input's), naming the layer.
        """
        widths = [self.num_inputs]
        for i, layer in enumerate(self.layers):
            try:
                widths.append(layer.out_features(widths[-1], self.dim))
            except ValueError as exc:
                head, _, rest = str(exc).partition(": ")
                where = head[len(layer.kind):] if head.startswith(layer.kind) else ""
                _fail(f"layers[{i}]{where}", rest or str(exc))
        return tuple(widths)

    # ---- derived sizes ----------------------------------------------------------------
    @property
    def feature_names(self) -> tuple[str, ...]:
        """Sparse feature names in embedding order (the F axis of X0 after the dense vector)."""
        return tuple(f for t in self.tables for f in t.features)

    @property
    def num_inputs(self) -> int:
        """F0: vectors entering the first interaction layer: the dense vector, then one per
        feature, or with towers ``n_out`` per tower."""
        sparse = (len(self.feature_names) if self.towers is None
                  else self.towers.num_towers * self.towers.n_out)
        return sparse + (1 if self.n_dense else 0)

    def replace(self, **changes: Any) -> ArchSpec:
        """A copy with ``changes`` applied (validated again)."""
        return dataclasses.replace(self, **changes)

    # ---- JSON -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT_VERSION,
            "name": self.name,
            "dim": self.dim,
            "tables": [_plain(dataclasses.asdict(t)) for t in self.tables],
            "n_dense": self.n_dense,
            "dense_arch": list(self.dense_arch),
            "layers": [{"kind": layer.kind, **_plain(dataclasses.asdict(layer))}
                       for layer in self.layers],
            "over_arch": list(self.over_arch),
            # Written only when set, so the arch.json of an all-fp32 model stays as it was.
            **{key: getattr(self, key) for key in ("dense_arch_precision", "over_arch_precision")
               if getattr(self, key) != "fp32"},
            **({"towers": _towers_dict(self.towers)} if self.towers is not None else {}),
            "metadata": dict(self.metadata),
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.to_json() + "\n")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "arch") -> ArchSpec:
        """Parse a dict as written by :meth:`to_dict`; errors name ``source`` and the key."""
        try:
            return _parse_arch(data)
        except ArchSpecError as exc:
            raise ArchSpecError(f"{source}: {exc}") from None

    @classmethod
    def from_json(cls, text: str, source: str = "arch.json") -> ArchSpec:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ArchSpecError(f"{source}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
        return cls.from_dict(data, source)

    @classmethod
    def load(cls, path: str | Path) -> ArchSpec:
        return cls.from_json(read_text(path, ArchSpecError), str(path))


def _towers_dict(towers: TowerSpec) -> dict[str, Any]:
    module = towers.module
    return {"groups": [list(g) for g in towers.groups],
            "module": {"kind": module.kind, **_plain(dataclasses.asdict(module))},
            "n_out": towers.n_out}


def _plain(value: Any) -> Any:
    """Tuples to lists, recursively, for JSON."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _frozen(value: Any) -> Any:
    """Lists to tuples, recursively, so parsed specs compare equal and hash."""
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    return value


def _take(data: Any, path: str, cls: type, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    if not isinstance(data, Mapping):
        _fail(path, f"expected an object, got {type(data).__name__}")
    names = {f.name for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - names - set(skip))
    if unknown:
        _fail(f"{path}.{unknown[0]}", f"unknown key; expected one of {', '.join(sorted(names))}")
    required = {f.name for f in dataclasses.fields(cls)
                if f.init and f.default is dataclasses.MISSING
                and f.default_factory is dataclasses.MISSING}
    missing = sorted(required - set(data))
    if missing:
        _fail(f"{path}.{missing[0]}", "required key is missing")
    return {k: _frozen(v) for k, v in data.items() if k in names}


def _parse_arch(data: Any) -> ArchSpec:
    if isinstance(data, Mapping) and "schedule" in data:
        _fail("schedule", "an arch.json holds the architecture only; a growth schedule goes in its own "
              "file beside it (schedule.json, autorec.growth.schedule.GrowthSchedule.save)")
    kwargs = _take(data, "arch", ArchSpec, skip=("format",))
    version = data.get("format", FORMAT_VERSION)
    if version != FORMAT_VERSION:
        _fail("format", f"expected {FORMAT_VERSION}, got {version!r}")
    tables = data.get("tables")
    if not isinstance(tables, list):
        _fail("tables", f"expected a list of tables, got {type(tables).__name__}")
    kwargs["tables"] = tuple(
        _build(TableSpec, _take(t, f"tables[{i}]", TableSpec), f"tables[{i}]")
        for i, t in enumerate(tables))
    layers = data.get("layers", [])
    if not isinstance(layers, list):
        _fail("layers", f"expected a list of layers, got {type(layers).__name__}")
    kwargs["layers"] = tuple(_parse_block(layer, f"layers[{i}]") for i, layer in enumerate(layers))
    if data.get("towers") is not None:
        kwargs["towers"] = _parse_towers(data["towers"])
    metadata = data.get("metadata", {})
    if not isinstance(metadata, Mapping):
        _fail("metadata", "expected an object of string values")
    kwargs["metadata"] = tuple((str(k), str(v)) for k, v in metadata.items())
    return ArchSpec(**kwargs)


def _parse_block(layer: Any, path: str) -> BlockConfig:
    if not isinstance(layer, Mapping):
        _fail(path, f"expected an object, got {type(layer).__name__}")
    kind = layer.get("kind")
    if kind not in BLOCK_CONFIGS:
        _fail(f"{path}.kind", f"expected one of {', '.join(BLOCK_CONFIGS)}, got {kind!r}")
    cls = BLOCK_CONFIGS[kind]
    return _build(cls, _take(layer, path, cls, skip=("kind",)), path)


def _parse_towers(data: Any) -> TowerSpec:
    kwargs = _take(data, "towers", TowerSpec)
    groups = data["groups"]
    if not isinstance(groups, list) or not all(isinstance(g, list) for g in groups):
        _fail("towers.groups", f"expected a list of lists of feature names, got {groups!r}")
    kwargs["module"] = _parse_block(data["module"], "towers.module")
    return _build(TowerSpec, kwargs, "towers")


def _build(cls: type, kwargs: dict[str, Any], path: str) -> Any:
    obj = cls(**kwargs)
    if hasattr(obj, "validate") and cls is not ArchSpec:
        obj.validate(path)
    return obj
