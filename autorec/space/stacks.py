"""Counting and walking a space's layer stacks: which kinds and field values stay valid for a
layer's input (each kind's :class:`~autorec.blocks.registry.SearchRules`), exact counts of valid
stacks by D and input vectors, and a space bound to a dataset schema (its feature groups and the
vectors entering layer 0)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from autorec.blocks import kind as block_kind
from autorec.blocks import out_features
from autorec.data.schema import Schema
from autorec.space.tables import table_ways
from autorec.space.towers import TowerChoices
from autorec.space.values import Invalid, Values

if TYPE_CHECKING:
    from autorec.space import SearchSpace


def allowed_values(kind: str, key: str, values: Values, chosen: Mapping[str, Any],
             fields: Mapping[str, Values], dim: int, f_in: int) -> Values:
    rules = block_kind(kind).rules
    kept = tuple(v for v in values if rules.valid(key, v, chosen, fields, dim, f_in))
    return values if len(kept) == len(values) else kept


class Stacks:
    """Exact counts of valid layer stacks by D and input vectors (the schema only sets F0)."""

    def __init__(self, space: SearchSpace) -> None:
        self.space = space
        self._tables: dict[tuple[str, int, int], dict[int, int]] = {}
        self._ways: dict[tuple[int, int, int], int] = {}
        self._checked: set[int] = set()

    def table(self, kind: str, dim: int, f_in: int) -> dict[int, int]:
        """Output vectors -> number of distinct valid ``kind`` layers for input [B, f_in, dim]."""
        key = (kind, dim, f_in)
        if key not in self._tables:
            self._tables[key] = self._count_layers(kind, dim, f_in)
        return self._tables[key]

    def _count_layers(self, kind: str, dim: int, f_in: int) -> dict[int, int]:
        fields = self.space.layers.blocks[kind]
        keys = list(fields)
        entry = block_kind(kind)
        shape = entry.rules.shape_fields
        counts: dict[int, int] = {}

        def walk(index: int, chosen: dict[str, Any], ways: int) -> None:
            if index == len(keys):
                f_out = out_features(entry.config(**chosen), f_in, dim)
                counts[f_out] = counts.get(f_out, 0) + ways
                return
            key = keys[index]
            if not entry.rules.active(key, chosen):
                walk(index + 1, chosen, ways)
                return
            allowed = allowed_values(kind, key, fields[key], chosen, fields, dim, f_in)
            if key in shape:
                for value in allowed:
                    walk(index + 1, {**chosen, key: value}, ways)
            elif allowed:  # any allowed value gives the same output; one stands for all
                walk(index + 1, {**chosen, key: allowed[0]}, ways * len(allowed))

        walk(0, {}, 1)
        return counts

    def ways(self, num: int, dim: int, f_in: int) -> int:
        """Number of distinct valid stacks of ``num`` layers taking [B, f_in, dim]."""
        if num == 0:
            return 1
        key = (num, dim, f_in)
        if key not in self._ways:
            self._ways[key] = sum(count * self.ways(num - 1, dim, f_out)
                                  for kind in self.space.layers.kinds
                                  for f_out, count in self.table(kind, dim, f_in).items())
        return self._ways[key]

    def check_no_dead_ends(self, f0: int) -> None:
        """Every input a layer can get must have some valid layer, so a walk never gets stuck."""
        if f0 in self._checked:
            return
        kinds = self.space.layers.kinds
        for dim in self.space.dim:
            frontier = {f0}
            for i in range(max(self.space.layers.num)):
                reached: set[int] = set()
                for f_in in sorted(frontier):
                    tables = [self.table(kind, dim, f_in) for kind in kinds]
                    if not any(tables):
                        raise Invalid("layers", f"no kind in layers.kinds can be layer {i} when dim is "
                                       f"{dim} and it gets {f_in} input vector(s); add skip to "
                                       "layers.kinds or widen the choices")
                    reached.update(f for t in tables for f in t)
                frontier = reached
        self._checked.add(f0)


class Bound:
    """A space bound to a schema: its feature groups and F0, the vectors entering layer 0."""

    def __init__(self, space: SearchSpace, schema: Schema) -> None:
        if not schema.sparse:
            raise Invalid("", "the schema has no sparse features; an architecture needs one table")
        self.space, self.schema = space, schema
        dense = 1 if schema.n_dense else 0
        self.f0 = len(schema.sparse) + dense
        self.groups = groups_of(space.embedding.groups, schema)
        # Kept features -> table sets; F0 -> its ways: by the tables kept, or by the towers.
        self.tables = table_ways(space.embedding, schema, self.groups)
        self.f0_ways = (tower_inputs(space.towers, schema) if space.towers
                        else {kept + dense: 1 for kept in self.tables})
        for f0 in self.f0_ways:
            space._stacks.check_no_dead_ends(f0)

    def size(self) -> int:
        space = self.space
        dense = len(space.dense_arch) * len(space.dense_arch_precision) if self.schema.n_dense else 1

        def stacks(f0: int) -> int:
            return sum(space._stacks.ways(num, dim, f0) for dim in space.dim for num in space.layers.num)

        if space.towers:  # every feature kept (a space with towers cannot drop): tables x towers
            (tables,) = self.tables.values()
            combined = tables * sum(ways * stacks(f0) for f0, ways in self.f0_ways.items())
        else:
            extra = 1 if self.schema.n_dense else 0
            combined = sum(ways * stacks(kept + extra) for kept, ways in self.tables.items())
        return combined * dense * len(space.over_arch) * len(space.over_arch_precision)


def tower_inputs(towers: TowerChoices, schema: Schema) -> dict[int, int]:
    """F0 -> how many tower choices (count, kind, n_out) give it; checks every choice fits."""
    from autorec.space.towers import tower_module

    ways: dict[int, int] = {}
    for k in towers.num:
        if k == 0:
            f0 = towers.f0(0, 1, len(schema.sparse), schema.n_dense)
            ways[f0] = ways.get(f0, 0) + 1
            continue
        try:
            groups = towers.groups(k, schema.sparse_names)
        except ValueError as exc:
            raise Invalid("", str(exc)) from None
        for kind in towers.kinds:
            for size in {len(g) for g in groups}:
                try:
                    out_features(tower_module(kind), size, 8)
                except ValueError as exc:
                    raise Invalid("towers.kinds", f"{kind} cannot be the module of a {size}-feature tower "
                                   f"(towers.num {k}): {exc}") from None
            for n_out in towers.n_out:
                f0 = towers.f0(k, n_out, len(schema.sparse), schema.n_dense)
                ways[f0] = ways.get(f0, 0) + 1
    return ways


def groups_of(spec: str | tuple[tuple[str, tuple[str, ...]], ...],
            schema: Schema) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """(group name, its features) in schema order; features no group names are their own group."""
    names = schema.sparse_names
    if spec == "per_feature":
        return tuple((f, (f,)) for f in names)
    if spec == "all":
        return (("all", names),)
    assert not isinstance(spec, str)
    owner: dict[str, str] = {}
    for group, features in spec:
        for j, feature in enumerate(features):
            if feature not in names:
                raise Invalid(f"embedding.groups.{group}[{j}]", f"no sparse feature {feature!r} in the "
                               f"schema; it has {', '.join(names)}")
            owner[feature] = group
    clash = sorted({g for g, _ in spec} & (set(names) - set(owner)))
    if clash:
        raise Invalid(f"embedding.groups.{clash[0]}", "a group may not take the name of a feature "
                       "outside it (that feature is its own group)")
    members = {g: tuple(f for f in names if owner.get(f) == g) for g, _ in spec}
    order = dict.fromkeys(owner.get(f, f) for f in names)
    return tuple((g, members.get(g, (g,))) for g in order)


