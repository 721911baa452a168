"""The learned sharding cost model: per-table MLP, costs summed per shard, three heads.

The NeuroShard / DreamShard design. Every table's raw features (:data:`FEATURE_NAMES` of
:meth:`TableSet.features`) are normalised (log10 rows, log2 dim, log2 pooling, log10 bytes,
log2 dim x pooling, the 8 reuse fractions; standardised and clamped to the range seen when
fitting, so the model never extrapolates a feature) and go through one shared MLP into a table
embedding h_t. Three linear heads read h_t: the table's forward, backward (with the fused
optimizer update) and communication cost, each exp() of the head's output so costs stay positive
across orders of magnitude. A shard's (one device's) cost is a learned per-head overhead (paid when
the shard is not empty) plus the sum of its tables' costs, so costs add over tables and stay
sensible for shards larger than the profiled ones. Units: milliseconds per training step at the
model's ``batch_size`` (each shard looks up the whole batch, as table-wise sharding does); the
communication head is the all-to-all of the shard's pooled embeddings (forward) and of their
gradients (backward) at ``world_size`` processes.

Shapes: T tables, F raw features, D devices, B batched assignments.

Example:
    >>> from autorec.sharding.tables import TableSet
    >>> ts = TableSet.generate(6, seed=0)
    >>> model = ShardCostModel()
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
DEFAULT_DIR = Path(__file__).resolve().parents[2] / "cost_models"
WEIGHTS, CONFIG = "model.safetensors", "model.json"
N_INPUTS = 5 + REUSE_BINS
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
    """Per-table MLP on normalised table features, summed per shard (one shard = the tables on
    one device), three heads: forward, backward, communication cost (milliseconds per step at a
    stated batch size). The NeuroShard / DreamShard design (module doc).

    Args:
        hidden: width of the per-table MLP (two hidden layers, ReLU) and of the table embedding.
        batch_size: the batch the costs are for (set from the profiles when fitting).
        world_size: processes of the communication measurement.
        device_kind: where the profiles were measured ("cpu", "cuda").

    Example:
        >>> from autorec.sharding.tables import TableSet
        >>> ts = TableSet.generate(4, seed=0)
        >>> m = ShardCostModel(hidden=16)
        >>> m(ts.features(), torch.ones(4, 2) / 2).shape   # soft assignment: half on each device
        torch.Size([2, 3])
        >>> m(ts.features(), torch.ones(5, 4, 2) / 2).shape  # B=5 assignments at once
        torch.Size([5, 2, 3])
    """

    def __init__(self, hidden: int = 64, *, batch_size: int = 1024, world_size: int = 2,
                 device_kind: str = "cpu") -> None:
        super().__init__()
        self.hidden, self.batch_size, self.world_size = hidden, batch_size, world_size
        self.device_kind = device_kind
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
        self._version = next(_version)

    def table_costs(self, features: Tensor) -> Tensor:
        """Each table's own cost [T, 3] (ms; forward, backward, comm), overheads excluded."""
        x = normalised_inputs(features)
        x = ((torch.minimum(torch.maximum(x, self.lo), self.hi) - self.mean) / self.std)
        return self.heads(self.table_mlp(x)).clamp(max=_MAX_LOG).exp()

    @torch.no_grad()
    def init_heads(self, per_table_ms: Tensor) -> None:
        """Start the heads near a typical per-table cost [3] (ms), so fitting does not begin by
        scaling; ``per_table_ms`` [S, 3] is each shard's measured cost over its number of
        tables."""
        self.heads.bias.copy_(per_table_ms.median(0).values.clamp_min(1e-4).log())

    def shard_overhead(self) -> Tensor:
        """Per-head cost [3] (ms) of a non-empty shard beyond its tables' own costs."""
        return nn.functional.softplus(self.overhead)

    def forward(self, features: Tensor, assignment: Tensor) -> Tensor:
        """features [T, F] from TableSet.features(); assignment [T, D] (one-hot or soft weights,
        table -> device), or [B, T, D] for B assignments at once. Returns costs [D, 3] (or
        [B, D, 3]): forward, backward, comm in ms. A device's overhead is scaled by its mass
        min(1, sum of its weights), so an empty device costs 0."""
        if assignment.shape[-2] != features.shape[0]:
            raise ValueError(f"assignment: expected [..., {features.shape[0]}, D] (one row per "
                             f"table), got {list(assignment.shape)}")
        per_table = self.table_costs(features)
        costs = torch.einsum("...td,tk->...dk", assignment, per_table)
        mass = assignment.sum(dim=-2).clamp(max=1.0).unsqueeze(-1)
        return costs + mass * self.shard_overhead()

    def _cached_table_costs(self, tables: TableSet) -> Tensor:
        """[T, 5]: each table's three head costs, their sum and a 1 (to count tables), cached on
        ``tables``."""
        key = f"shard_cost_model:{id(self)}:{self._version}"
        cache = tables._cache
        if key not in cache:
            for stale in [k for k in cache if k.startswith(f"shard_cost_model:{id(self)}:")]:
                del cache[stale]
            with torch.no_grad():
                per_table = self.table_costs(tables.features())
                cache[key] = torch.cat([per_table, per_table.sum(-1, keepdim=True),
                                        torch.ones(len(tables), 1)], dim=-1)
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
        (devices[t] = device of table t). The per-table costs are cached on ``tables``, so
        repeated calls on one TableSet cost two index_adds (well under 0.1 ms for 500 tables
        given as a tensor; a Python list costs its conversion on top)."""
        index = self._device_index(tables, devices, num_devices)
        cached = self._cached_table_costs(tables)
        with torch.no_grad():
            costs = torch.zeros(num_devices).index_add_(0, index, cached[:, 3])
            used = torch.zeros(num_devices).index_add_(0, index, cached[:, 4]) > 0
            return costs + used * self.shard_overhead().sum()

    def device_head_costs(self, tables: TableSet, devices: Sequence[int] | Tensor,
                          num_devices: int) -> Tensor:
        """[D, 3] per-device costs per head for a hard assignment (see :meth:`device_costs`)."""
        index = self._device_index(tables, devices, num_devices)
        per_table = self._cached_table_costs(tables)[:, :len(HEADS)]
        with torch.no_grad():
            costs = torch.zeros(num_devices, len(HEADS)).index_add_(0, index, per_table)
            counts = torch.zeros(num_devices).index_add_(0, index, torch.ones(len(tables)))
            return costs + (counts > 0).unsqueeze(-1) * self.shard_overhead()

    def set_normalisation(self, features: Tensor) -> None:
        """Standardise inputs by, and clamp them to, the statistics of ``features`` [N, F]."""
        x = normalised_inputs(features)
        self.mean.copy_(x.mean(0))
        self.std.copy_(x.std(0).clamp_min(1e-3) if x.shape[0] > 1 else torch.ones(N_INPUTS))
        self.lo.copy_(x.min(0).values)
        self.hi.copy_(x.max(0).values)
        self.invalidate()

    def config(self) -> dict[str, Any]:
        return {"format": "autorec-shard-cost-model", "version": 1, "hidden": self.hidden,
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
        """The model :meth:`save` wrote into the directory ``path``."""
        config, config_path, weights_path = read_config(
            path, CONFIG, WEIGHTS, "autorec-shard-cost-model", CostModelError,
            f"fit a cost model first (python benchmarks/sharding_cost_model.py --out {path})")
        try:
            model = cls(int(config["hidden"]), batch_size=int(config["batch_size"]),
                        world_size=int(config["world_size"]), device_kind=str(config["device_kind"]))
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
    per_table = model.table_costs(feats)
    costs = torch.zeros(len(shards), len(HEADS)).index_add(0, index, per_table)
    return costs + model.shard_overhead()


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
    model.set_normalisation(feats)
    # start the heads near the median per-table cost, so the first steps are not spent scaling
    sizes = torch.bincount(index, minlength=len(shards)).float().unsqueeze(-1)
    model.init_heads(targets / sizes)
    optimiser = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, steps)
    log_target = targets.log()
    model.train()
    for _ in range(steps):
        per_table = model.table_costs(feats)
        pred = torch.zeros_like(targets).index_add(0, index, per_table) + model.shard_overhead()
        loss = (pred.log() - log_target).pow(2).mean()
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        schedule.step()
    model.eval()
    model.invalidate()
    return model
