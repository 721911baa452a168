"""build_model(ArchSpec) -> nn.Module: embeddings, dense arch, interaction stack, over-arch."""

from __future__ import annotations

import torch
from torch import nn
from torchrec.modules.embedding_configs import DataType, EmbeddingBagConfig, PoolingType
from torchrec.modules.embedding_modules import EmbeddingBagCollection
from torchrec.modules.mlp import MLP
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor, KeyedTensor

from autorec.arch import ArchSpec
from autorec.blocks import build_block
from autorec.blocks.base import first_linear, global_forward_hooks
from autorec.blocks.towers import Towers
from autorec.precision.layers import quantise_model

_EMBEDDING_TYPES = {"fp32": DataType.FP32, "fp16": DataType.FP16}


def embedding_configs(spec: ArchSpec) -> list[EmbeddingBagConfig]:
    """torchrec table configs for ``spec.tables`` (sum pooling)."""
    return [
        EmbeddingBagConfig(name=t.name, embedding_dim=t.dim, num_embeddings=t.num_embeddings,
                           feature_names=list(t.features), pooling=PoolingType.SUM,
                           data_type=_EMBEDDING_TYPES[t.precision])
        for t in spec.tables
    ]


@torch.fx.wrap  # one opaque call under fx: torchrec's TrainPipelineSparseDist traces the model
def _place_features(pooled: KeyedTensor, names: tuple[str, ...], dim: int,
                    projections: nn.ModuleDict) -> torch.Tensor:
    """[B, len(names), dim]: the pooled embeddings in ``names`` order, projected where needed."""
    if not projections and tuple(pooled.keys()) == names:
        flat = pooled.values()
        return flat.reshape(flat.shape[0], len(names), dim)
    # A sharded collection (DistributedModelParallel) returns its features grouped by
    # sharding type, so they are placed by name, never by position.
    by_name = pooled.to_dict()
    return torch.stack([projections[f](by_name[f]) if f in projections else by_name[f]
                        for f in names], dim=1)


@torch.fx.wrap  # opaque under fx, as _place_features
def fold_ids(sparse: KeyedJaggedTensor, rows: dict[str, int],
             offsets: dict[str, int] | None = None) -> KeyedJaggedTensor:
    """``sparse`` with the ids of each feature in ``rows`` taken modulo its table's rows (the
    hashing trick of a table with ``hash_from``), plus its ``offsets`` entry if any (a block of
    rows further down one table); other features pass unchanged.

    Example:
        >>> kjt = KeyedJaggedTensor.from_lengths_sync(["a", "b"], torch.tensor([7, 9, 7, 5]),
        ...                                           torch.tensor([1, 1, 1, 1]))
        >>> fold_ids(kjt, {"a": 4}).values().tolist(), fold_ids(kjt, {"a": 4}, {"a": 10}).values().tolist()
        ([3, 1, 7, 5], [13, 11, 7, 5])
    """
    keys = sparse.keys()
    moduli = torch.tensor([rows.get(k, torch.iinfo(torch.int64).max) for k in keys],
                          dtype=sparse.values().dtype, device=sparse.values().device)
    lengths = torch.tensor(sparse.length_per_key(), device=moduli.device)
    per_value = torch.repeat_interleave(moduli, lengths)
    values = torch.remainder(sparse.values(), per_value)
    if offsets and any(offsets.get(k, 0) for k in keys):
        shift = torch.tensor([offsets.get(k, 0) for k in keys], dtype=values.dtype, device=values.device)
        values = values + torch.repeat_interleave(shift, lengths)
    return KeyedJaggedTensor(keys=keys, values=values,
                             weights=sparse.weights_or_none(), lengths=sparse.lengths(),
                             offsets=sparse.offsets())


class RecModel(nn.Module):
    """The model an ArchSpec describes.

    Shapes: dense [B, n_dense] and a KeyedJaggedTensor holding (at least) every feature of
    ``spec.tables`` -> logits [B]. Inside: X0 [B, F0, D] with the dense vector first, then the
    interaction layers [B, F_i, D], then flatten -> over-arch MLP -> Linear(., 1).

    Args:
        spec: the architecture.
        device: where to allocate parameters; ``torch.device("meta")`` defers allocation of
            the embedding tables to a sharder (DistributedModelParallel).

    Example:
        >>> from autorec.arch import ArchSpec, TableSpec, DotConfig
        >>> spec = ArchSpec(dim=4, n_dense=2, dense_arch=(8,), over_arch=(8,),
        ...     tables=(TableSpec(name="t", features=("f",), num_embeddings=10, dim=4),),
        ...     layers=(DotConfig(),))
        >>> kjt = KeyedJaggedTensor.from_lengths_sync(["f"], torch.tensor([1, 2, 3]), torch.tensor([1, 2]))
        >>> RecModel(spec)(torch.randn(2, 2), kjt).shape
        torch.Size([2])
    """

    def __init__(self, spec: ArchSpec, device: torch.device | None = None) -> None:
        super().__init__()
        self.spec = spec
        dim = spec.dim
        self.sparse_arch = EmbeddingBagCollection(tables=embedding_configs(spec), device=device)
        self.feature_dims = [t.dim for t in spec.tables for _ in t.features]
        # Hashed tables (hash_from): their features' ids are folded into the table's rows.
        self.folded = {f: t.num_embeddings for t in spec.tables if t.hash_from for f in t.features}
        # Tables narrower or wider than D are projected to D, one linear map per feature.
        self.projections = nn.ModuleDict({
            f: nn.Linear(t.dim, dim, bias=False)
            for t in spec.tables if t.dim != dim for f in t.features
        })
        self.dense_arch = MLP(spec.n_dense, [*spec.dense_arch, dim]) if spec.n_dense else None
        self.towers = None
        if spec.towers is not None:  # DMT: each feature group compressed by its tower module
            position = {f: i for i, f in enumerate(spec.feature_names)}
            self.towers = Towers(spec.towers.module, [[position[f] for f in g] for g in spec.towers.groups],
                                 dim, spec.towers.n_out)
        num = spec.num_inputs
        layers = []
        for config in spec.layers:
            block = build_block(config, num, dim)
            layers.append(block)
            num = block.num_out
        self.layers = nn.Sequential(*layers)
        self.num_final = num
        self.over_arch = nn.Sequential(MLP(num * dim, list(spec.over_arch)),
                                       nn.Linear(spec.over_arch[-1], 1))
        quantise_model(self)  # each part's dense modules in its precision (fp32: unchanged)
        if layers:  # a quantised first linear takes its input as it did, in the block's dtype
            layers[-1].feeds_linear = type(first_linear(self.over_arch)) is nn.Linear

    def embed(self, dense: torch.Tensor, sparse: KeyedJaggedTensor) -> torch.Tensor:
        """X0 [B, F0, D]: the dense vector (if any) then one pooled embedding per feature, or
        with towers the towers' outputs [B, K * n_out, D]."""
        parts = self.embed_parts(dense, sparse)
        return torch.cat(parts, dim=1) if len(parts) > 1 else parts[0]

    def embed_parts(self, dense: torch.Tensor, sparse: KeyedJaggedTensor) -> list[torch.Tensor]:
        """:meth:`embed`'s X0 in the parts it is made of: [the dense vector [B, 1, D],] the
        pooled embeddings (or the towers' outputs) [B, F0 - 1, D]."""
        if self.folded:
            sparse = fold_ids(sparse, self.folded)
        x = _place_features(self.sparse_arch(sparse), self.spec.feature_names, self.spec.dim,
                            self.projections)
        if self.towers is not None:
            x = self.towers(x)
        return [x] if self.dense_arch is None else [self.dense_arch(dense).unsqueeze(1), x]

    def head(self, x: torch.Tensor) -> torch.Tensor:
        """Logits [B] of X0 [B, F0, D] (:meth:`embed`'s): the interaction layers and the over-arch."""
        return self.over_arch(self._run_layers(x).flatten(1)).squeeze(-1)

    def forward(self, dense: torch.Tensor, sparse: KeyedJaggedTensor) -> torch.Tensor:
        """Logits [B]. Where the first block reads its input in parts (``takes_parts``, DLRM's
        dots) and no hook on it or module-wide would see the difference, :meth:`embed_parts`'
        list goes to ``layers`` as it is (a hook on ``layers`` gets the list), skipping a
        concatenation of the whole batch's vectors; else :meth:`head` of :meth:`embed`."""
        parts = self.embed_parts(dense, sparse)
        if len(parts) > 1 and self._reads_parts():
            return self.over_arch(self._run_layers(parts).flatten(1)).squeeze(-1)
        return self.head(torch.cat(parts, dim=1) if len(parts) > 1 else parts[0])

    def _run_layers(self, x: torch.Tensor | list[torch.Tensor]) -> torch.Tensor:
        """``self.layers(x)``, or the whole stack run as one by its blocks' ``stack_forward``
        (Wukong's: each layer's tail with the next one's head) where the blocks have one and it
        applies (None where not), unless a hook on ``layers`` would see the difference."""
        run = getattr(type(self.layers[0]), "stack_forward", None) if len(self.layers) else None
        out = None
        if run is not None and not (self.layers._forward_hooks or self.layers._forward_pre_hooks):
            out = run(list(self.layers), x)
        return self.layers(x) if out is None else out

    def _reads_parts(self) -> bool:
        first = self.layers[0] if len(self.layers) else None
        return (getattr(first, "takes_parts", False) and not global_forward_hooks()
                and not (first._forward_hooks or first._forward_pre_hooks))


def build_model(spec: ArchSpec, device: torch.device | None = None) -> RecModel:
    """The nn.Module for ``spec`` (see :class:`RecModel`)."""
    return RecModel(spec, device=device)
