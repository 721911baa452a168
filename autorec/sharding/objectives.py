"""What a plan costs by the shard cost model, and the local search that lowers it.

The measures (ms per step): :func:`device_costs` per device, :func:`max_device_cost` (the
"max" objective), :func:`phase_max_cost` (the "phase" objective, DreamShard's),
:func:`even_share_cost` (a perfectly even fractional plan, the scale plans are compared with)
and :func:`cost_lower_bound`. :func:`local_search` moves and swaps column blocks by steepest
descent on either objective; :class:`~autorec.sharding.planner.RLPlanner` polishes its plans
with it, and a benchmark uses it to measure how far a plan is from a local optimum.

Shapes: D devices, N shards (tables or column blocks), S cost-model state width, P phases.

Example:
    >>> from autorec.sharding.cost_model import ShardCostModel
    >>> from autorec.sharding.tables import TableSet
    >>> m, ts = ShardCostModel(hidden=8), TableSet.generate(6, seed=0)
    >>> a = Assignment.of([(0,), (1,)] * 3, ts, 2)
    >>> max_device_cost(m, ts, a) <= phase_max_cost(m, ts, a) + 1e-6
    True
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from autorec.sharding.base import OBJECTIVES
from autorec.sharding.cost_model import HEADS, ShardCostModel
from autorec.sharding.episodes import prepare
from autorec.sharding.plans import Assignment
from autorec.sharding.tables import TableSet


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
