"""Sharding planners: the :class:`Planner` interface and the RL planner trained on the cost model.

Every planner answers ``plan(tables, num_devices, memory_per_device, seed=) -> Assignment``:
each table on one device (table_wise) or split into even column blocks on distinct devices
(column_wise), every device within its memory. The baselines are in
:mod:`autorec.sharding.baselines`; :class:`RLPlanner` is the learned one.

The RL planner (DreamShard-style sequential assignment). Tables are visited in decreasing order
of their predicted cost (:class:`~autorec.sharding.cost_model.ShardCostModel`). A device's cost
is a function of the sum of its tables' cost-model states (their costs, widths, a count and
embeddings: the shard-mlp model's costs do not add over tables), so an episode keeps that sum
per device and costs a device with a block added in one batched model call. For each table
the policy first picks a column split k (1, 2, 4, 8 or 16 even blocks, where the dim divides and
the blocks are >= 4 wide), then a device for each block. Both
choices score candidates with one shared network, so the same weights serve any number of
tables and devices:

- a table encoder reads the table's normalised features (sizes, pooling, access reuse) and its
  predicted cost and bytes relative to the episode's scale (the even share: the cost of a device
  holding 1/D of every table; memory per device);
- the split head scores each k from [table encoding, k's block cost, its split overhead, its
  bytes, the least loaded device's load], minus learnt multiples of how far a block would
  overflow the even share and of the split overhead; the device head scores each device from
  [table encoding, its load before and after taking the block, its gap to the current maximum,
  its memory before and after], minus a learnt multiple of its load after taking the block
  above the least such load, in blocks, and minus a learnt multiple (0 at the start) of how
  much the block raises the sum of per-phase maxima above the least such rise. These greedy
  priors are what the policy starts from and what training corrects;
- devices without room for the block (or holding another block of the table) and splits with
  too few such devices are masked out (:func:`autorec.rl.masked_categorical`).

The reward is minus the episode's cost over the scale, by one of two objectives: "max", the
maximum device cost, or "phase" (DreamShard's), the sum over the phases (forward, backward,
comm) of the maximum device cost, as a synchronous step waits for the slowest device at each
phase. The policy is trained by REINFORCE (:class:`autorec.rl.PolicyGradient`) on generated table sets
and device counts, and plans greedily, keeping the best (by its training objective) of that and
a few sampled episodes; the planner then polishes that plan by :func:`local_search` (moves and
swaps by steepest descent on the same objective, a bounded number of steps).

Shapes: B episodes played at once, D devices, K split options, H hidden width.

Example:
    >>> from autorec.sharding.cost_model import ShardCostModel
    >>> from autorec.sharding.tables import TableSet
    >>> _ = torch.manual_seed(0)
    >>> planner = RLPlanner(ShardCostModel(hidden=16), ShardingPolicy(hidden=16), samples=2)
    >>> tables = TableSet.generate(10, seed=0, rows_range=(1e3, 1e5))
    >>> a = planner.plan(tables, num_devices=4, memory_per_device=2**30)
    >>> len(a.placements), a.num_devices
    (10, 4)
"""

from __future__ import annotations

import json
import math
import tempfile
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from autorec.rl import PolicyGradient, Rollout, masked_categorical
from autorec.sharding.cost_model import DEFAULT_DIR, HEADS, ShardCostModel, normalised_inputs
from autorec.sharding.plans import Assignment, PlanningError
from autorec.sharding.saved import load_weights, read_config
from autorec.sharding.tables import FEATURE_NAMES, TableInfo, TableSet

SPLITS = (1, 2, 4, 8, 16)
MIN_BLOCK_DIM = 4
POLICY_WEIGHTS, POLICY_CONFIG = "planner.safetensors", "planner.json"
# Scales that bring normalised_inputs' logs (log10 rows, log2 dim, log2 pooling, log10 bytes,
# log2 dim x pooling) near [0, 1]; the reuse fractions already are.
_INPUT_SCALE = torch.tensor([8.0, 8.0, 8.0, 12.0, 16.0] + [1.0] * 8)
_DEAD_REWARD = -10.0
OBJECTIVES = ("max", "phase")


class Planner(ABC):
    """A sharding planner: tables -> devices under a per-device memory limit.

    Implementations must place every table exactly once (whole or as even column blocks on
    distinct devices), keep every device within ``memory_per_device`` bytes, return the same
    assignment for the same ``seed``, and raise :class:`PlanningError` when the tables cannot
    fit. ``tests/sharding/test_conformance.py`` checks every planner for this.
    """

    name: ClassVar[str] = "planner"

    @abstractmethod
    def plan(self, tables: TableSet, num_devices: int, memory_per_device: float, *,
             seed: int = 0) -> Assignment:
        """Place ``tables`` on ``num_devices`` devices of ``memory_per_device`` bytes each."""


def split_options(table: TableInfo, num_devices: int) -> list[int]:
    """The column splits k allowed for ``table``: k in :data:`SPLITS`, k <= num_devices, the dim
    divisible by k (torchrec's column_wise takes even blocks) and blocks >= 4 wide (or k = 1).

    Example:
        >>> from autorec.sharding.tables import TableInfo
        >>> split_options(TableInfo("t", 10, 24, 1.0, 4.0, (1.0,) + (0.0,) * 7), 8)
        [1, 2, 4]
    """
    return [k for k in SPLITS if k <= num_devices and table.dim % k == 0
            and (k == 1 or table.dim // k >= MIN_BLOCK_DIM)]


def check_fits(tables: TableSet, num_devices: int, memory_per_device: float) -> None:
    """Raise PlanningError when the tables clearly cannot fit: too few devices, a table whose
    smallest column block exceeds a device, or more bytes in all than all devices hold."""
    if not isinstance(num_devices, int) or num_devices < 1:
        raise PlanningError(f"num_devices: expected a positive integer, got {num_devices!r}")
    if not memory_per_device > 0:
        raise PlanningError(f"memory_per_device: expected a positive number of bytes, "
                            f"got {memory_per_device!r}")
    if len(tables) == 0:
        raise PlanningError("the table set is empty")
    for table in tables.tables:
        k = split_options(table, num_devices)[-1]
        smallest = table.column_shard(k)[0].bytes
        if smallest > memory_per_device:
            raise PlanningError(
                f"table {table.name} ({table.bytes:,} bytes) does not fit: its smallest column "
                f"block ({k} blocks of {smallest:,} bytes) exceeds the {memory_per_device:,.0f} "
                f"bytes of a device")
    if tables.total_bytes > num_devices * memory_per_device:
        raise PlanningError(
            f"the tables need {tables.total_bytes:,} bytes; {num_devices} devices of "
            f"{memory_per_device:,.0f} bytes hold {num_devices * memory_per_device:,.0f}")


def max_device_cost(model: ShardCostModel, tables: TableSet, assignment: Assignment) -> float:
    """The cost model's maximum per-device cost (ms per step) of an assignment."""
    return float(device_costs(model, tables, assignment).max())


def device_costs(model: ShardCostModel, tables: TableSet, assignment: Assignment) -> Tensor:
    """[D] the cost model's per-device cost (forward + backward + comm, ms) of an assignment,
    column blocks as their own shards."""
    shards, devices = assignment.shards(tables)
    return model.device_costs(TableSet(tuple(shards)), devices, assignment.num_devices)


def cost_lower_bound(model: ShardCostModel, tables: TableSet, num_devices: int) -> float:
    """A lower bound (ms) on any plan's maximum device cost by an additive ``model``, memory
    aside: the larger of (each table at its cheapest allowed split, summed, over the devices,
    plus one device's overhead) and the costliest table's cheapest block. (A shard-mlp model's
    costs do not add over tables, so this is no bound for it: see :func:`even_share_cost`.)"""
    if model.kind != "additive":
        raise ValueError(f"cost_lower_bound: needs an additive cost model, got kind {model.kind!r}")
    problem = prepare(model, tables, num_devices, float("inf"))
    cheapest = [float((c * torch.tensor(ks, dtype=c.dtype)).min())
                for c, ks in zip(problem.block_cost, problem.options, strict=True)]
    block = max(float(c.min()) for c in problem.block_cost)
    return max(sum(cheapest) / num_devices + problem.overhead, block + problem.overhead)


def even_share_cost(model: ShardCostModel, tables: TableSet, num_devices: int) -> float:
    """The cost (ms) of one device holding 1/``num_devices`` of every whole table: a perfectly
    even (fractional) plan, the scale plans are compared with. For an additive model it is the
    sum of the tables' costs over the devices plus one device's overhead.

    Example:
        >>> from autorec.sharding.tables import TableSet
        >>> m = ShardCostModel(hidden=8)
        >>> ts = TableSet.generate(8, seed=0)
        >>> additive = float(m.table_costs(ts.features()).sum() / 2 + m.shard_overhead().sum())
        >>> abs(even_share_cost(m, ts, 2) / additive - 1) < 1e-5
        True
    """
    return prepare(model, tables, num_devices, float("inf")).scale


def phase_max_cost(model: ShardCostModel, tables: TableSet, assignment: Assignment) -> float:
    """DreamShard's objective (ms): the sum over the phases (forward, backward, comm) of the
    maximum device cost of that phase, as a synchronous step waits for the slowest device at
    every phase. At least :func:`max_device_cost`."""
    shards, devices = assignment.shards(tables)
    heads = model.device_head_costs(TableSet(tuple(shards)), devices, assignment.num_devices)
    return float(heads.max(0).values.sum())


def local_search(model: ShardCostModel, tables: TableSet, assignment: Assignment,
                 memory_per_device: float, *, objective: str = "max", max_steps: int = 2000,
                 sharpness: float = 50.0, trace: list[float] | None = None) -> Assignment:
    """Improve ``assignment`` by steepest descent over moves (one table or column block to
    another device) and swaps (two blocks on different devices), splits kept, memory and
    distinct-devices rules kept. Each step takes the candidate, among all moves and swaps out
    of the costliest device (of each phase, for ``objective="phase"``), that most lowers a
    soft version of the objective (per phase, max cost x (1 + logsumexp(sharpness x (cost /
    max cost - 1)) / sharpness)); it stops at a local optimum or after ``max_steps``, and
    returns the plan with the lowest objective seen ("max": the max device cost; "phase": the
    sum over phases of the max device cost), so it never returns a plan worse than
    ``assignment`` by the objective. :class:`RLPlanner` polishes its plan with it (``polish``);
    it also measures how far a plan is from a local optimum. A step costs the cost model over
    (blocks on the costliest device) x (all blocks) shard states: about 30 ms for 500 tables on
    16 devices with the committed CPU model. ``trace``, if given, gets the objective after each
    step taken (its length is the number of steps).

    Example:
        >>> from autorec.sharding.tables import TableSet
        >>> m, ts = ShardCostModel(hidden=8), TableSet.generate(12, seed=0)
        >>> a = Assignment.of([(0,)] * 11 + [(1,)], ts, 3)       # nearly all on device 0
        >>> b = local_search(m, ts, a, float("inf"))
        >>> max_device_cost(m, ts, b) < max_device_cost(m, ts, a)
        True
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"objective: expected one of {', '.join(OBJECTIVES)}, got {objective!r}")
    shards, devices = assignment.shards(tables)
    owner = torch.tensor([t for t, p in enumerate(assignment.placements) for _ in p.ranks])
    with torch.no_grad():
        st = model.table_state(TableSet(tuple(shards)).features()).double()      # [N, S]
    nbytes = torch.tensor([float(s.bytes) for s in shards], dtype=torch.float64)
    dev = torch.tensor(devices)
    D, N = assignment.num_devices, len(shards)
    state = torch.zeros(D, st.shape[1], dtype=torch.float64).index_add_(0, dev, st)
    used = torch.zeros(D, dtype=torch.float64).index_add_(0, dev, nbytes)
    holds = torch.zeros(len(tables), D, dtype=torch.long).index_put_(
        (owner, dev), torch.ones(N, dtype=torch.long), accumulate=True)
    # columns P the objective takes a max over devices of: the total, or each phase
    mix = (torch.ones(len(HEADS), 1) if objective == "max" else torch.eye(len(HEADS))).double()

    def costs(s: Tensor) -> Tensor:                                              # [..., P]
        with torch.no_grad():
            return model.shard_costs(s) @ mix

    def soft(sums: Tensor, ref: Tensor) -> Tensor:
        """The soft objective from per-column sums of exp terms [..., P]."""
        return (ref * (1 + sums.log() / sharpness)).sum(-1)

    cost = costs(state)                                                          # [D, P]
    best_value, best_dev = float(cost.max(0).values.sum()), dev.clone()
    for _ in range(max_steps):
        ref = cost.max(0).values                                                 # [P]
        e = (sharpness * (cost / ref - 1)).exp()                                 # [D, P]
        total = e.sum(0)                                                         # [P]
        current = float(soft(total, ref))
        best: tuple[float, list[int], list[int]] = (current * (1 - 1e-9), [], [])
        for top in sorted(set(cost.argmax(0).tolist())):
            on = (dev == top).nonzero().squeeze(-1)                              # [m]
            off = (dev != top).nonzero().squeeze(-1)                             # [n]
            # moves: block on[i] -> device d
            src = costs(state[top] - st[on])                                     # [m, P]
            dst = costs(state.unsqueeze(0) + st[on].unsqueeze(1))                # [m, D, P]
            ok = ((used.unsqueeze(0) + nbytes[on].unsqueeze(1) <= memory_per_device)
                  & (holds[owner[on]] == 0))
            ok[:, top] = False
            sums = (total - e[top] - e.unsqueeze(0) + (sharpness * (src.unsqueeze(1) / ref - 1)).exp()
                    + (sharpness * (dst / ref - 1)).exp())
            move = soft(sums, ref).masked_fill(~ok, math.inf)                    # [m, D]
            if move.numel() and float(move.min()) < best[0]:
                i, d = divmod(int(move.argmin()), D)
                best = (float(move.min()), [int(on[i])], [d])
            if not len(off):
                continue
            # swaps: block on[i] <-> block off[j] (on device dev[off[j]])
            d2 = dev[off]
            delta = st[off].unsqueeze(0) - st[on].unsqueeze(1)                   # [m, n, S]
            src2 = costs(state[top] + delta)
            dst2 = costs(state[d2].unsqueeze(0) - delta)
            bdelta = nbytes[off].unsqueeze(0) - nbytes[on].unsqueeze(1)
            ok2 = ((used[top] + bdelta <= memory_per_device)
                   & (used[d2].unsqueeze(0) - bdelta <= memory_per_device)
                   & (holds[owner[on]][:, d2] == 0) & (holds[owner[off], top] == 0).unsqueeze(0))
            sums2 = (total - e[top] - e[d2].unsqueeze(0) + (sharpness * (src2 / ref - 1)).exp()
                     + (sharpness * (dst2 / ref - 1)).exp())
            swap = soft(sums2, ref).masked_fill(~ok2, math.inf)                  # [m, n]
            if swap.numel() and float(swap.min()) < best[0]:
                i, j = divmod(int(swap.argmin()), len(off))
                best = (float(swap.min()), [int(on[i]), int(off[j])], [int(d2[j]), top])
        if not best[1]:
            break
        for b, d in zip(best[1], best[2], strict=True):
            old = int(dev[b])
            state[old] -= st[b]
            used[old] -= nbytes[b]
            holds[owner[b], old] -= 1
            state[d] += st[b]
            used[d] += nbytes[b]
            holds[owner[b], d] += 1
            dev[b] = d
        cost = costs(state)
        value = float(cost.max(0).values.sum())
        if trace is not None:
            trace.append(value)
        if value < best_value:
            best_value, best_dev = value, dev.clone()
    ranks: list[list[int]] = [[] for _ in tables.tables]
    for b in range(N):
        ranks[int(owner[b])].append(int(best_dev[b]))
    return Assignment.of(ranks, tables, D)


class ShardingPolicy(nn.Module):
    """The planner's policy network: a table encoder, a split head and a device head.

    Args:
        hidden: width H of every layer.
        prior: initial weight of the greedy prior (minus the load after placing, on the
            device logits).

    Example:
        >>> policy = ShardingPolicy(hidden=8)
        >>> enc = policy.encode(torch.zeros(3, TABLE_FEATURES))          # [B, H]
        >>> policy.split_logits(enc, torch.zeros(3, 5, SPLIT_FEATURES)).shape   # [B, K]
        torch.Size([3, 5])
        >>> policy.device_logits(enc, torch.zeros(3, 4, DEVICE_FEATURES)).shape  # [B, D]
        torch.Size([3, 4])
    """

    def __init__(self, hidden: int = 64, prior: float = 8.0) -> None:
        super().__init__()
        self.hidden = hidden
        self.objective = "max"  # what it was trained for (saved with it)
        self.table = nn.Sequential(nn.Linear(TABLE_FEATURES, hidden), nn.ReLU(),
                                   nn.Linear(hidden, hidden), nn.ReLU())
        self.split = nn.Sequential(nn.Linear(hidden + SPLIT_FEATURES, hidden), nn.ReLU(),
                                   nn.Linear(hidden, 1))
        self.device = nn.Sequential(nn.Linear(hidden + DEVICE_FEATURES, hidden), nn.ReLU(),
                                    nn.Linear(hidden, 1))
        # greedy priors (module doc): device: gap to the least loaded choice; split: overflow
        # of the average load, and the extra cost splitting adds
        self.prior = nn.Parameter(torch.tensor(float(prior)))
        self.split_prior = nn.Parameter(torch.tensor([float(prior), float(prior) / 2]))
        # the phase gap's weight (how much a device raises the sum of per-phase maxima above
        # the least such rise, in blocks) relative to the load gap's: 0 at the start (the
        # greedy prior balances the total), for training to set
        self.phase_mix = nn.Parameter(torch.tensor(0.0))

    def encode(self, table_features: Tensor) -> Tensor:
        """[B, TABLE_FEATURES] -> [B, H]."""
        return self.table(table_features)

    def split_logits(self, encoding: Tensor, split_features: Tensor) -> Tensor:
        """encoding [B, H], split_features [B, K, SPLIT_FEATURES] -> logits [B, K]."""
        enc = encoding.unsqueeze(1).expand(-1, split_features.shape[1], -1)
        learnt = self.split(torch.cat([enc, split_features], dim=-1)).squeeze(-1)
        overflow = (split_features[..., 5] - 1).clamp_min(0)
        return learnt - self.split_prior[0] * overflow - self.split_prior[1] * split_features[..., 3]

    def device_logits(self, encoding: Tensor, device_features: Tensor,
                      phase_gap: Tensor | None = None) -> Tensor:
        """encoding [B, H], device_features [B, D, DEVICE_FEATURES] -> logits [B, D]; the last
        feature, the load after taking the block above the least such load (in blocks), is the
        greedy prior's term; ``phase_gap`` [B, D] (the rise of the sum of per-phase maxima
        above the least such rise, in blocks) is the phase prior's."""
        enc = encoding.unsqueeze(1).expand(-1, device_features.shape[1], -1)
        learnt = self.device(torch.cat([enc, device_features], dim=-1)).squeeze(-1)
        logits = learnt - self.prior * device_features[..., -1]
        return logits if phase_gap is None else logits - self.prior * self.phase_mix * phase_gap


TABLE_FEATURES = 13 + 4
SPLIT_FEATURES = 7
DEVICE_FEATURES = 8


@dataclass
class _Problem:
    """One table set prepared for episodes: the visiting order, each table's split options with
    their block cost and bytes, and the episode's scales."""

    order: list[int]
    options: list[list[int]]          # per visited table: allowed k
    block_cost: list[Tensor]          # per visited table: [K] one block's cost (ms)
    block_bytes: list[Tensor]         # per visited table: [K] one block's bytes
    block_state: list[Tensor]         # per visited table: [K, S] one block's cost-model state
    model: ShardCostModel             # turns a device's summed state into its cost
    table_features: Tensor            # [T_visited, TABLE_FEATURES]
    overhead: float                   # cost of a non-empty device beyond its tables (ms)
    scale: float                      # total cost / D (ms)
    memory: float
    num_devices: int
    num_tables: int


def prepare(model: ShardCostModel, tables: TableSet, num_devices: int, memory_per_device: float,
            order: str = "cost") -> _Problem:
    """Cost every table under every split it allows (one batched cost-model call)."""
    options = [split_options(t, num_devices) for t in tables.tables]
    variants = [t.column_shard(k)[0] for t, ks in zip(tables.tables, options, strict=True) for k in ks]
    with torch.no_grad():
        rows = torch.tensor([v.feature_row() for v in variants]).reshape(-1, len(FEATURE_NAMES))
        states = model.table_state(rows).double()
        costs = states[:, :len(HEADS)].sum(-1)
        overhead = float(model.shard_overhead().sum())
    nbytes = torch.tensor([float(v.bytes) for v in variants], dtype=torch.float64)
    block_cost, block_bytes, block_state, start = [], [], [], 0
    for ks in options:
        block_cost.append(costs[start:start + len(ks)])
        block_bytes.append(nbytes[start:start + len(ks)])
        block_state.append(states[start:start + len(ks)])
        start += len(ks)
    whole = torch.stack([c[0] for c in block_cost])
    # the even share: the cost of one device holding 1/D of every (whole) table
    with torch.no_grad():
        even = torch.stack([s[0] for s in block_state]).sum(0) / num_devices
        scale = float(model.shard_costs(even).sum())
    key = whole if order == "cost" else torch.tensor([float(t.bytes) for t in tables.tables])
    visit = sorted(range(len(tables)), key=lambda i: (-float(key[i]), i))
    inputs = normalised_inputs(tables.features()) / _INPUT_SCALE
    extra = torch.stack([whole / scale, (whole / scale).clamp_min(1e-6).log() / 5,
                         torch.tensor([t.bytes / memory_per_device for t in tables.tables]),
                         torch.tensor([len(o) / len(SPLITS) for o in options])], dim=-1)
    feats = torch.cat([inputs, extra.float()], dim=-1)[visit]
    return _Problem(visit, [options[i] for i in visit], [block_cost[i] for i in visit],
                    [block_bytes[i] for i in visit], [block_state[i] for i in visit], model, feats,
                    overhead, scale, float(memory_per_device), num_devices, len(tables))


@dataclass
class Episodes:
    """B episodes played at once: their per-table ranks, log-probs, entropies, final loads."""

    ranks: list[list[tuple[int, ...]]]   # [B][T] in table-set order
    log_prob: Tensor                     # [B]
    entropy: Tensor                      # [B]
    max_cost: Tensor                     # [B] ms; inf for an episode that ran out of memory
    dead: Tensor                         # [B] bool
    phase_cost: Tensor                   # [B] ms: sum over phases of the max device cost

    def cost(self, objective: str = "max") -> Tensor:
        """[B] the episodes' cost by ``objective``: "max" (max device cost) or "phase" (sum
        over the phases of the max device cost, DreamShard's); inf for dead episodes."""
        if objective not in OBJECTIVES:
            raise ValueError(f"objective: expected one of {', '.join(OBJECTIVES)}, got {objective!r}")
        return self.max_cost if objective == "max" else self.phase_cost

    def rewards(self, scale: float, objective: str = "max") -> list[float]:
        return [(_DEAD_REWARD if bool(d) else -float(c) / scale)
                for c, d in zip(self.cost(objective), self.dead, strict=True)]


def play(policy: ShardingPolicy, problem: _Problem, batch: int, *, greedy: Sequence[bool] | bool,
         generator: torch.Generator | None = None, temperature: float = 1.0) -> Episodes:
    """Play ``batch`` episodes on ``problem`` (greedy[b]: argmax instead of sampling; sampled
    episodes draw from the policy's logits over ``temperature``)."""
    D, B = problem.num_devices, batch
    greedy_rows = torch.tensor([greedy] * B if isinstance(greedy, bool) else list(greedy))
    load = torch.zeros(B, D, dtype=torch.float64)
    head_load = torch.zeros(B, D, len(HEADS), dtype=torch.float64)
    used = torch.zeros(B, D, dtype=torch.float64)
    state = torch.zeros(B, D, problem.block_state[0].shape[1], dtype=torch.float64)
    device_cost = problem.model.shard_costs
    dead = torch.zeros(B, dtype=torch.bool)
    log_prob = torch.zeros(B)
    entropy = torch.zeros(B)
    ranks: list[list[tuple[int, ...]]] = [[()] * problem.num_tables for _ in range(B)]
    scale, mem = problem.scale, problem.memory
    encodings = policy.encode(problem.table_features)                       # [T, H]
    rows = torch.arange(B)
    for step, table in enumerate(problem.order):
        ks = problem.options[step]
        cost_k, bytes_k = problem.block_cost[step].double(), problem.block_bytes[step]
        K = len(ks)
        enc = encodings[step].unsqueeze(0).expand(B, -1)
        room = used.unsqueeze(1) + bytes_k.view(1, K, 1) <= mem              # [B, K, D]
        split_mask = room.sum(-1) >= torch.tensor(ks).view(1, K)            # [B, K]
        newly_dead = ~split_mask.any(-1) & ~dead
        dead |= newly_dead
        split_mask[dead] = True
        min_load = load.min(-1).values
        k_tensor = torch.tensor(ks, dtype=torch.float64)
        split_feats = torch.stack([
            (k_tensor / 16).expand(B, K), k_tensor.log2().div(4).expand(B, K),
            (cost_k / scale).expand(B, K), (cost_k * k_tensor / cost_k[0] - 1).expand(B, K),
            (bytes_k / mem).expand(B, K), (min_load.unsqueeze(1) + cost_k) / scale,
            (load.max(-1).values.unsqueeze(1) / scale).expand(B, K)], dim=-1).float()
        logits = policy.split_logits(enc, split_feats) / temperature
        k_idx, lp, ent = _choose(logits, split_mask, greedy_rows, generator)
        log_prob = log_prob + lp * ~dead
        entropy = entropy + ent * ~dead
        k_per = torch.tensor(ks)[k_idx]                                      # [B]
        c_block, b_block = cost_k[k_idx], bytes_k[k_idx]                     # [B]
        s_block = problem.block_state[step][k_idx].unsqueeze(1)              # [B, 1, S]
        taken = torch.zeros(B, D, dtype=torch.bool)
        chosen: list[list[int]] = [[] for _ in range(B)]
        for j in range(int(k_per.max())):
            active = (j < k_per) & ~dead
            with torch.no_grad():
                after_heads = device_cost(state + s_block)                   # [B, D, 3]
            after = after_heads.sum(-1)                                      # [B, D]
            fits = (used + b_block.unsqueeze(1) <= mem) & ~taken
            no_room = active & ~fits.any(-1)
            dead |= no_room
            active &= ~no_room
            mask = fits | ~active.unsqueeze(1)
            max_load = load.max(-1, keepdim=True).values
            least = after.masked_fill(~mask, math.inf).min(-1, keepdim=True).values
            gap = ((after - least) / c_block.unsqueeze(1)).clamp(0, 10).masked_fill(~mask, 10)
            phase_max = head_load.max(1, keepdim=True).values                # [B, 1, 3]
            rise = torch.maximum(after_heads, phase_max).sum(-1) - phase_max.sum(-1)
            least_rise = rise.masked_fill(~mask, math.inf).min(-1, keepdim=True).values
            phase_gap = ((rise - least_rise) / c_block.unsqueeze(1)).clamp(0, 10).masked_fill(~mask, 10)
            dev_feats = torch.stack([
                load / scale, after / scale, (after - max_load) / scale, used / mem,
                (used + b_block.unsqueeze(1)) / mem, (used == 0).double(),
                (load - load.min(-1, keepdim=True).values) / scale, gap], dim=-1).float()
            logits = policy.device_logits(enc, dev_feats, phase_gap.float()) / temperature
            d, lp, ent = _choose(logits, mask, greedy_rows, generator)
            log_prob = log_prob + lp * active
            entropy = entropy + ent * active
            sel = rows[active]
            load[sel, d[sel]] = after[sel, d[sel]]
            head_load[sel, d[sel]] = after_heads[sel, d[sel]]
            state[sel, d[sel]] += s_block[sel, 0]
            used[sel, d[sel]] += b_block[sel]
            taken[sel, d[sel]] = True
            for b in sel.tolist():
                chosen[b].append(int(d[b]))
        for b in range(B):
            ranks[b][table] = tuple(chosen[b])
    max_cost = load.max(-1).values.masked_fill(dead, math.inf)
    phase_cost = head_load.max(1).values.sum(-1).masked_fill(dead, math.inf)
    return Episodes(ranks, log_prob, entropy, max_cost, dead, phase_cost)


def _choose(logits: Tensor, mask: Tensor, greedy: Tensor,
            generator: torch.Generator | None) -> tuple[Tensor, Tensor, Tensor]:
    """masked_categorical per row, greedy where ``greedy`` [B] says so."""
    if bool(greedy.all()):
        return masked_categorical(logits, mask, greedy=True)
    if not bool(greedy.any()):
        return masked_categorical(logits, mask, generator=generator)
    sampled = masked_categorical(logits, mask, generator=generator)
    argmax = masked_categorical(logits, mask, greedy=True)
    return tuple(torch.where(greedy, a, s) for a, s in zip(argmax, sampled, strict=True))  # type: ignore[return-value]


class RLPlanner(Planner):
    """The learned planner (module doc): greedy decoding plus ``samples`` sampled episodes,
    the best by the cost model kept, then (``polish``) improved by :func:`local_search` on
    the same objective.

    Args:
        cost_model: the shard cost model (default: the fitted one for ``device_kind``).
        policy: the policy (default: the trained one under ``cost_models/<device_kind>/``).
        samples: sampled episodes besides the greedy one (0: greedy only).
        device_kind: which committed cost model and policy to load by default.
        objective: what "best" episode means: "max" (the max device cost) or "phase" (the sum
            over phases of the max device cost); by default the policy's training objective
            (saved with it; "max" for a policy that does not say).
        polish: improve the best episode's plan by :func:`local_search` (moves and swaps of
            blocks, splits and memory limits kept) on ``objective``; it never makes the plan
            worse by that objective, and is deterministic.
        polish_steps: at most this many local-search steps (each ~30 ms for 500 tables on 16
            devices; a step bound, not a time bound, keeps plans the same for the same seed).

    Example:
        >>> from autorec.sharding.tables import TableSet
        >>> _ = torch.manual_seed(0)
        >>> m, ts = ShardCostModel(hidden=16), TableSet.generate(20, seed=0, rows_range=(1e3, 1e5))
        >>> raw = RLPlanner(m, ShardingPolicy(hidden=16), polish=False).plan(ts, 4, 2**30)
        >>> polished = RLPlanner(m, ShardingPolicy(hidden=16)).plan(ts, 4, 2**30)
        >>> max_device_cost(m, ts, polished) <= max_device_cost(m, ts, raw) + 1e-9
        True
    """

    name = "rl"

    def __init__(self, cost_model: ShardCostModel | None = None,
                 policy: ShardingPolicy | None = None, *, samples: int = 7,
                 device_kind: str = "cpu", objective: str | None = None, polish: bool = True,
                 polish_steps: int = 50) -> None:
        self.cost_model = cost_model if cost_model is not None else ShardCostModel.default(device_kind)
        self.policy = policy if policy is not None else load_policy(DEFAULT_DIR / device_kind)
        self.samples = samples
        if not isinstance(polish_steps, int) or polish_steps < 0:
            raise ValueError(f"polish_steps: expected an integer >= 0, got {polish_steps!r}")
        self.polish, self.polish_steps = polish, polish_steps
        self.objective = objective if objective is not None else self.policy.objective
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective: expected one of {', '.join(OBJECTIVES)}, "
                             f"got {self.objective!r}")

    def plan(self, tables: TableSet, num_devices: int, memory_per_device: float, *,
             seed: int = 0) -> Assignment:
        check_fits(tables, num_devices, memory_per_device)
        generator = torch.Generator().manual_seed(seed)
        self.policy.eval()
        # Costliest tables first; if every episode runs out of memory, largest first.
        for order in ("cost", "bytes"):
            problem = prepare(self.cost_model, tables, num_devices, memory_per_device, order)
            with torch.no_grad():
                episodes = play(self.policy, problem, 1 + self.samples,
                                greedy=[True] + [False] * self.samples, generator=generator)
            best = int(episodes.cost(self.objective).argmin())
            if not bool(episodes.dead[best]):
                plan = Assignment.of(episodes.ranks[best], tables, num_devices)
                if self.polish and self.polish_steps > 0:
                    plan = local_search(self.cost_model, tables, plan, memory_per_device,
                                        objective=self.objective, max_steps=self.polish_steps)
                return plan
        raise PlanningError(
            f"no placement of the {len(tables)} tables ({tables.total_bytes:,} bytes) on "
            f"{num_devices} devices of {memory_per_device:,.0f} bytes was found (memory too tight "
            "for the planner's episodes)")


@dataclass(frozen=True)
class TrainConfig:
    """What the policy is trained on: generated table sets of ``tables`` tables on
    ``devices`` devices, each device with ``slack`` x (total bytes / D) of memory."""

    iterations: int = 300
    batch_size: int = 16
    tables: tuple[int, int] = (40, 200)
    devices: tuple[int, ...] = (4, 8)
    slack: tuple[float, float] = (1.1, 2.0)
    lr: float = 3e-3
    entropy_weight: float = 1e-3
    hidden: int = 64
    seed: int = 0
    # Sampling below temperature 1 explores near the greedy plan: at 1 the sampled plans are
    # far worse than the greedy one, and the gradient mostly says "be greedier", which does
    # not change the greedy plan the planner uses.
    temperature: float = 1.0
    # the reward: minus "max" (max device cost) or "phase" (sum over phases of the max device
    # cost) over the even share
    objective: str = "max"


def memory_for(tables: TableSet, num_devices: int, slack: float) -> float:
    """``slack`` x the even share of the tables' bytes, at least the largest table's smallest
    column block (the memory a generated problem gets)."""
    smallest = max(t.column_shard(split_options(t, num_devices)[-1])[0].bytes for t in tables.tables)
    return max(slack * tables.total_bytes / num_devices, 1.05 * smallest)


def train_policy(cost_model: ShardCostModel, config: TrainConfig = TrainConfig(),
                 policy: ShardingPolicy | None = None,
                 log: Callable[[int, dict[str, float]], None] | None = None,
                 validation: Sequence[tuple[TableSet, int, float]] = (),
                 validate_every: int = 25) -> ShardingPolicy:
    """REINFORCE on generated table sets: every iteration one problem (table set, device count,
    memory), ``batch_size`` episodes on it, one PolicyGradient update.

    With ``validation`` problems (tables, devices, memory), the greedy plans' mean cost (by
    ``config.objective``) over the even share is measured every ``validate_every`` iterations
    (and at the start and the end); the policy returned is the best one measured (logged as
    ``validation``)."""
    torch.manual_seed(config.seed)
    policy = policy if policy is not None else ShardingPolicy(config.hidden)
    policy.objective = config.objective
    trainer = PolicyGradient(policy, lr=config.lr, entropy_weight=config.entropy_weight)
    rng = torch.Generator().manual_seed(config.seed)
    problems = [prepare(cost_model, t, d, m) for t, d, m in validation]
    best: tuple[float, dict[str, Tensor]] | None = None

    def validate(i: int) -> None:
        nonlocal best
        with torch.no_grad():
            score = sum(float(play(policy, p, 1, greedy=True).cost(config.objective)[0]) / p.scale
                        for p in problems) / len(problems)
        if log is not None:
            log(i, {"validation": score})
        if best is None or score < best[0]:
            best = (score, {k: v.detach().clone() for k, v in policy.state_dict().items()})

    if problems:
        validate(-1)
    policy.train()
    for i in range(config.iterations):
        n = int(torch.randint(config.tables[0], config.tables[1] + 1, (1,), generator=rng))
        d = config.devices[int(torch.randint(len(config.devices), (1,), generator=rng))]
        slack = config.slack[0] + float(torch.rand(1, generator=rng)) * (config.slack[1] - config.slack[0])
        # training sets use seeds 10^6 + i: the benchmark's held-out sets use others
        tables = TableSet.generate(n, seed=1_000_000 + config.seed * 10_000 + i)
        problem = prepare(cost_model, tables, d, memory_for(tables, d, slack))
        episodes = play(policy, problem, config.batch_size, greedy=False, generator=rng,
                        temperature=config.temperature)
        rewards = episodes.rewards(problem.scale, config.objective)
        stats = trainer.update([Rollout(episodes.log_prob[b], episodes.entropy[b], rewards[b])
                                for b in range(config.batch_size)])
        if log is not None:
            log(i, {**stats, "tables": n, "devices": d})
        if problems and ((i + 1) % validate_every == 0 or i == config.iterations - 1):
            validate(i)
    if best is not None:
        policy.load_state_dict(best[1])
    policy.eval()
    return policy


def save_policy(policy: ShardingPolicy, path: str | Path, metadata: dict[str, Any] | None = None) -> Path:
    """Write ``planner.safetensors`` and ``planner.json`` into the directory ``path``."""
    from safetensors.torch import save_file

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    save_file({k: v.detach().contiguous() for k, v in policy.state_dict().items()}, path / POLICY_WEIGHTS)
    config = {"format": "autorec-sharding-policy", "version": 2, "hidden": policy.hidden,
              "objective": policy.objective, "metadata": metadata or {}}
    (path / POLICY_CONFIG).write_text(json.dumps(config, indent=2) + "\n")
    return path


def load_policy(path: str | Path) -> ShardingPolicy:
    """The policy :func:`save_policy` wrote into the directory ``path``."""
    config, config_path, weights_path = read_config(
        path, POLICY_CONFIG, POLICY_WEIGHTS, "autorec-sharding-policy", PlanningError,
        f"train the planner's policy first (python benchmarks/sharding_plans.py --train --out {path})")
    hidden = config.get("hidden")
    if not isinstance(hidden, int) or hidden < 1:
        raise PlanningError(f"{config_path}: hidden: expected a positive integer, got {hidden!r}")
    objective = config.get("objective", "max")
    if objective not in OBJECTIVES:
        raise PlanningError(f"{config_path}: objective: expected one of {', '.join(OBJECTIVES)}, "
                            f"got {objective!r}")
    policy = ShardingPolicy(hidden)
    policy.objective = objective
    if config.get("version", 1) == 1:  # written before the phase term: its weight stays 0
        from safetensors.torch import load_file, save_file

        weights = load_file(weights_path)
        weights.setdefault("phase_mix", torch.tensor(0.0))
        with tempfile.TemporaryDirectory() as tmp:
            save_file(weights, Path(tmp) / POLICY_WEIGHTS)
            load_weights(policy, Path(tmp) / POLICY_WEIGHTS, config_path, PlanningError)
    else:
        load_weights(policy, weights_path, config_path, PlanningError)
    return policy.eval()


def timed_plan(planner: Planner, tables: TableSet, num_devices: int,
               memory_per_device: float, seed: int = 0) -> tuple[Assignment, float]:
    """(assignment, seconds of process CPU time) of one planning call."""
    start = time.process_time()
    assignment = planner.plan(tables, num_devices, memory_per_device, seed=seed)
    return assignment, time.process_time() - start
