"""SearchSpace: the typed choices for every ArchSpec field, loaded from YAML a user edits.

A space is bound to a dataset :class:`~autorec.data.schema.Schema` when it makes an ArchSpec:
the tables are the schema's sparse features (one table ``t_<feature>`` each, as
``presets.tables_for``), ``n_dense`` is the schema's. Every key of the file is optional; the
defaults give the dlrm preset, a space of one architecture::

    name: zoo                        # default: the file name without .yaml
    description: free text
    dim: [8, 16, 32]                 # D, the width shared by every vector of the stack
    embedding:
      dim_ratio: [1, 0.5]            # table width = ratio * D (default [1]: as wide as D), or
      # dim: [4, 8, 16]              # absolute table widths; the model projects them to D
      groups: per_feature            # one choice per feature; `all`: one for every table;
                                     # {ids: [user_id, item_id]}: named groups, the rest per feature
      precision: [fp32]              # table precision, chosen per group
    dense_arch: [[64], [64, 32]]     # MLP sizes of the dense arch (unused without dense features)
    over_arch: [[256, 128]]
    dense_arch_precision: [fp32]     # precision of the dense arch / over-arch (default fp32)
    over_arch_precision: [fp32, mxfp8_e4m3]
    layers:
      num: {low: 1, high: 3}         # number of interaction layers
      kinds: [dcnv2, dhen, dlrm, mlp, skip, wukong]
      precision: [fp32]              # each layer's precision, unless its kind's section says
      wukong: {n_fm: [4, 8], n_lcb: [0, 8], rank: [4, 8], mlp: [[64], [128, 64]]}
      dhen: {modules: {subsets_of: [dot, attention, dcn], max_size: 2}, n_out: [2, 4]}
      dlrm: {n_passthrough: [0, 1], self_interaction: [false, true]}
      dcnv2: {num_layers: {low: 1, high: 3}, rank: [0, 8]}

A choice is a list of values, one value, or an integer range ``{low, high, step}``. A
list-valued field (``mlp``, ``modules``, ``hidden``, ``dense_arch``, ``over_arch``) takes a list
of lists; ``modules`` also takes ``{subsets_of: [...], min_size, max_size}``. The keys of a kind's
section are the fields of its config in :mod:`autorec.arch` (a field left out keeps its
default), so a new config field is a new key, and new sections (``towers``) sit beside these.

Each layer chooses its kind, then that kind's fields, so the number of architectures is, per
layer, the sum over kinds of the product of that kind's choices (``skip`` counts once). A choice
that only one kind of input makes valid is offered only there: DHEN ``num_heads`` only values
dividing D, ``dot`` only with 2+ input vectors, DLRM ``n_passthrough`` at most the input vectors.
DHEN ``num_heads`` / ``dcn_layers`` are chosen only with ``attention`` / ``dcn`` among the modules
(else they keep their defaults).

Optuna parameter names: ``dim``, ``emb.<group>``, ``emb.<group>.precision``, ``dense_arch``,
``num_layers``, ``layer<i>.kind``, ``layer<i>.<kind>.<field>``, ``over_arch``,
``dense_arch.precision``, ``over_arch.precision``. A choice with one
value is not a parameter. List values are strings (``"256-128"``, ``"dot+attention"``,
``"none"`` for an empty list). Where a choice was narrowed as above, the name says by what
(``layer0.dhen.num_heads@dim=12``), since an Optuna parameter keeps one set of choices.

Example:
    >>> from autorec.data import Schema, SparseFeature
    >>> schema = Schema(dense=("x",), sparse=(SparseFeature("user", 10), SparseFeature("item", 20)))
    >>> space = SearchSpace.from_dict({"dim": [8, 16], "layers": {"kinds": ["dlrm", "dcnv2"]}})
    >>> space.size(schema)
    4
    >>> spec = space.sample(schema, seed=0)
    >>> space.from_params(space.to_params(spec), schema) == spec
    True
"""

from __future__ import annotations

import dataclasses
import functools
import random
import typing
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autorec.arch import (
    EMBEDDING_PRECISIONS,
    PRECISIONS,
    ArchSpec,
    BlockConfig,
    TableSpec,
    TowerSpec,
)
from autorec.blocks import default_kind, kind_names, out_features
from autorec.blocks import kind as block_kind
from autorec.data.schema import Schema, SparseFeature
from autorec.space.towers import TowerChoices, parse_towers
from autorec.space.values import (
    Invalid,
    Values,
    describe_value,
    encode,
    has_value,
    key_path,
    parse_mapping,
    parse_values,
    same_value,
    show_values,
)
from autorec.textfiles import parse_yaml, read_text

if TYPE_CHECKING:
    import optuna

SPACES_DIR = Path(__file__).resolve().parents[2] / "search_spaces"


_TOP_KEYS = ("name", "description", "dim", "embedding", "dense_arch", "over_arch", "layers",
             "dense_arch_precision", "over_arch_precision", "towers")
_EMBEDDING_KEYS = ("dim", "dim_ratio", "groups", "precision")
_LAYER_KEYS = ("num", "kinds", "precision")  # and a section per registered kind (autorec.blocks)


class SpaceError(ValueError):
    """A search space (file) is invalid, or a spec/params are not in it; the message names the
    file and the key or parameter at fault."""


@dataclass(frozen=True)
class EmbeddingChoices:
    """Table widths (absolute ``dim`` or ``dim_ratio`` of D), their grouping and precision."""

    dim: Values | None = None
    dim_ratio: Values = (1,)
    groups: str | tuple[tuple[str, tuple[str, ...]], ...] = "per_feature"
    precision: Values = ("fp32",)


@dataclass(frozen=True)
class LayerChoices:
    """Number of layers, the kinds a layer may be, and per kind the values of each config field."""

    num: Values = (1,)
    kinds: tuple[str, ...] = field(default_factory=lambda: (default_kind(),))
    blocks: Mapping[str, Mapping[str, Values]] = field(default_factory=dict)


@dataclass(frozen=True)
class SearchSpace:
    """The choices for every ArchSpec field. Load one with :meth:`load` or :meth:`from_dict`.

    Example:
        >>> space = SearchSpace.load(SPACES_DIR / "zoo.yaml")
        >>> space.name, space.layers.kinds[:3]
        ('zoo', ('wukong', 'dhen', 'dlrm'))
    """

    name: str = "space"
    description: str = ""
    dim: Values = (16,)
    embedding: EmbeddingChoices = field(default_factory=EmbeddingChoices)
    dense_arch: Values = ((64,),)
    over_arch: Values = ((256, 128),)
    layers: LayerChoices = field(default_factory=LayerChoices)
    dense_arch_precision: Values = ("fp32",)
    over_arch_precision: Values = ("fp32",)
    towers: TowerChoices | None = None  # DMT towers (autorec.space.towers); None: no towers
    source: str = "<space>"
    _bound: dict[Schema, _Bound] = field(default_factory=dict, init=False, repr=False, compare=False)

    # ---- loading ----------------------------------------------------------------------
    @classmethod
    def load(cls, path: str | Path) -> SearchSpace:
        """Read a space from YAML; a bare name such as ``"zoo"`` means a shipped space.

        Example:
            >>> SearchSpace.load("dlrm").layers.kinds
            ('dlrm', 'dcnv2')
        """
        path = Path(path)
        if not path.exists() and (SPACES_DIR / f"{path}.yaml").is_file():
            path = SPACES_DIR / f"{path}.yaml"
        return cls.from_yaml(read_text(path, SpaceError), str(path))

    @classmethod
    def from_yaml(cls, text: str, source: str = "<space>") -> SearchSpace:
        """Parse YAML text; syntax errors name ``source`` with the line and column.

        Example:
            >>> SearchSpace.from_yaml("dim: [8, 16]").dim
            (8, 16)
        """
        data = parse_yaml(text, source, SpaceError)
        return cls.from_dict({} if data is None else data, source)

    @classmethod
    def from_dict(cls, data: Any, source: str = "<space>") -> SearchSpace:
        """Parse a dict as read from YAML; errors name ``source`` and the key path.

        Example:
            >>> SearchSpace.from_dict({"layers": {"kinds": ["transformr"]}}, "my.yaml")
            Traceback (most recent call last):
            ...
            autorec.space.SpaceError: my.yaml: layers.kinds[0]: expected one of wukong, dhen, dlrm, \
dcnv2, skip, mlp, got 'transformr'
        """
        try:
            return _parse(data, source)
        except Invalid as exc:
            raise SpaceError(f"{source}: {exc}") from None

    # ---- counting ---------------------------------------------------------------------
    def size(self, schema: Schema) -> int:
        """The exact number of distinct architectures for ``schema``.

        Example:
            >>> from autorec.data import Schema, SparseFeature
            >>> SearchSpace.from_dict({"dim": [8, 16]}).size(Schema((), (SparseFeature("u", 5),)))
            2
        """
        return self._bind(schema).size()

    # ---- making specs -----------------------------------------------------------------
    def suggest(self, trial: optuna.trial.BaseTrial, schema: Schema) -> ArchSpec:
        """The architecture ``trial``'s sampler picks (define-by-run; names in the module doc).

        Example:
            >>> import optuna
            >>> from autorec.data import Schema, SparseFeature
            >>> space = SearchSpace.load("zoo")
            >>> study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
            >>> spec = space.suggest(study.ask(), Schema(("x",), (SparseFeature("u", 9),)))
            >>> space.contains(spec)
            True
        """
        return self._build(_TrialChooser(trial, self.source), schema)

    def from_params(self, params: Mapping[str, Any], schema: Schema) -> ArchSpec:
        """The architecture that Optuna parameters (e.g. ``study.best_params``) describe.

        Example:
            >>> from autorec.data import Schema, SparseFeature
            >>> space = SearchSpace.from_dict({"dim": [8, 16]})
            >>> space.from_params({"dim": 8}, Schema((), (SparseFeature("u", 5),))).dim
            8
        """
        try:
            from optuna.trial import FixedTrial
        except ImportError:
            raise ImportError("from_params needs optuna: pip install 'autorec-nas[search]'") from None

        chooser = _TrialChooser(FixedTrial(dict(params)), self.source)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # FixedTrial warns on values we reject anyway
            spec = self._build(chooser, schema)
        unused = sorted(set(params) - chooser.names)
        if unused:
            raise SpaceError(f"{self.source}: params: {', '.join(map(repr, unused))} not used by this "
                             f"space for this architecture")
        return spec

    def to_params(self, spec: ArchSpec) -> dict[str, Any]:
        """The parameters that reproduce ``spec`` (its name and metadata aside).

        Raises SpaceError, naming the first choice at fault, when ``spec`` is not in the space.

        Example:
            >>> from autorec.data import Schema, SparseFeature
            >>> from autorec.presets import preset
            >>> SearchSpace.load("dlrm").to_params(preset("dlrm", Schema((), (SparseFeature("u", 5),))))
            {'dim': 16, 'num_layers': 1, 'layer0.kind': 'dlrm', 'layer0.dlrm.n_passthrough': 1, \
'layer0.dlrm.self_interaction': False, 'over_arch': '256-128'}
        """
        where = f"{self.source}: {spec.name!r} is not in the space"
        matcher = _Matcher()
        try:
            built = self._build(matcher, _schema_of(spec, where), spec)
        except Invalid as exc:
            raise SpaceError(f"{where}: {exc}") from None
        got, want = built.to_dict(), spec.to_dict()
        for key in ("name", "metadata"):
            got.pop(key), want.pop(key)
        want.pop("schedule", None)  # how it was trained (autorec.growth), not what it is
        difference = _first_difference(want, got, "")
        if difference:
            raise SpaceError(f"{where}: {difference}")
        return matcher.params

    def contains(self, spec: ArchSpec) -> bool:
        """Whether the space can produce ``spec`` (its name and metadata aside).

        Example:
            >>> from autorec.data import Schema, SparseFeature
            >>> from autorec.presets import preset
            >>> schema = Schema(("x",), (SparseFeature("u", 5), SparseFeature("i", 7)))
            >>> [SearchSpace.load("dlrm").contains(preset(p, schema)) for p in ("dlrm", "wukong")]
            [True, False]
        """
        try:
            self.to_params(spec)
        except SpaceError:
            return False
        return True

    def sample(self, schema: Schema, seed: int) -> ArchSpec:
        """A random architecture: every choice uniform (as Optuna's RandomSampler), by ``seed``.

        Example:
            >>> from autorec.data import Schema, SparseFeature
            >>> space, schema = SearchSpace.load("zoo"), Schema((), (SparseFeature("u", 5),))
            >>> space.sample(schema, seed=1) == space.sample(schema, seed=1)
            True
        """
        return self._build(_RandomChooser(random.Random(seed)), schema)

    # ---- internals --------------------------------------------------------------------
    @functools.cached_property
    def _stacks(self) -> _Stacks:
        return _Stacks(self)

    def _bind(self, schema: Schema) -> _Bound:
        if schema not in self._bound:
            try:
                self._bound[schema] = _Bound(self, schema)
            except Invalid as exc:
                raise SpaceError(f"{self.source}: {exc}") from None
        return self._bound[schema]

    def _build(self, chooser: _Chooser, schema: Schema, target: ArchSpec | None = None) -> ArchSpec:
        """The one walk through the choices that suggest, sample, from_params and to_params share.

        ``target`` (to_params) is the spec whose values the matcher must find among the choices.
        """
        bound = self._bind(schema)
        dim = chooser.choose("dim", self.dim, getattr(target, "dim", None))
        tables = self._tables(chooser, bound, dim, target)
        towers = self._towers(chooser, bound, target)
        dense_arch = (chooser.choose("dense_arch", self.dense_arch, getattr(target, "dense_arch", None))
                      if schema.n_dense else ())
        num = chooser.choose("num_layers", self.layers.num, len(target.layers) if target else None)
        layers: list[BlockConfig] = []
        f_in = bound.f0 if towers is None else towers.num_towers * towers.n_out + (1 if schema.n_dense else 0)
        for i in range(num):
            layer = self._layer(chooser, i, dim, f_in, target.layers[i] if target else None)
            f_in = out_features(layer, f_in, dim)
            layers.append(layer)
        over_arch = chooser.choose("over_arch", self.over_arch, getattr(target, "over_arch", None))
        dense_precision = (chooser.choose("dense_arch.precision", self.dense_arch_precision,
                                          getattr(target, "dense_arch_precision", None))
                           if schema.n_dense else "fp32")
        over_precision = chooser.choose("over_arch.precision", self.over_arch_precision,
                                        getattr(target, "over_arch_precision", None))
        return ArchSpec(name=self.name, dim=dim, tables=tables, n_dense=schema.n_dense,
                        dense_arch=dense_arch, layers=tuple(layers), over_arch=over_arch,
                        dense_arch_precision=dense_precision, over_arch_precision=over_precision,
                        towers=towers)

    def _towers(self, chooser: _Chooser, bound: _Bound, target: ArchSpec | None) -> TowerSpec | None:
        """Tower count, then (with towers) the tower module's kind and n_out (autorec.space.towers)."""
        if self.towers is None:
            return None
        have = target.towers if target is not None else None
        k = chooser.choose("towers.num", self.towers.num,
                           None if target is None else (have.num_towers if have else 0))
        if k == 0:
            return None
        kind = chooser.choose("towers.kind", self.towers.kinds, have.module.kind if have else None)
        n_out = chooser.choose("towers.n_out", self.towers.n_out, have.n_out if have else None)
        return self.towers.spec(k, kind, n_out, bound.schema.sparse_names)

    def _tables(self, chooser: _Chooser, bound: _Bound, dim: int,
                target: ArchSpec | None) -> tuple[TableSpec, ...]:
        emb = self.embedding
        by_feature = {t.features[0]: t for t in target.tables} if target else {}
        width: dict[str, int] = {}
        precision: dict[str, str] = {}
        for group, features in bound.groups:
            table = by_feature.get(features[0])
            if emb.dim is not None:
                group_width = chooser.choose(f"emb.{group}", emb.dim, getattr(table, "dim", None))
            else:
                want = _ratio_of(emb.dim_ratio, table.dim, dim) if table else None
                group_width = int(Fraction(str(chooser.choose(f"emb.{group}", emb.dim_ratio, want))) * dim)
            group_precision = chooser.choose(f"emb.{group}.precision", emb.precision,
                                             getattr(table, "precision", None))
            for name in features:
                width[name], precision[name] = group_width, group_precision
        return tuple(TableSpec(name=f"t_{f.name}", features=(f.name,), num_embeddings=f.num_embeddings,
                               dim=width[f.name], precision=precision[f.name])
                     for f in bound.schema.sparse)

    def _layer(self, chooser: _Chooser, i: int, dim: int, f_in: int,
               target: BlockConfig | None) -> BlockConfig:
        kinds = tuple(k for k in self.layers.kinds if self._stacks.table(k, dim, f_in))
        name = _narrowed(f"layer{i}.kind", kinds, self.layers.kinds, dim=dim, f_in=f_in)
        kind = chooser.choose(name, kinds, getattr(target, "kind", None))
        fields = self.layers.blocks[kind]
        rules = block_kind(kind).rules
        chosen: dict[str, Any] = {}
        for key, values in fields.items():
            if not rules.active(key, chosen):
                continue
            allowed = _allowed(kind, key, values, chosen, fields, dim, f_in)
            name = _narrowed(f"layer{i}.{kind}.{key}", allowed, values, **rules.depends(key, dim, f_in))
            chosen[key] = chooser.choose(name, allowed, getattr(target, key, None))
        return block_kind(kind).config(**chosen)


# ---- validity rules: each kind's (autorec.blocks.registry.SearchRules), as filters on choices ----
def _allowed(kind: str, key: str, values: Values, chosen: Mapping[str, Any],
             fields: Mapping[str, Values], dim: int, f_in: int) -> Values:
    rules = block_kind(kind).rules
    kept = tuple(v for v in values if rules.valid(key, v, chosen, fields, dim, f_in))
    return values if len(kept) == len(values) else kept


def _narrowed(name: str, allowed: Values, declared: Values, **depends: int) -> str:
    if len(allowed) == len(declared):
        return name
    return name + "@" + ",".join(f"{k}={v}" for k, v in depends.items())


class _Stacks:
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
            allowed = _allowed(kind, key, fields[key], chosen, fields, dim, f_in)
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


class _Bound:
    """A space bound to a schema: its feature groups and F0, the vectors entering layer 0."""

    def __init__(self, space: SearchSpace, schema: Schema) -> None:
        if not schema.sparse:
            raise Invalid("", "the schema has no sparse features; an architecture needs one table")
        self.space, self.schema = space, schema
        self.f0 = len(schema.sparse) + (1 if schema.n_dense else 0)
        self.groups = _groups(space.embedding.groups, schema)
        self.f0_ways = _tower_inputs(space.towers, schema) if space.towers else {self.f0: 1}
        for f0 in self.f0_ways:
            space._stacks.check_no_dead_ends(f0)

    def size(self) -> int:
        space = self.space
        emb = space.embedding
        widths = len(emb.dim if emb.dim is not None else emb.dim_ratio)
        tables = (widths * len(emb.precision)) ** len(self.groups)
        dense = len(space.dense_arch) * len(space.dense_arch_precision) if self.schema.n_dense else 1
        stacks = sum(ways * space._stacks.ways(num, dim, f0) for f0, ways in self.f0_ways.items()
                     for dim in space.dim for num in space.layers.num)
        return tables * dense * stacks * len(space.over_arch) * len(space.over_arch_precision)


def _tower_inputs(towers: TowerChoices, schema: Schema) -> dict[int, int]:
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


def _groups(spec: str | tuple[tuple[str, tuple[str, ...]], ...],
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


def _ratio_of(ratios: Values, width: int, dim: int) -> Any:
    """The ratio choice giving a table ``width`` wide at ``dim``, else the ratio itself."""
    for ratio in ratios:
        if Fraction(str(ratio)) * dim == width:
            return ratio
    return width / dim


def _schema_of(spec: ArchSpec, where: str) -> Schema:
    """The schema a space binds to when it produces ``spec``: one feature per table ``t_<f>``."""
    sparse = []
    for i, table in enumerate(spec.tables):
        if len(table.features) != 1 or table.name != f"t_{table.features[0]}":
            raise SpaceError(f"{where}: tables[{i}]: a space makes one table t_<feature> per feature, "
                             f"got {table.name!r} for {list(table.features)}")
        sparse.append(SparseFeature(table.features[0], table.num_embeddings))
    return Schema(dense=tuple(f"dense{i}" for i in range(spec.n_dense)), sparse=tuple(sparse))


def _first_difference(want: Any, got: Any, path: str) -> str:
    if isinstance(want, dict) and isinstance(got, dict):
        for key in [*want, *(k for k in got if k not in want)]:
            found = _first_difference(want.get(key), got.get(key), f"{path}.{key}" if path else key)
            if found:
                return found
        return ""
    if isinstance(want, list) and isinstance(got, list) and len(want) == len(got):
        for i, (w, g) in enumerate(zip(want, got, strict=True)):
            found = _first_difference(w, g, f"{path}[{i}]")
            if found:
                return found
        return ""
    return "" if want == got else f"{path}: the spec has {want!r}, the space can only give {got!r}"


# ---- choosers: who picks each value -----------------------------------------------------
class _Chooser:
    """Picks one of ``values`` for the parameter ``name``; ``want`` is what to_params looks for."""

    def choose(self, name: str, values: Values, want: Any = None) -> Any:
        return values[0] if len(values) == 1 else self.pick(name, values)

    def pick(self, name: str, values: Values) -> Any:
        raise NotImplementedError


class _TrialChooser(_Chooser):
    """Asks an Optuna trial (a FixedTrial for from_params), checking what it answers."""

    def __init__(self, trial: optuna.trial.BaseTrial, source: str) -> None:
        self.trial, self.source = trial, source
        self.names: set[str] = set()

    def pick(self, name: str, values: Values) -> Any:
        self.names.add(name)
        try:
            if isinstance(values, range):
                value = self.trial.suggest_int(name, values.start, values[-1], step=values.step)
                if has_value(values, value):
                    return value
            else:
                codes = [encode(v) for v in values]
                code = self.trial.suggest_categorical(name, codes)
                for v, c in zip(values, codes, strict=True):
                    if same_value(c, code):
                        return v
                value = code
        except (ValueError, TypeError) as exc:
            raise SpaceError(f"{self.source}: parameter {name!r}: {exc}") from None
        raise SpaceError(f"{self.source}: parameter {name!r}: expected one of {show_values(values)}, "
                         f"got {value!r}")


class _RandomChooser(_Chooser):
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def pick(self, name: str, values: Values) -> Any:
        return self.rng.choice(values)


class _Matcher(_Chooser):
    """Picks the wanted value when the choices hold it, recording the parameters that do."""

    def __init__(self) -> None:
        self.params: dict[str, Any] = {}

    def choose(self, name: str, values: Values, want: Any = None) -> Any:
        if not has_value(values, want):
            shown = encode(want) if isinstance(want, tuple) else want
            raise Invalid(name, f"{shown!r} is not among the choices {show_values(values)}")
        if len(values) > 1:
            self.params[name] = encode(want)
        return want


# ---- parsing ------------------------------------------------------------------------------
def _parse(data: Any, source: str) -> SearchSpace:
    top = parse_mapping(data, "", _TOP_KEYS)
    name = top.get("name", Path(source).stem if source.endswith((".yaml", ".yml")) else "space")
    description = top.get("description", "")
    for key, value in (("name", name), ("description", description)):
        if not isinstance(value, str):
            raise Invalid(key, f"expected a string, got {describe_value(value)}")
    dim = parse_values(top.get("dim", 16), "dim", "int", minimum=1)
    embedding = _parse_embedding(top.get("embedding"), dim)
    dense_arch = parse_values(top.get("dense_arch", [[64]]), "dense_arch", "ints", minimum=1)
    over_arch = parse_values(top.get("over_arch", [[256, 128]]), "over_arch", "ints", minimum=1)
    layers = _parse_layers(top.get("layers"))
    part_precision = {key: parse_values(top.get(key, "fp32"), key, "str", one_of=PRECISIONS)
                      for key in ("dense_arch_precision", "over_arch_precision")}
    return SearchSpace(name=name, description=description, dim=dim, embedding=embedding,
                       dense_arch=dense_arch, over_arch=over_arch, layers=layers, source=source,
                       towers=parse_towers(top.get("towers"), source), **part_precision)


def _parse_embedding(data: Any, dims: Values) -> EmbeddingChoices:
    emb = parse_mapping(data, "embedding", _EMBEDDING_KEYS)
    if "dim" in emb and "dim_ratio" in emb:
        raise Invalid("embedding", "give dim (absolute widths) or dim_ratio (of D), not both")
    width = parse_values(emb["dim"], "embedding.dim", "int", minimum=1) if "dim" in emb else None
    ratios = parse_values(emb.get("dim_ratio", 1), "embedding.dim_ratio", "ratio")
    for i, ratio in enumerate(ratios):
        for d in dims:
            cols = Fraction(str(ratio)) * d
            if cols.denominator != 1 or cols < 1:
                where = key_path("embedding.dim_ratio", i) if len(ratios) > 1 else "embedding.dim_ratio"
                raise Invalid(where, f"{ratio} * dim {d} = {float(cols):g} is not a whole number >= 1 "
                              "of columns")
    precision = parse_values(emb.get("precision", "fp32"), "embedding.precision", "str",
                        one_of=EMBEDDING_PRECISIONS)
    return EmbeddingChoices(dim=width, dim_ratio=ratios, groups=_parse_groups(emb.get("groups")),
                            precision=precision)


def _parse_groups(data: Any) -> str | tuple[tuple[str, tuple[str, ...]], ...]:
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


def _parse_layers(data: Any) -> LayerChoices:
    known = kind_names()
    layers = parse_mapping(data, "layers", (*_LAYER_KEYS, *known))
    num = parse_values(layers.get("num", 1), "layers.num", "int", minimum=0)
    kinds = parse_values(layers.get("kinds", [default_kind()]), "layers.kinds", "str", one_of=known)
    assert isinstance(kinds, tuple)
    precision = parse_values(layers.get("precision", "fp32"), "layers.precision", "str", one_of=PRECISIONS)
    blocks = {name: _parse_block(name, layers.get(name), precision) for name in known}
    return LayerChoices(num=num, kinds=kinds, blocks=blocks)


def _field_types(cls: type[BlockConfig]) -> dict[str, str]:
    names = {int: "int", bool: "bool", str: "str", tuple[int, ...]: "ints", tuple[str, ...]: "strs"}
    hints = typing.get_type_hints(cls)
    return {f.name: names[hints[f.name]] for f in dataclasses.fields(cls) if f.init}


def _parse_block(name: str, data: Any, precision: Values) -> dict[str, Values]:
    """Each config field's values; fields the section leaves out keep their default."""
    entry = block_kind(name)
    cls = entry.config
    types = _field_types(cls) if entry.rules.searched else {}  # nothing searched: counts once
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


