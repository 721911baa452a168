"""The RL planner: a policy trained on the cost model places the tables, local search polishes.

Every planner answers ``plan(tables, num_devices, memory_per_device, seed=) -> Assignment``
(:class:`~autorec.sharding.base.Planner`); :class:`RLPlanner` is the learned one, the
baselines are in :mod:`autorec.sharding.baselines`.

The RL planner works like DreamShard: it assigns the tables one by one, in decreasing order of
their predicted cost, first a column split and then a device per block
(:mod:`autorec.sharding.episodes`), both chosen by one shared network
(:mod:`autorec.sharding.policy`). The policy is trained by REINFORCE on generated table sets and
device counts (:mod:`autorec.sharding.training`), and plans greedily, keeping the best (by its
training objective) of that and a few sampled episodes; the planner then polishes that plan by
:func:`~autorec.sharding.objectives.local_search` (moves and swaps by steepest descent on the
same objective, a bounded number of steps).

Example:
    >>> import torch
    >>> from autorec.sharding.cost_model import ShardCostModel
    >>> from autorec.sharding.policy import ShardingPolicy
    >>> from autorec.sharding.tables import TableSet
    >>> _ = torch.manual_seed(0)
    >>> planner = RLPlanner(ShardCostModel(hidden=16), ShardingPolicy(hidden=16), samples=2)
    >>> tables = TableSet.generate(10, seed=0, rows_range=(1e3, 1e5))
    >>> a = planner.plan(tables, num_devices=4, memory_per_device=2**30)
    >>> len(a.placements), a.num_devices
    (10, 4)
"""

from __future__ import annotations

import torch

from autorec.sharding.base import OBJECTIVES, Planner, check_fits
from autorec.sharding.cost_model import DEFAULT_DIR, ShardCostModel
from autorec.sharding.episodes import play, prepare
from autorec.sharding.objectives import local_search
from autorec.sharding.plans import Assignment, PlanningError
from autorec.sharding.policy import ShardingPolicy, load_policy
from autorec.sharding.tables import TableSet


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
        >>> from autorec.sharding.objectives import max_device_cost
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
