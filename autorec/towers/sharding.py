"""Tower-wise sharding: a tower's tables and its tower module live on one rank, and only the
compressed tower outputs cross ranks.

torchrec's own EmbeddingTowerCollection sharding needs table_row_wise or table_column_wise
tables inside a host (row_wise needs CUDA) and a multi-host topology; this module is the
equivalent plan that runs on CPU/gloo as well as on GPUs (untested there). With W ranks and a
spec with K towers, tower k is owned by rank ``k mod W`` (on one machine each rank stands for a
host group). One training step on a global batch of B samples, B/W per rank:

1. input dist: every rank sends the ids (lengths, values) of tower k's features for its samples
   to tower k's owner (``all_to_all_single``; the same bytes as torchrec's table-wise input dist);
2. the owner pools its tables over the whole global batch ``[B, F_k, D]`` and runs the tower
   module ``[B, c, D]``;
3. output dist: each rank gets back its samples' rows of every tower, ``[B/W, K*c, D]``
   (a differentiable ``all_to_all_single``; its backward carries the gradients the same way);
4. the dense arch, the global interaction stack and the over-arch run data-parallel; their
   gradients are summed over ranks with one ``all_reduce``.

``mode="flat"`` runs the model without towers under the same placement: the owners send every
pooled embedding ``[B/W, F_k, D]`` (what torchrec's table-wise output dist sends). The function
computed is the single-process model's (tested: forward and gradients against one process).

:class:`CommMeter` counts the bytes each rank really hands to the collectives for other ranks.
"""

from __future__ import annotations

import contextlib
import copy
import functools
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torchrec.modules.embedding_modules import EmbeddingBagCollection
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from autorec.arch import ArchSpec, TowerSpec
from autorec.models import RecModel, embedding_configs


# ---- measuring what crosses ranks ------------------------------------------------------------
@dataclass
class CommMeter:
    """Bytes this rank sends to other ranks, per (collective, dtype kind), while active.

    ``all_to_all_single`` counts the input rows meant for other ranks; ``all_reduce`` counts a
    ring all-reduce's ``2 (W-1)/W`` times the tensor; ``all_gather`` the tensor once per other rank.
    Wraps ``torch.distributed``'s Python functions, so torchrec's and autograd's calls are seen too.

    Example:
        >>> meter = CommMeter()
        >>> with meter.active():
        ...     pass
        >>> meter.total()
        0
    """

    sent: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    calls: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def total(self, prefix: str = "") -> int:
        return sum(v for k, v in self.sent.items() if k.startswith(prefix))

    def reset(self) -> None:
        self.sent.clear()
        self.calls.clear()

    def _add(self, op: str, tensor: torch.Tensor, nbytes: float) -> None:
        key = f"{op}.{'float' if tensor.is_floating_point() else 'int'}"
        self.sent[key] += round(nbytes)
        self.calls[key] += 1

    @contextlib.contextmanager
    def active(self) -> Iterator[CommMeter]:
        originals = {name: getattr(dist, name) for name in
                     ("all_to_all_single", "all_reduce", "all_gather", "all_gather_into_tensor")}

        def world(group: Any) -> int:
            return dist.get_world_size(group) if dist.is_initialized() else 1

        def rank(group: Any) -> int:
            return dist.get_rank(group) if dist.is_initialized() else 0

        def all_to_all_single(output: torch.Tensor, input: torch.Tensor, output_split_sizes: Any = None,
                              input_split_sizes: Any = None, group: Any = None,
                              async_op: bool = False) -> Any:
            w = world(group)
            row = input[0].numel() * input.element_size() if input.dim() and input.shape[0] else 0
            if input_split_sizes:
                mine = list(input_split_sizes)[rank(group)]
                self._add("all_to_all", input, (sum(input_split_sizes) - mine) * row)
            else:
                self._add("all_to_all", input, input.shape[0] * row * (w - 1) / w if input.dim() else 0)
            return originals["all_to_all_single"](output, input, output_split_sizes, input_split_sizes,
                                                  group, async_op)

        def all_reduce(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            w = world(kwargs.get("group", args[1] if len(args) > 1 else None))
            self._add("all_reduce", tensor, 2 * (w - 1) / w * tensor.numel() * tensor.element_size())
            return originals["all_reduce"](tensor, *args, **kwargs)

        def all_gather(tensor_list: list[torch.Tensor], tensor: torch.Tensor, *args: Any,
                       **kwargs: Any) -> Any:
            self._add("all_gather", tensor, (len(tensor_list) - 1) * tensor.numel() * tensor.element_size())
            return originals["all_gather"](tensor_list, tensor, *args, **kwargs)

        def all_gather_into_tensor(output: torch.Tensor, input: torch.Tensor, *args: Any,
                                   **kwargs: Any) -> Any:
            self._add("all_gather", input, (output.numel() - input.numel()) * input.element_size())
            return originals["all_gather_into_tensor"](output, input, *args, **kwargs)

        patched: dict[str, Callable[..., Any]] = {
            "all_to_all_single": all_to_all_single, "all_reduce": all_reduce, "all_gather": all_gather,
            "all_gather_into_tensor": all_gather_into_tensor}
        for name, fn in patched.items():
            setattr(dist, name, functools.wraps(originals[name])(fn))
        try:
            yield self
        finally:
            for name, fn in originals.items():
                setattr(dist, name, fn)


# ---- the rank-local model --------------------------------------------------------------------
class _AllToAll(torch.autograd.Function):
    """``dist.all_to_all_single`` of a 1-D tensor whose backward sends the gradients back the
    same way (torch's own differentiable one is deprecated; the functional collectives bypass the
    Python ``dist`` calls that :class:`CommMeter` counts)."""

    @staticmethod
    def forward(ctx: Any, send: torch.Tensor, recv_sizes: list[int], send_sizes: list[int],
                group: dist.ProcessGroup | None) -> torch.Tensor:
        ctx.sizes, ctx.group = (recv_sizes, send_sizes), group
        out = send.new_empty(sum(recv_sizes))
        dist.all_to_all_single(out, send.contiguous(), recv_sizes, send_sizes, group=group)
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
        recv_sizes, send_sizes = ctx.sizes
        back = grad.new_empty(sum(send_sizes))
        dist.all_to_all_single(back, grad.contiguous(), send_sizes, recv_sizes, group=ctx.group)
        return back, None, None, None


def tower_owners(num_towers: int, world_size: int) -> list[int]:
    """The rank that holds each tower's tables and module: tower k on rank ``k mod W``.

    Example:
        >>> tower_owners(4, 2)
        [0, 1, 0, 1]
    """
    return [k % world_size for k in range(num_towers)]


def predicted_bytes_per_sample(spec: ArchSpec, world_size: int, mode: str) -> float:
    """Float bytes one sample's forward sends across ranks in the output dist (the backward
    sends as many): ``(W-1)/W`` of the pooled embeddings (flat: F x D) or of the tower outputs
    (towers: K x c x D), in fp32."""
    width = (len(spec.feature_names) if mode == "flat" or spec.towers is None
             else spec.towers.num_towers * spec.towers.n_out)
    return (world_size - 1) / world_size * width * spec.dim * 4


class TowerParallel(nn.Module):
    """This rank's part of a tower-sharded model; call it on this rank's samples.

    Shapes: dense [B/W, n_dense] and a KeyedJaggedTensor of this rank's B/W samples -> logits
    [B/W]. Collective: every rank calls forward (and backward) together.

    Args:
        model: the whole single-process model (the same weights on every rank, e.g. built under
            the same seed); this rank keeps the parts it owns and the replicated dense parts.
        placement: for a model without towers (mode ``"flat"``): the groups of features whose
            tables live together; every pooled embedding crosses, as in torchrec's table-wise
            sharding. A model with towers (mode ``"towers"``) is placed by its own towers.
        group: the process group (default: the world).

    Example:
        >>> from autorec.arch import TableSpec, TowerSpec, MLPConfig
        >>> from autorec.train.distributed import ensure_process_group
        >>> ensure_process_group()
        >>> spec = ArchSpec(dim=4, tables=tuple(TableSpec(name=f"t{i}", features=(f"f{i}",),
        ...     num_embeddings=10, dim=4) for i in range(4)), towers=TowerSpec(groups=(("f0", "f2"),
        ...     ("f1", "f3")), module=MLPConfig(hidden=(8,), n_out=1), n_out=1))
        >>> kjt = KeyedJaggedTensor.from_lengths_sync(["f0", "f1", "f2", "f3"], torch.arange(12) % 10,
        ...                                           torch.ones(12, dtype=torch.long))
        >>> model = RecModel(spec)
        >>> torch.allclose(TowerParallel(model)(torch.zeros(3, 0), kjt), model(torch.zeros(3, 0), kjt))
        True
    """

    def __init__(self, model: RecModel, placement: TowerSpec | None = None,
                 group: dist.ProcessGroup | None = None) -> None:
        super().__init__()
        spec = model.spec
        if (spec.towers is None) == (placement is None):
            raise ValueError("TowerParallel: give a model with towers (ArchSpec.towers), or a flat model "
                             "and the placement (a TowerSpec whose groups say which tables live together)")
        mode = "towers" if spec.towers is not None else "flat"
        self.placement: TowerSpec = spec.towers or placement  # type: ignore[assignment]
        self.spec, self.mode, self.group = spec, mode, group
        self.rank, self.world = dist.get_rank(group), dist.get_world_size(group)
        groups = self.placement.groups
        self.owners = tower_owners(len(groups), self.world)
        self.mine = [k for k, r in enumerate(self.owners) if r == self.rank]
        # Features each rank owns, in tower order: what the input dist sends there.
        self.features_of = [[f for k in range(len(groups)) if self.owners[k] == r for f in groups[k]]
                            for r in range(self.world)]
        table_of = {f: t for t in spec.tables for f in t.features}
        owned_tables = list(dict.fromkeys(table_of[f].name for f in self.features_of[self.rank]))
        configs = [c for c in embedding_configs(spec) if c.name in owned_tables]
        self.sparse_arch = EmbeddingBagCollection(tables=configs) if configs else None
        if self.sparse_arch is not None:
            with torch.no_grad():
                for name in owned_tables:
                    self.sparse_arch.embedding_bags[name].weight.copy_(
                        model.sparse_arch.embedding_bags[name].weight)
        self.projections = nn.ModuleDict({f: copy.deepcopy(p) for f, p in model.projections.items()
                                          if f in self.features_of[self.rank]})
        self.towers = nn.ModuleDict()
        if mode == "towers":
            self.towers = nn.ModuleDict({str(k): copy.deepcopy(model.towers.towers[k]) for k in self.mine})
        # Per rank r: the vectors r sends to each rank for each of its samples.
        self.width_of = [sum(self.placement.n_out if mode == "towers" else len(groups[k])
                             for k in range(len(groups)) if self.owners[k] == r) for r in range(self.world)]
        self.dense_arch = copy.deepcopy(model.dense_arch)
        self.layers = copy.deepcopy(model.layers)
        self.over_arch = copy.deepcopy(model.over_arch)

    # -- which parameters are replicated (gradients summed over ranks) and which are owned --
    def replicated_parameters(self) -> list[nn.Parameter]:
        parts = [self.dense_arch, self.layers, self.over_arch]
        return [p for part in parts if part is not None for p in part.parameters()]

    def owned_parameters(self) -> list[nn.Parameter]:
        return [*self.towers.parameters(), *self.projections.parameters()]

    def embedding_parameters(self) -> list[nn.Parameter]:
        return list(self.sparse_arch.parameters()) if self.sparse_arch is not None else []

    @torch.no_grad()
    def sync_gradients(self) -> None:
        """Sum the replicated parameters' gradients over ranks (one flat all_reduce)."""
        params = [p for p in self.replicated_parameters() if p.grad is not None]
        if self.world == 1 or not params:
            return
        flat = torch.cat([p.grad.reshape(-1) for p in params])
        dist.all_reduce(flat, group=self.group)
        offset = 0
        for p in params:
            p.grad.copy_(flat[offset:offset + p.numel()].view_as(p))
            offset += p.numel()

    # -- forward --------------------------------------------------------------------------
    def _exchange(self, parts: list[torch.Tensor], dtype: torch.dtype) -> list[torch.Tensor]:
        """Send ``parts[r]`` (1-D) to rank r; return what each rank sent here (not differentiable)."""
        sizes = torch.tensor([p.numel() for p in parts], dtype=torch.int64)
        got = torch.empty_like(sizes)
        dist.all_to_all_single(got, sizes, group=self.group)
        send = torch.cat(parts).to(dtype) if parts else torch.empty(0, dtype=dtype)
        out = torch.empty(int(got.sum()), dtype=dtype)
        dist.all_to_all_single(out, send, got.tolist(), sizes.tolist(), group=self.group)
        return list(out.split(got.tolist()))

    def _input_dist(self, sparse: KeyedJaggedTensor,
                    local_batch: int) -> tuple[KeyedJaggedTensor | None, list[int]]:
        """The global batch's ids of this rank's features, and every rank's sample count."""
        by_name = sparse.to_dict()
        lengths, values = [], []
        for r in range(self.world):
            feats = self.features_of[r]
            lengths.append(torch.cat([by_name[f].lengths().long() for f in feats]) if feats
                           else torch.empty(0, dtype=torch.long))
            values.append(torch.cat([by_name[f].values().long() for f in feats]) if feats
                          else torch.empty(0, dtype=torch.long))
        batches = [int(b[0]) for b in self._exchange([torch.tensor([local_batch])] * self.world, torch.long)]
        got_lengths = self._exchange(lengths, torch.long)
        got_values = self._exchange(values, torch.long)
        feats = self.features_of[self.rank]
        if not feats:
            return None, batches
        # Source s sent feature-major [F_r * B_s] lengths; regroup to feature-major over the global batch.
        per_source = [ls.view(len(feats), -1) for ls in got_lengths]
        value_parts = [vs.split(ls.sum(1).tolist()) for vs, ls in zip(got_values, per_source, strict=True)]
        all_lengths = torch.cat([torch.cat([ls[i] for ls in per_source]) for i in range(len(feats))])
        all_values = torch.cat([torch.cat([vp[i] for vp in value_parts]) for i in range(len(feats))])
        return KeyedJaggedTensor.from_lengths_sync(feats, all_values, all_lengths), batches

    def _owner_outputs(self, kjt: KeyedJaggedTensor, global_batch: int) -> torch.Tensor:
        """[B, width_of[rank], D]: this rank's towers (or pooled features) over the global batch."""
        pooled = self.sparse_arch(kjt).to_dict()
        vectors = {f: self.projections[f](v) if f in self.projections else v for f, v in pooled.items()}
        groups = self.placement.groups
        outs = []
        for k in self.mine:
            x = torch.stack([vectors[f] for f in groups[k]], dim=1)
            outs.append(self.towers[str(k)](x) if self.mode == "towers" else x)
        return torch.cat(outs, dim=1)

    def embed(self, dense: torch.Tensor, sparse: KeyedJaggedTensor) -> torch.Tensor:
        """X0 [B/W, F0, D] of this rank's samples."""
        local_batch, dim = dense.shape[0], self.spec.dim
        kjt, batches = self._input_dist(sparse, local_batch)
        global_batch = sum(batches)
        if kjt is not None:
            owned = self._owner_outputs(kjt, global_batch)  # [B, w, D]
            send = owned.reshape(global_batch, -1)
        else:
            send = torch.empty(global_batch, 0, requires_grad=True)
        width = self.width_of[self.rank] * dim
        recv_rows = [local_batch * self.width_of[r] * dim for r in range(self.world)]
        flat = send.split(batches)  # rows of each rank's samples
        send_flat = torch.cat([part.reshape(-1) for part in flat]) if width else send.reshape(-1)
        out = _AllToAll.apply(send_flat, recv_rows, [b * width for b in batches], self.group)
        pieces = [p.view(local_batch, self.width_of[r], dim) for r, p in enumerate(out.split(recv_rows))]
        x = self._assemble(pieces)
        if self.dense_arch is not None:
            x = torch.cat([self.dense_arch(dense).unsqueeze(1), x], dim=1)
        return x

    def _assemble(self, pieces: list[torch.Tensor]) -> torch.Tensor:
        """Received vectors in the single-process model's order: towers in tower order (towers),
        features in ``spec.feature_names`` order (flat)."""
        groups = self.placement.groups
        cursor = [0] * self.world
        blocks: dict[int, torch.Tensor] = {}
        for k, r in enumerate(self.owners):
            n = self.placement.n_out if self.mode == "towers" else len(groups[k])
            blocks[k] = pieces[r][:, cursor[r]:cursor[r] + n]
            cursor[r] += n
        if self.mode == "towers":
            return torch.cat([blocks[k] for k in range(len(groups))], dim=1)
        column = {f: blocks[k][:, i] for k, g in enumerate(groups) for i, f in enumerate(g)}
        return torch.stack([column[f] for f in self.spec.feature_names], dim=1)

    def forward(self, dense: torch.Tensor, sparse: KeyedJaggedTensor) -> torch.Tensor:
        x = self.layers(self.embed(dense, sparse))
        return self.over_arch(x.flatten(1)).squeeze(-1)


# ---- training ------------------------------------------------------------------------------
class TowerTrainer:
    """Trains a :class:`TowerParallel` on this rank's part of every global batch.

    The loss of a step is the global batch's mean BCE: each rank backpropagates its samples' sum
    divided by the global count, the replicated parameters' gradients are summed over ranks,
    and the owned parameters (tables, tower modules) get their whole-batch gradient through
    the output dist's backward. Tables use Adagrad, the rest Adam.

    Example:
        >>> from autorec.arch import TableSpec, TowerSpec, MLPConfig
        >>> from autorec.train.distributed import ensure_process_group
        >>> ensure_process_group()
        >>> spec = ArchSpec(dim=4, tables=tuple(TableSpec(name=f"t{i}", features=(f"f{i}",),
        ...     num_embeddings=10, dim=4) for i in range(2)), towers=TowerSpec(groups=(("f0", "f1"),),
        ...     module=MLPConfig(hidden=(), n_out=1)))
        >>> kjt = KeyedJaggedTensor.from_lengths_sync(["f0", "f1"], torch.arange(8) % 10,
        ...                                           torch.ones(8, dtype=torch.long))
        >>> trainer = TowerTrainer(TowerParallel(RecModel(spec)))
        >>> loss = trainer.step(torch.zeros(4, 0), kjt, torch.ones(4))
        >>> 0 < loss < 10
        True
    """

    def __init__(self, model: TowerParallel, dense_lr: float = 1e-3, embedding_lr: float = 0.05) -> None:
        self.model = model
        dense = [*model.replicated_parameters(), *model.owned_parameters()]
        self.optimizers: list[torch.optim.Optimizer] = [torch.optim.Adam(dense, lr=dense_lr)]
        if model.embedding_parameters():
            self.optimizers.append(torch.optim.Adagrad(model.embedding_parameters(), lr=embedding_lr))

    def backward(self, dense: torch.Tensor, sparse: KeyedJaggedTensor, labels: torch.Tensor) -> float:
        """Forward and backward of one step, gradients synchronised; the global mean loss."""
        for opt in self.optimizers:
            opt.zero_grad()
        logits = self.model(dense, sparse)
        count = torch.tensor([float(labels.numel())], dtype=torch.float64)
        loss_sum = nn.functional.binary_cross_entropy_with_logits(logits, labels, reduction="sum")
        stats = torch.cat([count, loss_sum.detach().double().view(1)])
        if self.model.world > 1:
            dist.all_reduce(stats, group=self.model.group)
        (loss_sum / stats[0].float()).backward()
        self.model.sync_gradients()
        return float(stats[1] / stats[0])

    def step(self, dense: torch.Tensor, sparse: KeyedJaggedTensor, labels: torch.Tensor) -> float:
        loss = self.backward(dense, sparse, labels)
        for opt in self.optimizers:
            opt.step()
        return loss


# ---- a torchrec plan with the same placement -------------------------------------------------
def tower_plan(spec: ArchSpec, world_size: int, local_world_size: int = 1) -> dict[str, Any]:
    """A sharding plan file (autorec.train.plan format) that places every table of a tower in one
    host group: with H = W / L hosts of L ranks, tower k goes to host ``k mod H`` and its tables,
    table-wise, round robin over that host's ranks. ``local_world_size`` 1 is
    :class:`TowerParallel`'s placement (tower k on rank k mod W). torchrec's trainer then keeps
    a tower's lookups inside its host (its output dist still sends every pooled embedding).

    Example:
        >>> from autorec.arch import TableSpec, MLPConfig
        >>> spec = ArchSpec(dim=4, tables=tuple(TableSpec(name=f"t{i}", features=(f"f{i}",),
        ...     num_embeddings=10, dim=4) for i in range(4)), towers=TowerSpec(groups=(("f0", "f3"),
        ...     ("f1", "f2")), module=MLPConfig(hidden=(), n_out=1)))
        >>> {t: e["ranks"] for t, e in tower_plan(spec, 4, local_world_size=2)["tables"].items()}
        {'t0': [0], 't3': [1], 't1': [2], 't2': [3]}
    """
    if spec.towers is None:
        raise ValueError("tower_plan: the spec has no towers (ArchSpec.towers)")
    if local_world_size < 1 or world_size < 1 or world_size % local_world_size:
        raise ValueError(f"tower_plan: world_size {world_size} must be a positive multiple of "
                         f"local_world_size {local_world_size}")
    hosts = world_size // local_world_size
    table_of = {f: t.name for t in spec.tables for f in t.features}
    tables: dict[str, dict[str, Any]] = {}
    for k, group in enumerate(spec.towers.groups):
        host = k % hosts
        for j, name in enumerate(dict.fromkeys(table_of[f] for f in group)):
            rank = host * local_world_size + j % local_world_size
            tables[name] = {"sharding_type": "table_wise", "ranks": [rank]}
    return {"format": "autorec-sharding-plan", "version": 1, "world_size": world_size, "tables": tables}
