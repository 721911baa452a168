"""The RL planner's environment: a table set prepared for episodes, and episodes played on it.

Tables are visited in decreasing order of their predicted cost
(:class:`~autorec.sharding.cost_model.ShardCostModel`). A device's cost is a function of the
sum of its tables' cost-model states (their costs, widths, a count and embeddings: the
shard-mlp model's costs do not add over tables), so an episode keeps that sum per device and
costs a device with a block added in one batched model call. For each table the policy
(:class:`~autorec.sharding.policy.ShardingPolicy`) first picks a column split k (1, 2, 4, 8 or
16 even blocks, where the dim divides and the blocks are >= 4 wide), then a device for each
block. Devices without room for the block (or holding another block of the table) and splits
with too few such devices are masked out (:func:`autorec.rl.masked_categorical`).

The reward is minus the episode's cost over the scale, by one of two objectives: "max", the
maximum device cost, or "phase" (DreamShard's), the sum over the phases (forward, backward,
comm) of the maximum device cost, as a synchronous step waits for the slowest device at each
phase.

Shapes: B episodes played at once, T tables, D devices, K split options, S cost-model state.

Example:
    >>> from autorec.sharding.cost_model import ShardCostModel
    >>> from autorec.sharding.tables import TableSet
    >>> _ = torch.manual_seed(0)
    >>> problem = prepare(ShardCostModel(hidden=8), TableSet.generate(5, seed=0), 2, float("inf"))
    >>> episodes = play(ShardingPolicy(hidden=8), problem, 3, greedy=True)
    >>> len(episodes.ranks), episodes.max_cost.shape
    (3, torch.Size([3]))
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from autorec.rl import masked_categorical
from autorec.sharding.base import OBJECTIVES, SPLITS, split_options
from autorec.sharding.cost_model import HEADS, ShardCostModel, normalised_inputs
from autorec.sharding.policy import ShardingPolicy
from autorec.sharding.tables import FEATURE_NAMES, TableSet

# Scales that bring normalised_inputs' logs (log10 rows, log2 dim, log2 pooling, log10 bytes,
# log2 dim x pooling) near [0, 1]; the reuse fractions already are.
_INPUT_SCALE = torch.tensor([8.0, 8.0, 8.0, 12.0, 16.0] + [1.0] * 8)
_DEAD_REWARD = -10.0


@dataclass
class Problem:
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
            order: str = "cost") -> Problem:
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
    return Problem(visit, [options[i] for i in visit], [block_cost[i] for i in visit],
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


def play(policy: ShardingPolicy, problem: Problem, batch: int, *, greedy: Sequence[bool] | bool,
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
