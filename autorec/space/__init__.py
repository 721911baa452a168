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
      hash: [1, 0.1]                 # rows kept by the hashing trick, a fraction per group
                                     # (dim: [0, ...] drops a group's features: autorec.space.tables)
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

Optuna parameter names: ``dim``, ``emb.<group>``, ``emb.<group>.precision``, ``emb.<group>.hash``,
``dense_arch``,
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

import functools
import random
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autorec.arch import (
    PRECISIONS,
    ArchSpec,
    BlockConfig,
    TowerSpec,
)
from autorec.blocks import kind as block_kind
from autorec.blocks import out_features
from autorec.data.schema import Schema, SparseFeature
from autorec.space.choosers import Chooser, Matcher, RandomChooser, TrialChooser
from autorec.space.parse import EmbeddingChoices, LayerChoices, parse_embedding, parse_layers
from autorec.space.stacks import Bound, Stacks, allowed_values
from autorec.space.tables import can_drop, choose_tables
from autorec.space.towers import TowerChoices, parse_towers
from autorec.space.values import (
    Invalid,
    SpaceError,
    Values,
    describe_value,
    narrowed,
    parse_mapping,
    parse_values,
)
from autorec.textfiles import parse_yaml, read_text

if TYPE_CHECKING:
    import optuna

SPACES_DIR = Path(__file__).resolve().parents[2] / "search_spaces"


_TOP_KEYS = ("name", "description", "dim", "embedding", "dense_arch", "over_arch", "layers",
             "dense_arch_precision", "over_arch_precision", "towers")


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
    _bound: dict[Schema, Bound] = field(default_factory=dict, init=False, repr=False, compare=False)

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
            autorec.space.SpaceError: my.yaml: layers.kinds[0]: expected one of dcnv2, dhen, dlrm, \
mlp, skip, wukong, got 'transformr'
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
        return self._build(TrialChooser(trial, self.source), schema)

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

        chooser = TrialChooser(FixedTrial(dict(params)), self.source)
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
        matcher = Matcher()
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
        return self._build(RandomChooser(random.Random(seed)), schema)

    # ---- internals --------------------------------------------------------------------
    @functools.cached_property
    def _stacks(self) -> Stacks:
        return Stacks(self)

    def _bind(self, schema: Schema) -> Bound:
        if schema not in self._bound:
            try:
                self._bound[schema] = Bound(self, schema)
            except Invalid as exc:
                raise SpaceError(f"{self.source}: {exc}") from None
        return self._bound[schema]

    def _build(self, chooser: Chooser, schema: Schema, target: ArchSpec | None = None) -> ArchSpec:
        """The one walk through the choices that suggest, sample, from_params and to_params share.

        ``target`` (to_params) is the spec whose values the matcher must find among the choices.
        """
        bound = self._bind(schema)
        dim = chooser.choose("dim", self.dim, getattr(target, "dim", None))
        tables, dropped = choose_tables(self, chooser, schema, bound.groups, dim, target)
        towers = self._towers(chooser, bound, target)
        dense_arch = (chooser.choose("dense_arch", self.dense_arch, getattr(target, "dense_arch", None))
                      if schema.n_dense else ())
        num = chooser.choose("num_layers", self.layers.num, len(target.layers) if target else None)
        layers: list[BlockConfig] = []
        sparse_in = len(tables) if towers is None else towers.num_towers * towers.n_out
        f_in = sparse_in + (1 if schema.n_dense else 0)
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
                        towers=towers, dropped=dropped)

    def _towers(self, chooser: Chooser, bound: Bound, target: ArchSpec | None) -> TowerSpec | None:
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

    def _layer(self, chooser: Chooser, i: int, dim: int, f_in: int,
               target: BlockConfig | None) -> BlockConfig:
        kinds = tuple(k for k in self.layers.kinds if self._stacks.table(k, dim, f_in))
        name = narrowed(f"layer{i}.kind", kinds, self.layers.kinds, dim=dim, f_in=f_in)
        kind = chooser.choose(name, kinds, getattr(target, "kind", None))
        fields = self.layers.blocks[kind]
        rules = block_kind(kind).rules
        chosen: dict[str, Any] = {}
        for key, values in fields.items():
            if not rules.active(key, chosen):
                continue
            allowed = allowed_values(kind, key, values, chosen, fields, dim, f_in)
            name = narrowed(f"layer{i}.{kind}.{key}", allowed, values, **rules.depends(key, dim, f_in))
            chosen[key] = chooser.choose(name, allowed, getattr(target, key, None))
        return block_kind(kind).config(**chosen)


def _schema_of(spec: ArchSpec, where: str) -> Schema:
    """The schema a space binds to when it produces ``spec``: one feature per table ``t_<f>``."""
    sparse = []
    for i, table in enumerate(spec.tables):
        if len(table.features) != 1 or table.name != f"t_{table.features[0]}":
            raise SpaceError(f"{where}: tables[{i}]: a space makes one table t_<feature> per feature, "
                             f"got {table.name!r} for {list(table.features)}")
        sparse.append(SparseFeature(table.features[0], table.hash_from or table.num_embeddings))
    sparse.extend(SparseFeature(name, 1) for name in spec.dropped)  # its size did not matter
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


# ---- parsing ------------------------------------------------------------------------------
def _parse(data: Any, source: str) -> SearchSpace:
    top = parse_mapping(data, "", _TOP_KEYS)
    name = top.get("name", Path(source).stem if source.endswith((".yaml", ".yml")) else "space")
    description = top.get("description", "")
    for key, value in (("name", name), ("description", description)):
        if not isinstance(value, str):
            raise Invalid(key, f"expected a string, got {describe_value(value)}")
    dim = parse_values(top.get("dim", 16), "dim", "int", minimum=1)
    embedding = parse_embedding(top.get("embedding"), dim)
    dense_arch = parse_values(top.get("dense_arch", [[64]]), "dense_arch", "ints", minimum=1)
    over_arch = parse_values(top.get("over_arch", [[256, 128]]), "over_arch", "ints", minimum=1)
    layers = parse_layers(top.get("layers"))
    part_precision = {key: parse_values(top.get(key, "fp32"), key, "str", one_of=PRECISIONS)
                      for key in ("dense_arch_precision", "over_arch_precision")}
    towers = parse_towers(top.get("towers"), source)
    if towers is not None and can_drop(embedding):
        raise Invalid("embedding.dim", "0 (dropping features) cannot be combined with a towers section: "
                      "the towers' feature groups need every feature")
    return SearchSpace(name=name, description=description, dim=dim, embedding=embedding,
                       dense_arch=dense_arch, over_arch=over_arch, layers=layers, source=source,
                       towers=towers, **part_precision)


