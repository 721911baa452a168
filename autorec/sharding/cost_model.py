"""The learned sharding cost model: per-table MLP, pooled per shard, a shard-level correction.

The NeuroShard / DreamShard design. Every table's raw features (:data:`FEATURE_NAMES` of
:meth:`TableSet.features`) are normalised (log10 rows, log2 dim, log2 pooling, log10 bytes,
log2 dim x pooling, the 8 reuse fractions; standardised and clamped to the range seen when
fitting, so the model never extrapolates a feature) and go through one shared MLP into a table
embedding h_t. Three linear heads read h_t: the table's forward, backward (with the fused
optimizer update) and communication cost, each exp() of the head's output so costs stay positive
across orders of magnitude. A shard's (one device's) cost is then, per head,

    cost = (overhead + sum of its tables' costs) * exp(c * tanh(g(z)))

- ``kind="additive"`` (the version-1 model): no correction (g = 0), so costs add over tables;
- ``kind="shard-mlp"``: g is a shard-level MLP over z = [mean of the shard's table embeddings,
  log number of tables, log total width (sum of dims), log total lookup width (sum of
  dim x pooling)], the three counts standardised and clamped to the range of the fitted shards.
  The correction is bounded (a factor within exp(+-c), c = ``max_correction``) and its inputs
  are clamped, so on a shard of 100+ tables (profiles have <= 40) the cost is the additive sum
  times the factor fitted for the largest profiled shards of similar tables: it keeps growing
  linearly with the tables and never runs away. The shard state the correction reads (the sums
  of costs, embeddings, widths and a count) is itself a sum over tables, so a planner can keep
  it per device and add a table in O(H) (:meth:`ShardCostModel.table_state`,
  :meth:`ShardCostModel.shard_costs`).

Units: milliseconds per training step at the model's ``batch_size`` (each shard looks up the
whole batch, as table-wise sharding does); the communication head is the all-to-all of the
shard's pooled embeddings (forward) and of their gradients (backward) at ``world_size``
processes.

Shapes: T tables, F raw features, D devices, B batched assignments, H hidden width,
S = 6 + H shard-state width.

Example:
    >>> from autorec.sharding.tables import TableSet
    >>> ts = TableSet.generate(6, seed=0)
    >>> model = ShardCostModel(kind="shard-mlp")
    >>> assignment = torch.nn.functional.one_hot(torch.tensor([0, 1, 0, 1, 2, 2]), 3).float()
    >>> model(ts.features(), assignment).shape
    torch.Size([3, 3])
    >>> model.device_costs(ts, [0, 1, 0, 1, 2, 2], 4).shape  # device 3 holds nothing: cost 0
    torch.Size([4])
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from autorec.sharding.saved import load_weights, read_config
from autorec.sharding.tables import FEATURE_NAMES, REUSE_BINS, TableSet

HEADS = ("forward", "backward", "comm")
KINDS = ("additive", "shard-mlp")
DEFAULT_DIR = Path(__file__).resolve().parents[2] / "cost_models"
WEIGHTS, CONFIG = "model.safetensors", "model.json"
N_INPUTS = 5 + REUSE_BINS
N_SHARD_COUNTS = 3  # log tables, log total width, log total lookup width
STATE_COUNT = len(HEADS)  # column of the table count in a shard state; then width, lookups
_MAX_LOG = 20.0  # exp(20) ms: far above any step; keeps an untrained model finite
_version = itertools.count()


class CostModelError(ValueError):
    """A cost model file is missing or malformed; the message names the path."""


def normalised_inputs(features: Tensor) -> Tensor:
    """Raw features [T, F] -> model inputs [T, 13]: logs of sizes, then the reuse histogram.

    Example:
        >>> from autorec.sharding.tables import TableSet
        >>> normalised_inputs(TableSet.generate(2, seed=0).features()).shape
        torch.Size([2, 13])
    """
    if features.shape[-1] != len(FEATURE_NAMES):
        raise ValueError(f"features: expected [T, {len(FEATURE_NAMES)}] ({', '.join(FEATURE_NAMES)}), "
                         f"got {list(features.shape)}")
    rows, dim, pooling, nbytes = (features[..., i].clamp_min(1e-6) for i in range(4))
    logs = torch.stack([rows.log10(), dim.log2(), pooling.log2(), nbytes.log10(),
                        (dim * pooling).log2()], dim=-1)
    return torch.cat([logs, features[..., 4:]], dim=-1)


class ShardCostModel(nn.Module):
    """Per-table MLP on normalised table features, pooled per shard (one shard = the tables on
    one device), three heads: forward, backward, communication cost (milliseconds per step at a
    stated batch size). The NeuroShard / DreamShard design (module doc).

    Args:
        hidden: width of the per-table MLP (two hidden layers, ReLU), of the table embedding and
            of the shard MLP.
        batch_size: the batch the costs are for (set from the profiles when fitting).
        world_size: processes of the communication measurement.
        device_kind: where the profiles were measured ("cpu", "cuda").
        kind: "additive" (shard cost = overhead + sum of table costs) or "shard-mlp" (that sum
            times a bounded, learned per-shard factor: module doc).
        max_correction: c, the bound of the shard factor's log (shard-mlp only).

    Example:
        >>> from autorec.sharding.tables import TableSet
        >>> ts = TableSet.generate(4, seed=0)
        >>> m = ShardCostModel(hidden=16, kind="shard-mlp")
        >>> m(ts.features(), torch.ones(4, 2) / 2).shape   # soft assignment: half on each device
        torch.Size([2, 3])
        >>> m(ts.features(), torch.ones(5, 4, 2) / 2).shape  # B=5 assignments at once
        torch.Size([5, 2, 3])
        >>> m.table_state(ts.features()).shape               # [T, S]: what a shard sums
        torch.Size([4, 22])
    """

    def __init__(self, hidden: int = 64, *, batch_size: int = 1024, world_size: int = 2,
                 device_kind: str = "cpu", kind: str = "additive",
                 max_correction: float = 1.0) -> None:
        super().__init__()
        if kind not in KINDS:
            raise ValueError(f"kind: expected one of {', '.join(KINDS)}, got {kind!r}")
        self.hidden, self.batch_size, self.world_size = hidden, batch_size, world_size
        self.device_kind, self.kind, self.max_correction = device_kind, kind, float(max_correction)
        self.metadata: dict[str, Any] = {}
        self.register_buffer("mean", torch.zeros(N_INPUTS))
        self.register_buffer("std", torch.ones(N_INPUTS))
        self.register_buffer("lo", torch.full((N_INPUTS,), -1e9))
        self.register_buffer("hi", torch.full((N_INPUTS,), 1e9))
        self.table_mlp = nn.Sequential(nn.Linear(N_INPUTS, hidden), nn.ReLU(),
                                       nn.Linear(hidden, hidden), nn.ReLU())
        self.heads = nn.Linear(hidden, len(HEADS))
        # inverse softplus of 0.05 ms: a small per-shard overhead to start from
        self.overhead = nn.Parameter(torch.full((len(HEADS),), math.log(math.expm1(0.05))))
        if kind == "shard-mlp":
            # the shard counts' standardisation and clamp range (set from the fitted shards)
            self.register_buffer("shard_mean", torch.zeros(N_SHARD_COUNTS))
            self.register_buffer("shard_std", torch.ones(N_SHARD_COUNTS))
            self.register_buffer("shard_lo", torch.full((N_SHARD_COUNTS,), -1e9))
            self.register_buffer("shard_hi", torch.full((N_SHARD_COUNTS,), 1e9))
            self.shard_mlp = nn.Sequential(nn.Linear(hidden + N_SHARD_COUNTS, hidden), nn.Tanh(),
                                           nn.Linear(hidden, len(HEADS)))
            nn.init.zeros_(self.shard_mlp[-1].weight)  # start additive: factor exp(0) = 1
            nn.init.zeros_(self.shard_mlp[-1].bias)
        self._version = next(_version)

    @property
    def state_size(self) -> int:
        """S: the width of a table's (and a shard's) state, see :meth:`table_state`."""
        return len(HEADS) + 3 + self.hidden

    def table_costs(self, features: Tensor) -> Tensor:
        """Each table's own cost [T, 3] (ms; forward, backward, comm), overheads and the shard
        factor excluded."""
        return self.table_state(features)[:, :len(HEADS)]

    def table_state(self, features: Tensor) -> Tensor:
        """Each table's contribution [T, S] to a shard's state, which is the sum over the
        shard's tables: its three head costs (ms), a 1 (the table count), its dim (width), its
        dim x pooling (lookup width) and its embedding h_t [H]."""
        x = normalised_inputs(features)
        x = ((torch.minimum(torch.maximum(x, self.lo), self.hi) - self.mean) / self.std)
        emb = self.table_mlp(x)
        costs = self.heads(emb).clamp(max=_MAX_LOG).exp()
        dim, pooling = features[:, 1:2], features[:, 2:3]
        return torch.cat([costs, torch.ones_like(dim), dim, dim * pooling, emb], dim=-1)

    def shard_costs(self, state: Tensor) -> Tensor:
        """Shard states [..., S] (sums of :meth:`table_state` rows; soft weights allowed) ->
        costs [..., 3] (ms). A shard's overhead is scaled by min(1, its table count), so an
        empty shard costs 0. Any float dtype; the result has ``state``'s dtype."""
        count = state[..., STATE_COUNT]
        base = state[..., :len(HEADS)] + count.clamp(max=1.0).unsqueeze(-1) * self.shard_overhead()
        if self.kind == "additive":
            return base
        return base * self.shard_factor(state)

    def shard_factor(self, state: Tensor) -> Tensor:
        """The shard-mlp model's per-head factor [..., 3] in exp(+-max_correction) of shard
        states [..., S] (1 for the additive model)."""
        if self.kind == "additive":
            return torch.ones(*state.shape[:-1], len(HEADS), dtype=state.dtype)
        s = state.float()
        count = s[..., STATE_COUNT]
        mean_emb = s[..., STATE_COUNT + 3:] / count.clamp_min(1e-6).unsqueeze(-1)
        z = s[..., STATE_COUNT:STATE_COUNT + 3].clamp_min(1e-6).log()
        z = (torch.minimum(torch.maximum(z, self.shard_lo), self.shard_hi) - self.shard_mean) / self.shard_std
        g = self.shard_mlp(torch.cat([mean_emb, z], dim=-1))
        return (self.max_correction * torch.tanh(g)).exp().to(state.dtype)

    @torch.no_grad()
    def init_heads(self, per_table_ms: Tensor) -> None:
        """Start the heads near a typical per-table cost [3] (ms), so fitting does not begin by
        scaling; ``per_table_ms`` [S, 3] is each shard's measured cost over its number of
        tables."""
        self.heads.bias.copy_(per_table_ms.median(0).values.clamp_min(1e-4).log())

    def shard_overhead(self) -> Tensor:
        """Per-head cost [3] (ms) of a non-empty shard beyond its tables' own costs (before the
        shard factor)."""
        return nn.functional.softplus(self.overhead)

    def forward(self, features: Tensor, assignment: Tensor) -> Tensor:
        """features [T, F] from TableSet.features(); assignment [T, D] (one-hot or soft weights,
        table -> device), or [B, T, D] for B assignments at once. Returns costs [D, 3] (or
        [B, D, 3]): forward, backward, comm in ms. A device's overhead is scaled by its mass
        min(1, sum of its weights), so an empty device costs 0."""
        if assignment.shape[-2] != features.shape[0]:
            raise ValueError(f"assignment: expected [..., {features.shape[0]}, D] (one row per "
                             f"table), got {list(assignment.shape)}")
        state = torch.einsum("...td,ts->...ds", assignment, self.table_state(features))
        return self.shard_costs(state)

    def _cached_table_state(self, tables: TableSet) -> Tensor:
        """[T, S] :meth:`table_state` of ``tables``, cached on ``tables``."""
        key = f"shard_cost_model:{id(self)}:{self._version}"
        cache = tables._cache
        if key not in cache:
            for stale in [k for k in cache if k.startswith(f"shard_cost_model:{id(self)}:")]:
                del cache[stale]
            with torch.no_grad():
                cache[key] = self.table_state(tables.features())
        return cache[key]

    def _device_index(self, tables: TableSet, devices: Sequence[int] | Tensor,
                      num_devices: int) -> Tensor:
        if isinstance(devices, Tensor):
            index = devices.long()
        else:  # numpy converts a list of ints several times faster than torch.as_tensor
            index = torch.from_numpy(np.asarray(devices, dtype=np.int64))
        if index.shape != (len(tables),):
            raise ValueError(f"devices: expected one device per table ({len(tables)}), "
                             f"got shape {list(index.shape)}")
        if len(tables):
            lo, hi = (int(x) for x in torch.aminmax(index))
            if lo < 0 or hi >= num_devices:
                raise ValueError(f"devices: expected device ids in 0..{num_devices - 1}, "
                                 f"got {lo}..{hi}")
        return index

    def invalidate(self) -> None:
        """Forget cached per-table costs (call after changing the parameters by hand)."""
        self._version = next(_version)

    def device_costs(self, tables: TableSet, devices: Sequence[int] | Tensor,
                     num_devices: int) -> Tensor:
        """[D] total cost per device (forward + backward + comm, ms) for a hard assignment
        (devices[t] = device of table t). The per-table states are cached on ``tables``, so
        repeated calls on one TableSet cost an index_add and the shard MLP over D rows."""
        return self.device_head_costs(tables, devices, num_devices).sum(-1)

    def device_head_costs(self, tables: TableSet, devices: Sequence[int] | Tensor,
                          num_devices: int) -> Tensor:
        """[D, 3] per-device costs per head for a hard assignment (see :meth:`device_costs`)."""
        index = self._device_index(tables, devices, num_devices)
        per_table = self._cached_table_state(tables)
        with torch.no_grad():
            state = torch.zeros(num_devices, per_table.shape[1]).index_add_(0, index, per_table)
            return self.shard_costs(state)

    def set_normalisation(self, features: Tensor, shard_index: Tensor | None = None) -> None:
        """Standardise inputs by, and clamp them to, the statistics of ``features`` [N, F]; with
        ``shard_index`` [N] (the shard of each row), the shard counts' too (shard-mlp)."""
        x = normalised_inputs(features)
        self.mean.copy_(x.mean(0))
        self.std.copy_(x.std(0).clamp_min(1e-3) if x.shape[0] > 1 else torch.ones(N_INPUTS))
        self.lo.copy_(x.min(0).values)
        self.hi.copy_(x.max(0).values)
        if self.kind == "shard-mlp" and shard_index is not None:
            n = int(shard_index.max()) + 1
            per_row = torch.stack([torch.ones(len(features)), features[:, 1],
                                   features[:, 1] * features[:, 2]], dim=-1)
            z = torch.zeros(n, N_SHARD_COUNTS).index_add_(0, shard_index, per_row).clamp_min(1e-6).log()
            self.shard_mean.copy_(z.mean(0))
            self.shard_std.copy_(z.std(0).clamp_min(1e-3) if n > 1 else torch.ones(N_SHARD_COUNTS))
            self.shard_lo.copy_(z.min(0).values)
            self.shard_hi.copy_(z.max(0).values)
        self.invalidate()

    def config(self) -> dict[str, Any]:
        return {"format": "autorec-shard-cost-model", "version": 2, "kind": self.kind,
                "hidden": self.hidden, "max_correction": self.max_correction,
                "batch_size": self.batch_size, "world_size": self.world_size,
                "device_kind": self.device_kind, "heads": list(HEADS),
                "features": list(FEATURE_NAMES), "metadata": self.metadata}

    def save(self, path: str | Path) -> Path:
        """Write ``model.safetensors`` and ``model.json`` into the directory ``path``."""
        from safetensors.torch import save_file

        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        save_file({k: v.detach().contiguous() for k, v in self.state_dict().items()}, path / WEIGHTS)
        (path / CONFIG).write_text(json.dumps(self.config(), indent=2) + "\n")
        return path

    @classmethod
    def load(cls, path: str | Path) -> ShardCostModel:
        """The model :meth:`save` wrote into the directory ``path``. Version-1 files (no
        ``kind``) are additive models."""
        config, config_path, weights_path = read_config(
            path, CONFIG, WEIGHTS, "autorec-shard-cost-model", CostModelError,
            f"fit a cost model first (python benchmarks/sharding_cost_model.py --out {path})")
        version = config.get("version", 1)
        kind = config.get("kind", "additive") if version == 1 else config.get("kind")
        if version not in (1, 2):
            raise CostModelError(f"{config_path}: version: expected 1 or 2, got {version!r}")
        if kind not in KINDS:
            raise CostModelError(f"{config_path}: kind: expected one of {', '.join(KINDS)}, "
                                 f"got {kind!r}")
        try:
            model = cls(int(config["hidden"]), batch_size=int(config["batch_size"]),
                        world_size=int(config["world_size"]), device_kind=str(config["device_kind"]),
                        kind=kind, max_correction=float(config.get("max_correction", 1.0)))
        except KeyError as exc:
            raise CostModelError(f"{config_path}: missing key {exc.args[0]!r}") from None
        model.metadata = dict(config.get("metadata", {}))
        load_weights(model, weights_path, config_path, CostModelError)
        model.invalidate()
        return model.eval()

    @classmethod
    def default(cls, device_kind: str = "cpu") -> ShardCostModel:
        """The fitted model committed under ``cost_models/<device_kind>/``."""
        path = DEFAULT_DIR / device_kind
        if not (path / CONFIG).is_file():
            raise CostModelError(f"no fitted sharding cost model for {device_kind!r}: {path / CONFIG} "
                                 f"is missing (profile with `autorec profile sharding --out {path}` "
                                 f"and fit with benchmarks/sharding_cost_model.py)")
        return cls.load(path)


def shard_batch(shards: Sequence[TableSet]) -> tuple[Tensor, Tensor]:
    """All shards' tables stacked: features [N, F] and the shard index [N] of each table."""
    feats = torch.cat([s.features() for s in shards])
    index = torch.cat([torch.full((len(s),), i, dtype=torch.long) for i, s in enumerate(shards)])
    return feats, index


def predict_shards(model: ShardCostModel, shards: Sequence[TableSet]) -> Tensor:
    """Predicted costs [S, 3] (ms) of S shards, each one device's tables."""
    feats, index = shard_batch(shards)
    return model.shard_costs(shard_states(model, feats, index, len(shards)))


def shard_states(model: ShardCostModel, features: Tensor, index: Tensor, num_shards: int) -> Tensor:
    """Shard states [num_shards, S]: the :meth:`ShardCostModel.table_state` rows of
    ``features`` [N, F] summed by their shard ``index`` [N] (differentiable)."""
    per_table = model.table_state(features)
    return torch.zeros(num_shards, per_table.shape[1]).index_add(0, index, per_table)


def mape(pred: Tensor, target: Tensor) -> dict[str, float]:
    """Mean absolute percentage error (%) per head, and of the summed total, of [S, 3] costs.

    Example:
        >>> round(mape(torch.tensor([[1.1, 2.0, 1.0]]), torch.tensor([[1.0, 2.0, 1.0]]))["total"], 3)
        2.5
    """
    out = {h: float(((pred[:, i] - target[:, i]).abs() / target[:, i]).mean() * 100)
           for i, h in enumerate(HEADS)}
    out["total"] = float(((pred.sum(1) - target.sum(1)).abs() / target.sum(1)).mean() * 100)
    return out


def fit(model: ShardCostModel, shards: Sequence[TableSet], targets: Tensor, *, steps: int = 3000,
        lr: float = 3e-3, weight_decay: float = 1e-5, seed: int = 0) -> ShardCostModel:
    """Fit ``model`` to measured shard costs ``targets`` [S, 3] (ms), full batch, on the
    squared log ratio of predicted to measured cost (a relative error: shards of 0.1 ms and of
    100 ms count alike). Sets the input normalisation from these shards' tables first."""
    if targets.shape != (len(shards), len(HEADS)) or not bool((targets > 0).all()):
        raise ValueError(f"targets: expected positive costs [{len(shards)}, 3], got "
                         f"{list(targets.shape)}")
    torch.manual_seed(seed)
    feats, index = shard_batch(shards)
    model.set_normalisation(feats, index)
    # start the heads near the median per-table cost, so the first steps are not spent scaling
    sizes = torch.bincount(index, minlength=len(shards)).float().unsqueeze(-1)
    model.init_heads(targets / sizes)
    optimiser = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, steps)
    log_target = targets.log()
    model.train()
    for _ in range(steps):
        pred = model.shard_costs(shard_states(model, feats, index, len(shards)))
        loss = (pred.log() - log_target).pow(2).mean()
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        schedule.step()
    model.eval()
    model.invalidate()
    return model
