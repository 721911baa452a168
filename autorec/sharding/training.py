"""Training the RL planner's policy by REINFORCE on generated table sets and device counts.

Every iteration draws one problem (a table set, a device count, a memory per device), plays a
batch of sampled episodes on it (:func:`~autorec.sharding.episodes.play`) and makes one
:class:`autorec.rl.PolicyGradient` update; with validation problems, the policy returned is
the best one measured by its greedy plans.

Example:
    >>> from autorec.sharding.cost_model import ShardCostModel
    >>> config = TrainConfig(iterations=2, batch_size=2, tables=(4, 6), devices=(2,), hidden=8)
    >>> policy = train_policy(ShardCostModel(hidden=8), config)
    >>> policy.objective, policy.training
    ('max', False)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from autorec.rl import PolicyGradient, Rollout
from autorec.sharding.base import split_options
from autorec.sharding.cost_model import ShardCostModel
from autorec.sharding.episodes import play, prepare
from autorec.sharding.policy import ShardingPolicy
from autorec.sharding.tables import TableSet


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
