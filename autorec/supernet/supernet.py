"""The weight-sharing supernet: every choice of a SearchSpace at once, and derive() -> ArchSpec.

Built from the same :class:`~autorec.space.SearchSpace` as every other strategy, for one D,
dense arch and over-arch (a DNAS trial fixes those; see :mod:`autorec.strategies.dnas`):

- embeddings: one table per feature; the width choice of each embedding group (``emb.<group>``)
  reads its columns (a prefix of the widest width, or with ``width_columns="own"`` its own
  block: :mod:`autorec.supernet.widths`), then a per-feature projection to D (a width equal to
  D bypasses it, as in :class:`~autorec.models.RecModel`);
- layers: ``max(layers.num)`` layers, each a :class:`~autorec.supernet.mixed.MixedChoice`
  (``layer<i>.kind``) over max-size weight-shared ops (:mod:`autorec.supernet.ops`), one per
  kind; layers past ``min(layers.num)`` also offer ``skip``, which derive() drops when the space
  does not list skip;
- per-layer precision: where the layer's kinds offer more than one format, the layer (its whole
  mixed op) runs under a :class:`~autorec.supernet.mixed.MixedChoice` (``layer<i>.precision``)
  over ``AtPrecision(layer, p)``: one set of weights, its dense products quantised in each
  format (:mod:`autorec.precision.layers`). The choice's values are the union of the kinds'
  formats; a kind that lacks the chosen one derives to its most probable own;
- the over-arch MLP on the flattened (padded) output of the last layer; given ``over_arch=None``
  the supernet searches it too: one MLP at the widest size of each hidden layer, and the choice
  ``over_arch`` (the space's values, all of one depth) masks each layer's units to a prefix
  (:class:`MaskedOverArch`).

Data flow and shapes as in :class:`~autorec.models.RecModel`, except that every layer's output
is padded to the widest its candidates give, and the outputs of the ops without a norm whose
scale is a power of their input's (dlrm, dcnv2) are RMS-rescaled per sample before the mix, so a
deep stack of them cannot overflow (the derived model has no such rescale; see
:class:`~autorec.supernet.mixed.MixedChoice`). ``rescale=False`` turns that off, so that every
path computes what its derived model does (safe for shallow spaces such as the quickstart's), and
a list of kinds (``["dlrm"]``) rescales only those.

Not searched here (each takes the first value the space offers that is valid at D): DHEN
``num_heads`` and ``dcn_layers``. The dense arch's, over-arch's and tables' precisions are not
searched either: derive() leaves them fp32.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Mapping
from typing import Any

import torch
from torch import nn
from torchrec.modules.embedding_configs import EmbeddingBagConfig, PoolingType
from torchrec.modules.embedding_modules import EmbeddingBagCollection
from torchrec.modules.mlp import MLP
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from autorec.arch import ArchSpec, BlockConfig, TableSpec, TowerSpec
from autorec.blocks import identity_kind
from autorec.data.schema import Schema
from autorec.precision.layers import AtPrecision
from autorec.space import SearchSpace, SpaceError
from autorec.space.stacks import groups_of
from autorec.space.tables import hashed_rows
from autorec.supernet.compact import compact_forward, single_path
from autorec.supernet.hashing import hash_layout, pooled_by_hash
from autorec.supernet.mixed import (
    Choice,
    ChoiceSet,
    MaskedOverArch,
    MixedChoice,
    SupernetError,
    Weights,
    projected_width,
)
from autorec.supernet.ops import SUPER_BLOCKS, SuperBlock, rescaled_kinds
from autorec.supernet.towers import SuperTowers
from autorec.supernet.widths import embedding_widths

Ranker = Callable[[str, tuple[Any, ...]], list[Any]]  # choice name, values -> values, preferred first
_MAX_TRIES = 10_000  # configs tried per layer before derive gives up on finding a valid one


def block_fields(space: SearchSpace, kind: str, dim: int) -> dict[str, tuple[Any, ...]]:
    """The values the supernet searches for each field of ``kind`` at width ``dim`` (its super-op
    may narrow them: one fixed value where a choice cannot share weights)."""
    fields = {k: tuple(v) for k, v in space.layers.blocks.get(kind, {}).items()}
    return super_op(kind).narrow(fields, dim)


def super_op(kind: str) -> type[SuperBlock]:
    """The weight-shared op of block kind ``kind``; a SupernetError when it has none."""
    try:
        return SUPER_BLOCKS[kind]
    except KeyError:
        raise SupernetError(f"layers.kinds: block kind {kind!r} has no weight-shared super-op "
                            f"(autorec.supernet.ops.SUPER_BLOCKS), so the one-shot search cannot "
                            f"mix it; search it with a multi-trial strategy (tpe, random)") from None


class Supernet(nn.Module):
    """Every architecture of ``space`` for ``schema`` at one ``dim``, dense arch and over-arch.

    Args:
        space: the search space.
        schema: the dataset's features.
        dim: D (one of ``space.dim``).
        dense_arch: the dense MLP's sizes (one of ``space.dense_arch``).
        over_arch: the over-arch sizes (one of ``space.over_arch``), or None to search them as
            the choice ``over_arch`` (the space's values must all have one depth).
        device: where the embedding tables go (``meta`` defers them to DistributedModelParallel).
        rescale: RMS-rescale the outputs of the ops without a norm (dlrm, dcnv2) in the mix
            (default). False: every path computes what its derived model does, but a deep stack
            of such ops can overflow (see :class:`~autorec.supernet.mixed.MixedChoice`). A list
            of kinds: only those kinds' outputs (each one of the space's kinds without a norm).
        width_columns: ``shared`` (each width a prefix of one table) or ``own`` (each width its
            own columns): see :mod:`autorec.supernet.widths`.
        hash_rows: ``shared`` (each hash size the first rows of one table) or ``own`` (each its
            own rows): see :mod:`autorec.supernet.hashing`.

    Example:
        >>> from autorec.data import Schema, SparseFeature
        >>> space = SearchSpace.from_dict({"dim": [8], "dense_arch": [[16]], "over_arch": [[16]],
        ...                                "layers": {"num": [1, 2], "kinds": ["dlrm", "dcnv2"],
        ...                                           "dcnv2": {"rank": [0, 4]}}})
        >>> schema = Schema(("x",), (SparseFeature("u", 10), SparseFeature("i", 20)))
        >>> net = Supernet(space, schema, dim=8, dense_arch=(16,), over_arch=(16,))
        >>> sorted(net.arch.choices)
        ['layer0.dcnv2.rank', 'layer0.kind', 'layer1.dcnv2.rank', 'layer1.kind']
        >>> space.contains(net.derive())
        True
    """

    def __init__(
        self,
        space: SearchSpace,
        schema: Schema,
        dim: int,
        dense_arch: tuple[int, ...],
        over_arch: tuple[int, ...] | None,
        device: torch.device | None = None,
        rescale: bool | Collection[str] = True,
        width_columns: str = "shared",
        hash_rows: str = "shared",
    ) -> None:
        super().__init__()
        for key, value, values in (
            ("dim", dim, space.dim),
            ("dense_arch", tuple(dense_arch), space.dense_arch),
            ("over_arch", None if over_arch is None else tuple(over_arch), space.over_arch),
        ):
            if (key == "dense_arch" and not schema.n_dense) or value is None:
                continue
            if value not in values:
                raise SupernetError(
                    f"{space.source}: {key}: {value!r} is not among the choices {list(values)}"
                )
        self.space, self.schema, self.dim = space, schema, dim
        self.dense_sizes = tuple(dense_arch) if schema.n_dense else ()
        # The over-arch values the supernet holds: the given one, or every value of the space.
        self.over_values: tuple[tuple[int, ...], ...] = (
            tuple(tuple(v) for v in space.over_arch) if over_arch is None else (tuple(over_arch),))
        if len({len(v) for v in self.over_values}) > 1:
            raise SupernetError(f"{space.source}: over_arch: to search it in the supernet, every value "
                                f"must have the same number of layers, got {list(self.over_values)}")
        self.over_sizes = tuple(max(sizes) for sizes in zip(*self.over_values, strict=True))
        choices: list[Choice] = []
        self.groups = groups_of(space.embedding.groups, schema)
        layout = embedding_widths(space, dim, width_columns)
        self.emb_values, self.emb_widths, self.emb_offsets = layout.values, layout.widths, layout.offsets
        # Hash sizes (fractions of each table's rows): each value folds the ids to that many rows,
        # of the one full table (hash_rows: shared) or of its own block (own): supernet/hashing.py.
        self.hash_values = tuple(space.embedding.hash)
        self.cards = {f.name: f.num_embeddings for f in schema.sparse}
        self.row_layout = hash_rows  # hash_rows (shared or own); self.hash_rows(f, k) gives the rows
        layout_rows = hash_layout(self.cards, self.hash_values, hash_rows)
        self.hash_row_maps, self.hash_offsets, table_rows = layout_rows
        for group, _ in self.groups:
            if len(self.emb_values) > 1:
                choices.append(Choice(f"emb.{group}", self.emb_values))
            if len(self.hash_values) > 1:
                choices.append(Choice(f"emb.{group}.hash", self.hash_values))
        self.table_width = layout.table_width
        self.sparse_arch = EmbeddingBagCollection(
            device=device,
            tables=[
                EmbeddingBagConfig(
                    name=f"t_{f.name}",
                    embedding_dim=self.table_width,
                    num_embeddings=table_rows[f.name],
                    feature_names=[f.name],
                    pooling=PoolingType.SUM,
                )
                for f in schema.sparse
            ],
        )
        self.projections = nn.ModuleDict(
            {f.name: nn.Linear(self.table_width, dim, bias=False) for f in schema.sparse}
            if set(self.emb_widths) != {dim}
            else {}
        )
        self.dense_arch = MLP(schema.n_dense, [*self.dense_sizes, dim]) if schema.n_dense else None
        # DMT towers (autorec.supernet.towers): count, module kind and size as mixed ops.
        self.towers = SuperTowers(space.towers, schema, dim) if space.towers is not None else None
        if self.towers is not None:
            choices.extend(self.towers.choices())
        sparse_in = self.towers.num_out if self.towers is not None else len(schema.sparse)
        self.f0 = sparse_in + (1 if schema.n_dense else 0)
        self.layer_kinds: list[tuple[str, ...]] = []
        self.layer_precisions: list[tuple[str, ...]] = []
        self._aliases: dict[str, str] = {}  # layer<i>.<kind>.precision -> layer<i>.precision
        runs: list[nn.Module] = []
        layers, num_in = [], self.f0
        self.rescale = rescaled_kinds(space.layers.kinds, rescale, space.source)
        self.compact = True  # single paths on their live vectors (autorec.supernet.compact)
        for i in range(max(space.layers.num)):
            kinds = tuple(space.layers.kinds)
            if i >= min(space.layers.num) and identity_kind() not in kinds:
                kinds = (*kinds, identity_kind())
            ops: dict[str, SuperBlock] = {}
            for kind in kinds:
                ops[kind] = super_op(kind)(
                    f"layer{i}.{kind}", block_fields(space, kind, dim), num_in, dim
                )
                choices.extend(ops[kind].choices())
            if len(kinds) > 1:
                choices.append(Choice(f"layer{i}.kind", kinds))
            rescaled = [kind for kind in ops if kind in self.rescale]
            layer = MixedChoice(f"layer{i}.kind", ops, max(op.num_out for op in ops.values()), rescaled)
            formats = tuple(dict.fromkeys(p for op in ops.values() for p in op.fields.get("precision", ())))
            run: nn.Module = layer
            if len(formats) > 1:
                choices.append(Choice(f"layer{i}.precision", formats))
                self._aliases.update({f"layer{i}.{k}.precision": f"layer{i}.precision" for k in kinds})
                candidates = {p: AtPrecision(layer, p) for p in formats}
                run = MixedChoice(f"layer{i}.precision", candidates, layer.num_out)
            self.layer_kinds.append(kinds)
            self.layer_precisions.append(formats)
            layers.append(layer)
            runs.append(run)
            num_in = layer.num_out
        self.layers = nn.ModuleList(layers)
        # What forward runs per layer. A plain list, not registered: the precision mixes hold
        # self.layers[i] once per format, and registering them would repeat every weight in the
        # state_dict under each format's name.
        self._runs = runs
        self.num_final = num_in
        self.over_arch: nn.Module
        if len(self.over_values) > 1:
            choices.append(Choice("over_arch", self.over_values))
            self.over_arch = MaskedOverArch("over_arch", num_in * dim, self.over_values)
        else:
            self.over_arch = nn.Sequential(MLP(num_in * dim, list(self.over_sizes)),
                                           nn.Linear(self.over_sizes[-1], 1))
        self.arch = ChoiceSet(choices)

    # ---- forward ----------------------------------------------------------------------
    def hash_rows(self, feature: str, k: int) -> int:
        """Rows of ``feature``'s table at hash value ``k``."""
        return self.hash_row_maps[k][feature]

    def weights_of(self, weights: Weights, name: str, size: int) -> torch.Tensor:
        """The weights of choice ``name``, or [1] when it is fixed (a single value)."""
        return weights[name] if name in self.arch.choices else torch.ones(size)

    def embed(
        self,
        dense: torch.Tensor,
        sparse: KeyedJaggedTensor,
        weights: Weights,
        detach_embeddings: bool = False,
    ) -> torch.Tensor:
        """X0 [B, F0, D]: the dense vector, then each feature's masked, projected embedding.

        ``detach_embeddings``: no gradient into the tables (the architecture step must not train
        them on the validation split; their fused optimizer would apply it in backward).
        """
        pooled = pooled_by_hash(self, sparse, weights)
        vectors = [self.dense_arch(dense)] if self.dense_arch is not None else []
        for group, features in self.groups:
            w = self.weights_of(weights, f"emb.{group}", 1)
            for name in features:
                e = pooled[name].detach() if detach_embeddings else pooled[name]
                vectors.append(projected_width(e, w, self.projections[name], self.emb_widths, self.dim,
                                               self.emb_offsets)
                               if self.projections else e)
        x = torch.stack(vectors, dim=1)
        if self.towers is not None:
            first = 1 if self.dense_arch is not None else 0
            x = torch.cat([x[:, :first], self.towers(x[:, first:], weights)], dim=1)
        return x

    def forward(
        self,
        dense: torch.Tensor,
        sparse: KeyedJaggedTensor,
        weights: Weights,
        detach_embeddings: bool = False,
    ) -> torch.Tensor:
        """Logits [B] of the architecture mix that ``weights`` (from ``arch.sample``) select
        (a single path without gradient to the logits: on its live vectors only, see
        :mod:`autorec.supernet.compact`; ``compact = False`` runs it padded)."""
        if self.compact and self.towers is None and single_path(weights):
            return compact_forward(self, dense, sparse, weights, detach_embeddings)
        x = self.embed(dense, sparse, weights, detach_embeddings)
        for run in self._runs:
            x = run(x, weights)
        if isinstance(self.over_arch, MaskedOverArch):
            return self.over_arch(x.flatten(1), weights).squeeze(-1)
        return self.over_arch(x.flatten(1)).squeeze(-1)

    # ---- derive -----------------------------------------------------------------------
    def choice_name(self, name: str) -> str:
        """The choice that decides field ``name`` (``layer<i>.<kind>.<field>``): itself, or for a
        kind's ``precision`` its layer's ``layer<i>.precision``."""
        return self._aliases.get(name, name)

    def derive_input(self, rank: Ranker) -> tuple[TowerSpec | None, int]:
        """The derived towers (None without towers or at K = 0) and the vectors entering layer 0."""
        towers = self.towers.derive(rank) if self.towers is not None else None
        sparse = len(self.schema.sparse) if towers is None else towers.num_towers * towers.n_out
        return towers, sparse + (1 if self.schema.n_dense else 0)

    def ranker(self, preferred: Mapping[str, Any] | None = None) -> Ranker:
        """Values by probability (most probable first); ``preferred`` values go first. A kind's
        ``precision`` field ranks by its layer's precision choice, kept to the kind's formats."""

        def rank(name: str, values: tuple[Any, ...]) -> list[Any]:
            if name in self._aliases:
                name = self.choice_name(name)
                order = [v for v in self.arch.ranked(name) if v in values]
            else:
                order = self.arch.ranked(name) if name in self.arch.choices else list(values)
            if preferred and name in preferred and preferred[name] in order:
                order = [preferred[name], *(v for v in order if v != preferred[name])]
            return order

        return rank

    def block_values(self, i: int, kind: str, f_in: int, rank: Ranker) -> dict[str, Any] | None:
        """The most preferred valid field values of ``kind`` at layer ``i`` for F_in = ``f_in``
        (in order of preference, field by field), or None when no value makes it valid."""
        op: SuperBlock = self.layers[i].candidates[kind]
        keys = list(op.fields)
        ranked = [rank(f"layer{i}.{kind}.{k}", op.fields[k]) for k in keys]
        for combo in itertools.islice(itertools.product(*ranked), _MAX_TRIES):
            values = dict(zip(keys, combo, strict=True))
            if op.out_features(values, f_in) is not None:
                return values
        return None

    def layer_config(self, i: int, f_in: int, rank: Ranker) -> BlockConfig:
        """Layer ``i``'s derived config for F_in = ``f_in``: the most preferred valid kind."""
        for kind in rank(f"layer{i}.kind", self.layer_kinds[i]):
            values = self.block_values(i, kind, f_in, rank)
            if values is not None:
                return self.layers[i].candidates[kind].config(values)
        raise SupernetError(f"layer {i}: no kind of {self.layer_kinds[i]} is valid for {f_in} input vectors")

    def table_widths(self, rank: Ranker) -> dict[str, tuple[Any, int]]:
        """Feature -> (chosen embedding value, its table width)."""
        out = {}
        for group, features in self.groups:
            value = rank(f"emb.{group}", self.emb_values)[0]
            for name in features:
                out[name] = (value, self.emb_widths[self.emb_values.index(value)])
        return out

    def derive(self, preferred: Mapping[str, Any] | None = None) -> ArchSpec:
        """The ArchSpec of the most probable choices (or of ``preferred`` values, e.g. a sample).

        Each layer takes its most probable kind and field values that are valid for the vectors
        the previous derived layer gives; skip layers are dropped when the space lists no skip.
        """
        from autorec.blocks import out_features

        rank = self.ranker(preferred)
        widths = self.table_widths(rank)
        fractions = {name: rank(f"emb.{group}.hash", self.hash_values)[0]
                     for group, features in self.groups for name in features}
        if not any(width for _, width in widths.values()):  # every group dropped: as the space does
            last = self.groups[-1][1]
            narrowest = min(w for w in self.emb_widths if w)
            for name in last:
                widths[name] = (self.emb_values[self.emb_widths.index(narrowest)], narrowest)
                fractions[name] = self.hash_values[0]
        rows = {f.name: hashed_rows(f.num_embeddings, fractions[f.name]) for f in self.schema.sparse}
        tables = tuple(
            TableSpec(name=f"t_{f.name}", features=(f.name,), num_embeddings=rows[f.name],
                      dim=widths[f.name][1],
                      hash_from=f.num_embeddings if rows[f.name] < f.num_embeddings else None)
            for f in self.schema.sparse if widths[f.name][1]
        )
        dropped = tuple(f.name for f in self.schema.sparse if not widths[f.name][1])
        towers, f_in = self.derive_input(rank)
        if towers is None:  # the kept features enter the stack (a space with towers drops none)
            f_in = len(tables) + (1 if self.schema.n_dense else 0)
        layers = []
        for i in range(len(self.layers)):
            config = self.layer_config(i, f_in, rank)
            f_in = out_features(config, f_in, self.dim)
            layers.append(config)
        if identity_kind() not in self.space.layers.kinds:
            layers = [layer for layer in layers if layer.kind != identity_kind()]
        spec = ArchSpec(
            name=self.space.name,
            dim=self.dim,
            tables=tables,
            n_dense=self.schema.n_dense,
            dense_arch=self.dense_sizes,
            layers=tuple(layers),
            over_arch=rank("over_arch", self.over_values)[0],
            towers=towers,
            dropped=dropped,
        )
        try:
            self.space.to_params(spec)
        except SpaceError as exc:  # a bug: the supernet offered something the space does not
            raise SupernetError(f"derived architecture is not in the space: {exc}") from None
        return spec

    def sample_specs(self, k: int, generator: torch.Generator | None = None) -> list[ArchSpec]:
        """``k`` architectures drawn from the choice probabilities (distinct, most probable first)."""
        probs = self.arch.probs()
        seen: dict[ArchSpec, float] = {}
        for _ in range(20 * k):
            draw = {
                name: self.arch.choices[name].values[int(torch.multinomial(p, 1, generator=generator))]
                for name, p in probs.items()
            }
            spec = self.derive(draw)
            score = sum(
                float(torch.log(probs[n][self.arch.choices[n].values.index(v)])) for n, v in draw.items()
            )
            seen[spec] = max(seen.get(spec, -float("inf")), score)
            if len(seen) >= k:
                break
        return sorted(seen, key=lambda s: -seen[s])[:k]

    def kind_probs(self) -> list[dict[str, float]]:
        """Per layer, the probability of each block kind."""
        probs = self.arch.probs()
        out = []
        for i, kinds in enumerate(self.layer_kinds):
            p = probs.get(f"layer{i}.kind", torch.ones(1))
            out.append({kind: float(p[j]) for j, kind in enumerate(kinds)})
        return out

    def arch_parameters(self) -> list[nn.Parameter]:
        return list(self.arch.parameters())

