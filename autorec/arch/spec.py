"""ArchSpec itself: the tables, the optional DMT towers, the layers and the MLPs of one model,
its validation as a whole, and its JSON form (arch.json) read back with errors that name the key.

Example:
    >>> t = TableSpec(name="t", features=("a", "b"), num_embeddings=10, dim=4)
    >>> ArchSpec(dim=4, tables=(t,), layers=(DotConfig(),)).layer_widths()
    (2, 2)
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autorec.arch.checks import (
    EMBEDDING_PRECISIONS,
    FORMAT_VERSION,
    INT8_TABLES,
    PRECISIONS,
    TABLE_WIDTH_MULTIPLE,
    ArchSpecError,
    check_choice,
    check_int,
    check_sizes,
    fail,
)
from autorec.arch.layers import BLOCK_CONFIGS, BlockConfig, DotConfig, MLPConfig  # noqa: F401  (examples)
from autorec.textfiles import read_text


@dataclass(frozen=True, kw_only=True)
class TableSpec:
    """One embedding table, shared by ``features`` (pooled by sum).

    ``hash_from``: the id range of the features when the table is hashed to fewer rows (the
    hashing trick): an id ``i`` of ``[0, hash_from)`` reads row ``i mod num_embeddings``. None
    (default): the table has a row per id.
    """

    name: str
    features: tuple[str, ...]
    num_embeddings: int
    dim: int
    precision: str = "fp32"
    hash_from: int | None = None

    def validate(self, path: str) -> None:
        if not isinstance(self.name, str) or not self.name:
            fail(f"{path}.name", f"expected a non-empty string, got {self.name!r}")
        if not isinstance(self.features, tuple) or not self.features:
            fail(f"{path}.features", "expected a non-empty list of feature names")
        for i, name in enumerate(self.features):
            if not isinstance(name, str) or not name:
                fail(f"{path}.features[{i}]", f"expected a feature name, got {name!r}")
        check_int(f"{path}.num_embeddings", self.num_embeddings, 1)
        check_int(f"{path}.dim", self.dim, 1)
        if self.dim % TABLE_WIDTH_MULTIPLE:
            fail(f"{path}.dim", f"expected a multiple of {TABLE_WIDTH_MULTIPLE}, got {self.dim}: torchrec's "
                 f"fused embedding kernels (fbgemm) train only tables whose width is a multiple of "
                 f"{TABLE_WIDTH_MULTIPLE}")
        if self.hash_from is not None:
            check_int(f"{path}.hash_from", self.hash_from, self.num_embeddings + 1)
        if self.precision == "int8":
            fail(f"{path}.precision", INT8_TABLES)
        check_choice(f"{path}.precision", self.precision, EMBEDDING_PRECISIONS)


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
            fail(f"{path}.groups", "expected a non-empty list of feature groups")
        for i, group in enumerate(self.groups):
            if not isinstance(group, tuple) or not group:
                fail(f"{path}.groups[{i}]", f"expected a non-empty list of feature names, got {group!r}")
            for j, name in enumerate(group):
                if not isinstance(name, str) or not name:
                    fail(f"{path}.groups[{i}][{j}]", f"expected a feature name, got {name!r}")
        if not isinstance(self.module, BlockConfig) or type(self.module) is BlockConfig:
            fail(f"{path}.module", f"expected a block config, got {type(self.module).__name__}")
        self.module.validate(f"{path}.module")
        check_int(f"{path}.n_out", self.n_out, 1)

    def check_features(self, path: str, tables: tuple[TableSpec, ...], dim: int) -> None:
        """What only the whole spec knows: groups against the tables, the module against D."""
        table_of = {f: t for t in tables for f in t.features}
        tower_of: dict[str, int] = {}
        for i, group in enumerate(self.groups):
            for j, name in enumerate(group):
                if name not in table_of:
                    fail(f"{path}.groups[{i}][{j}]", f"unknown feature {name!r}; the tables' features "
                          f"are {', '.join(table_of)}")
                if name in tower_of:
                    fail(f"{path}.groups[{i}][{j}]", f"feature {name!r} is already in "
                          f"{path}.groups[{tower_of[name]}]")
                tower_of[name] = i
        missing = [f for f in table_of if f not in tower_of]
        if missing:
            fail(f"{path}.groups", f"every sparse feature must be in a tower; missing {', '.join(missing)}")
        for table in tables:
            towers = sorted({tower_of[f] for f in table.features})
            if len(towers) > 1:
                fail(f"{path}.groups[{towers[1]}]", f"table {table.name!r} is split across towers "
                      f"{towers} (its features {list(table.features)} must share one tower)")
        for i, group in enumerate(self.groups):
            try:
                self.module.out_features(len(group), dim)
            except ValueError as exc:
                fail(f"{path}.module", f"does not fit {path}.groups[{i}] ({len(group)} features): {exc}")


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
    # Sparse features of the data that the model does not read (a search dropped them).
    dropped: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        self.validate()

    # ---- validation -------------------------------------------------------------------
    def validate(self) -> None:
        if not isinstance(self.name, str):
            fail("name", f"expected a string, got {self.name!r}")
        check_int("dim", self.dim, 1)
        if not isinstance(self.tables, tuple) or not self.tables:
            fail("tables", "expected at least one embedding table")
        seen_tables: set[str] = set()
        seen_features: set[str] = set()
        for i, table in enumerate(self.tables):
            if not isinstance(table, TableSpec):
                fail(f"tables[{i}]", f"expected a TableSpec, got {type(table).__name__}")
            table.validate(f"tables[{i}]")
            if table.name in seen_tables:
                fail(f"tables[{i}].name", f"table name {table.name!r} repeats")
            seen_tables.add(table.name)
            for feature in table.features:
                if feature in seen_features:
                    fail(f"tables[{i}].features", f"feature {feature!r} is in two tables")
                seen_features.add(feature)
        if not isinstance(self.dropped, tuple):
            fail("dropped", "expected a list of feature names")
        for i, feature in enumerate(self.dropped):
            if not isinstance(feature, str) or not feature:
                fail(f"dropped[{i}]", f"expected a feature name, got {feature!r}")
            if feature in seen_features:
                fail(f"dropped[{i}]", f"feature {feature!r} is dropped, yet in a table or dropped twice")
            seen_features.add(feature)
        check_int("n_dense", self.n_dense, 0)
        check_sizes("dense_arch", self.dense_arch)
        if not isinstance(self.layers, tuple):
            fail("layers", "expected a list of layers")
        for i, layer in enumerate(self.layers):
            if not isinstance(layer, BlockConfig) or type(layer) is BlockConfig:
                fail(f"layers[{i}]", f"expected a block config, got {type(layer).__name__}")
            layer.validate(f"layers[{i}]")
        check_sizes("over_arch", self.over_arch)
        check_choice("dense_arch_precision", self.dense_arch_precision, PRECISIONS)
        check_choice("over_arch_precision", self.over_arch_precision, PRECISIONS)
        if self.towers is not None:
            if not isinstance(self.towers, TowerSpec):
                fail("towers", f"expected a TowerSpec, got {type(self.towers).__name__}")
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
                fail(f"layers[{i}]{where}", rest or str(exc))
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
            "tables": [_table_dict(t) for t in self.tables],
            "n_dense": self.n_dense,
            "dense_arch": list(self.dense_arch),
            "layers": [{"kind": layer.kind, **_plain(dataclasses.asdict(layer))}
                       for layer in self.layers],
            "over_arch": list(self.over_arch),
            # Written only when set, so the arch.json of an all-fp32 model stays as it was.
            **{key: getattr(self, key) for key in ("dense_arch_precision", "over_arch_precision")
               if getattr(self, key) != "fp32"},
            **({"towers": _towers_dict(self.towers)} if self.towers is not None else {}),
            **({"dropped": list(self.dropped)} if self.dropped else {}),
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


def _table_dict(table: TableSpec) -> dict[str, Any]:
    """A table as JSON; ``hash_from`` only when the table is hashed (older arch.json stay as they were)."""
    data = _plain(dataclasses.asdict(table))
    if table.hash_from is None:
        del data["hash_from"]
    return data


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
        fail(path, f"expected an object, got {type(data).__name__}")
    names = {f.name for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - names - set(skip))
    if unknown:
        fail(f"{path}.{unknown[0]}", f"unknown key; expected one of {', '.join(sorted(names))}")
    required = {f.name for f in dataclasses.fields(cls)
                if f.init and f.default is dataclasses.MISSING
                and f.default_factory is dataclasses.MISSING}
    missing = sorted(required - set(data))
    if missing:
        fail(f"{path}.{missing[0]}", "required key is missing")
    return {k: _frozen(v) for k, v in data.items() if k in names}


def _parse_arch(data: Any) -> ArchSpec:
    if isinstance(data, Mapping) and "schedule" in data:
        fail("schedule", "an arch.json holds the architecture only; a growth schedule goes in its own "
              "file beside it (schedule.json, autorec.growth.schedule.GrowthSchedule.save)")
    kwargs = _take(data, "arch", ArchSpec, skip=("format",))
    version = data.get("format", FORMAT_VERSION)
    if version != FORMAT_VERSION:
        fail("format", f"expected {FORMAT_VERSION}, got {version!r}")
    tables = data.get("tables")
    if not isinstance(tables, list):
        fail("tables", f"expected a list of tables, got {type(tables).__name__}")
    kwargs["tables"] = tuple(
        _build(TableSpec, _take(t, f"tables[{i}]", TableSpec), f"tables[{i}]")
        for i, t in enumerate(tables))
    layers = data.get("layers", [])
    if not isinstance(layers, list):
        fail("layers", f"expected a list of layers, got {type(layers).__name__}")
    kwargs["layers"] = tuple(_parse_block(layer, f"layers[{i}]") for i, layer in enumerate(layers))
    if data.get("towers") is not None:
        kwargs["towers"] = _parse_towers(data["towers"])
    metadata = data.get("metadata", {})
    if not isinstance(metadata, Mapping):
        fail("metadata", "expected an object of string values")
    kwargs["metadata"] = tuple((str(k), str(v)) for k, v in metadata.items())
    return ArchSpec(**kwargs)


def _parse_block(layer: Any, path: str) -> BlockConfig:
    if not isinstance(layer, Mapping):
        fail(path, f"expected an object, got {type(layer).__name__}")
    kind = layer.get("kind")
    if kind not in BLOCK_CONFIGS:
        fail(f"{path}.kind", f"expected one of {', '.join(BLOCK_CONFIGS)}, got {kind!r}")
    cls = BLOCK_CONFIGS[kind]
    return _build(cls, _take(layer, path, cls, skip=("kind",)), path)


def _parse_towers(data: Any) -> TowerSpec:
    kwargs = _take(data, "towers", TowerSpec)
    groups = data["groups"]
    if not isinstance(groups, list) or not all(isinstance(g, list) for g in groups):
        fail("towers.groups", f"expected a list of lists of feature names, got {groups!r}")
    kwargs["module"] = _parse_block(data["module"], "towers.module")
    return _build(TowerSpec, kwargs, "towers")


def _build(cls: type, kwargs: dict[str, Any], path: str) -> Any:
    obj = cls(**kwargs)
    if hasattr(obj, "validate") and cls is not ArchSpec:
        obj.validate(path)
    return obj
