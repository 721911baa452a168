"""The RL planner: its environment, its policy, training on the cost model, saving/loading."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from autorec.sharding.base import check_fits, split_options
from autorec.sharding.cost_model import DEFAULT_DIR, ShardCostModel
from autorec.sharding.episodes import play, prepare
from autorec.sharding.objectives import (
    cost_lower_bound,
    device_costs,
    local_search,
    max_device_cost,
    phase_max_cost,
)
from autorec.sharding.planner import RLPlanner
from autorec.sharding.plans import Assignment, PlanningError
from autorec.sharding.policy import ShardingPolicy, load_policy, save_policy
from autorec.sharding.tables import TableSet
from autorec.sharding.training import TrainConfig, memory_for, train_policy


@pytest.fixture(scope="module")
def model() -> ShardCostModel:
    torch.manual_seed(0)
    return ShardCostModel(hidden=16)


TABLES = TableSet.generate(30, seed=11, rows_range=(1e3, 1e6))


def test_split_options_follow_dim_and_devices():
    t = dataclasses.replace(TABLES.tables[0], dim=48)
    assert split_options(t, 16) == [1, 2, 4, 8]   # 48/16 = 3 columns: too narrow
    assert split_options(t, 3) == [1, 2]
    assert split_options(dataclasses.replace(t, dim=6), 8) == [1]


def test_episode_loads_equal_the_cost_model(model):
    """The running loads an episode keeps are the cost model's device costs of its plan."""
    memory = memory_for(TABLES, 5, 1.2)
    problem = prepare(model, TABLES, 5, memory)
    episodes = play(ShardingPolicy(16), problem, 4, greedy=False, generator=torch.Generator().manual_seed(0))
    for b in range(4):
        assert not episodes.dead[b]
        a = Assignment.of(episodes.ranks[b], TABLES, 5)
        a.check(TABLES, memory)
        assert float(episodes.max_cost[b]) == pytest.approx(max_device_cost(model, TABLES, a), rel=1e-4)


def test_episode_loads_equal_a_non_additive_cost_model():
    """With the shard-mlp model the episode's per-device running state gives the cost model's
    device costs too (the shard factor is applied to the summed state, not per table)."""
    torch.manual_seed(0)
    model = ShardCostModel(hidden=16, kind="shard-mlp")
    with torch.no_grad():
        model.shard_mlp[-1].weight.normal_(0, 1.0)
    memory = memory_for(TABLES, 5, 1.2)
    problem = prepare(model, TABLES, 5, memory)
    episodes = play(ShardingPolicy(16), problem, 3, greedy=False, generator=torch.Generator().manual_seed(0))
    for b in range(3):
        a = Assignment.of(episodes.ranks[b], TABLES, 5)
        assert float(episodes.max_cost[b]) == pytest.approx(max_device_cost(model, TABLES, a), rel=1e-4)
    with pytest.raises(ValueError, match="needs an additive cost model"):
        cost_lower_bound(model, TABLES, 5)


def test_local_search_improves_a_bad_plan_within_the_rules(model):
    from autorec.sharding.baselines import RandomPlanner

    memory = memory_for(TABLES, 4, 1.2)
    start = RandomPlanner().plan(TABLES, 4, memory)
    better = local_search(model, TABLES, start, memory)
    better.check(TABLES, memory)
    assert [len(p.ranks) for p in better.placements] == [len(p.ranks) for p in start.placements]
    for p in better.placements:
        assert len(set(p.ranks)) == len(p.ranks)
    assert max_device_cost(model, TABLES, better) < 0.9 * max_device_cost(model, TABLES, start)
    assert phase_max_cost(model, TABLES, better) >= max_device_cost(model, TABLES, better) - 1e-6
    phased = local_search(model, TABLES, start, memory, objective="phase")
    phased.check(TABLES, memory)
    assert phase_max_cost(model, TABLES, phased) < 0.9 * phase_max_cost(model, TABLES, start)
    with pytest.raises(ValueError, match="objective: expected one of max, phase"):
        local_search(model, TABLES, start, memory, objective="mean")


def _shard_mlp_model() -> ShardCostModel:
    torch.manual_seed(0)
    model = ShardCostModel(hidden=16, kind="shard-mlp")
    with torch.no_grad():
        model.shard_mlp[-1].weight.normal_(0, 1.0)
    return model


@pytest.mark.parametrize("kind", ["additive", "shard-mlp"])
@pytest.mark.parametrize("objective", ["max", "phase"])
def test_polish_never_makes_a_plan_worse_and_keeps_it_valid(model, kind, objective):
    """From plans of every kind (random, greedy, the RL planner's own), with memory tight and
    loose and any step bound, the polished plan is valid (memory, the same splits, blocks on
    distinct devices) and no worse by the objective it polishes."""
    from autorec.sharding.baselines import LookupGreedy, RandomPlanner

    cost_model = model if kind == "additive" else _shard_mlp_model()
    score = max_device_cost if objective == "max" else phase_max_cost
    tables = TableSet.generate(40, seed=21, rows_range=(1e3, 1e6))
    improved = 0
    for devices, slack in ((3, 1.05), (6, 1.3)):
        memory = memory_for(tables, devices, slack)
        starts = [RandomPlanner().plan(tables, devices, memory, seed=s) for s in range(2)]
        starts.append(LookupGreedy().plan(tables, devices, memory))
        starts.append(RLPlanner(cost_model, ShardingPolicy(16), polish=False,
                                objective=objective).plan(tables, devices, memory))
        for start in starts:
            for steps in (1, 5, 200):
                trace: list[float] = []
                polished = local_search(cost_model, tables, start, memory, objective=objective,
                                        max_steps=steps, trace=trace)
                polished.check(tables, memory)
                assert max(polished.memory(tables)) <= memory
                assert [len(p.ranks) for p in polished.placements] == \
                    [len(p.ranks) for p in start.placements]
                assert all(len(set(p.ranks)) == len(p.ranks) for p in polished.placements)
                assert len(trace) <= steps
                before, after = score(cost_model, tables, start), score(cost_model, tables, polished)
                assert after <= before * (1 + 1e-6)
                improved += after < before * (1 - 1e-3)
    assert improved >= 6  # polishing does something (the random starts are far from optima)


def test_rl_planner_polishes_its_plan(model):
    """The planner's polish (on by default) gives a plan no worse than its unpolished one by its
    objective, better on an untrained policy's phase cost, and the same plan for the same seed."""
    tables = TableSet.generate(60, seed=5, rows_range=(1e3, 1e6))
    memory = memory_for(tables, 5, 1.3)
    policy = ShardingPolicy(16)
    raw = RLPlanner(model, policy, objective="phase", polish=False).plan(tables, 5, memory, seed=1)
    planner = RLPlanner(model, policy, objective="phase")
    polished = planner.plan(tables, 5, memory, seed=1)
    polished.check(tables, memory)
    assert [len(p.ranks) for p in polished.placements] == [len(p.ranks) for p in raw.placements]
    assert phase_max_cost(model, tables, polished) < phase_max_cost(model, tables, raw)
    assert polished == planner.plan(tables, 5, memory, seed=1)
    assert polished == local_search(model, tables, raw, memory, objective="phase",
                                    max_steps=planner.polish_steps)
    assert RLPlanner(model, policy, objective="phase", polish_steps=0).plan(
        tables, 5, memory, seed=1) == raw
    with pytest.raises(ValueError, match="polish_steps: expected an integer >= 0"):
        RLPlanner(model, policy, polish_steps=-1)


def test_greedy_episode_is_deterministic_and_sampled_ones_vary(model):
    problem = prepare(model, TABLES, 4, memory_for(TABLES, 4, 1.5))
    policy = ShardingPolicy(16)
    one = play(policy, problem, 2, greedy=True)
    assert one.ranks[0] == one.ranks[1]
    sampled = play(policy, problem, 6, greedy=False, generator=torch.Generator().manual_seed(1))
    assert len({tuple(r) for r in sampled.ranks}) > 1


def test_policy_generalises_over_table_and_device_counts(model):
    planner = RLPlanner(model, ShardingPolicy(16), samples=1)
    for n, d in ((5, 2), (60, 16)):
        tables = TableSet.generate(n, seed=n, rows_range=(1e3, 1e5))
        memory = memory_for(tables, d, 1.3)
        planner.plan(tables, d, memory).check(tables, memory)


def test_training_improves_the_policy_on_its_problem(model):
    """REINFORCE on the cost model raises the mean reward of sampled episodes on fixed problems."""
    torch.manual_seed(0)
    policy = ShardingPolicy(16, prior=0.0)  # no greedy prior: everything is to be learnt
    config = TrainConfig(iterations=25, batch_size=12, tables=(20, 20), devices=(4,), slack=(2.0, 2.0),
                         hidden=16, lr=1e-2)
    history: list[float] = []
    train_policy(model, config, policy, log=lambda i, s: history.append(s["reward_mean"]))
    assert len(history) == 25
    assert sum(history[-5:]) / 5 > sum(history[:5]) / 5


def test_training_improves_the_greedy_plan_where_the_priors_leave_headroom():
    """Under the phase objective (sum over phases of the max device cost) the untrained greedy
    priors balance each device's total, not each phase, which leaves headroom with the fitted
    CPU model (its phases' costs are far from proportional; weighting the phase gap by hand
    takes these problems from 1.10 to 1.04 x the even share). REINFORCE must lower the greedy
    plans' cost on validation problems it does not train on, by >= 1%."""
    model = ShardCostModel.default("cpu")
    validation = []
    for i in range(3):
        tables = TableSet.generate(30, seed=900 + i, rows_range=(1e3, 1e6))
        validation.append((tables, 4, memory_for(tables, 4, 2.0)))
    config = TrainConfig(iterations=60, batch_size=12, tables=(30, 30), devices=(4,),
                         slack=(2.0, 2.0), hidden=16, lr=3e-2, objective="phase")
    scores: list[float] = []
    torch.manual_seed(0)
    policy = train_policy(model, config, log=lambda i, s: scores.append(s["validation"])
                          if "validation" in s else None, validation=validation, validate_every=10)
    assert len(scores) == 7
    assert min(scores[1:]) < 0.99 * scores[0], scores
    assert policy.objective == "phase" and float(policy.phase_mix) != 0.0
    problems = [prepare(model, t, d, m) for t, d, m in validation]
    with torch.no_grad():
        final = sum(float(play(policy, p, 1, greedy=True).phase_cost[0]) / p.scale
                    for p in problems) / len(problems)
    assert final == pytest.approx(min(scores), rel=1e-6)  # the best checked policy is returned


def test_plan_keeps_the_best_episode(model):
    memory = memory_for(TABLES, 4, 1.3)
    policy = ShardingPolicy(16)
    greedy_only = RLPlanner(model, policy, samples=0, polish=False).plan(TABLES, 4, memory)
    with_samples = RLPlanner(model, policy, samples=6, polish=False).plan(TABLES, 4, memory)
    assert max_device_cost(model, TABLES, with_samples) <= max_device_cost(model, TABLES, greedy_only) + 1e-6


def test_device_costs_count_column_blocks(model):
    t = dataclasses.replace(TABLES.tables[0], dim=32)
    tables = TableSet((t,))
    whole = device_costs(model, tables, Assignment.of([(0,)], tables, 2))
    split = device_costs(model, tables, Assignment.of([(0, 1)], tables, 2))
    assert whole[1] == 0 and split[0] > 0 and split[1] > 0


def test_save_and_load_policy(tmp_path, model):
    policy = ShardingPolicy(8)
    save_policy(policy, tmp_path, {"note": "test"})
    loaded = load_policy(tmp_path)
    memory = memory_for(TABLES, 3, 1.4)
    assert RLPlanner(model, loaded).plan(TABLES, 3, memory) == \
        RLPlanner(model, policy).plan(TABLES, 3, memory)
    assert json.loads((tmp_path / "planner.json").read_text())["metadata"] == {"note": "test"}


@pytest.mark.parametrize("change, message", [
    (lambda d: (d / "planner.json").unlink(), "planner.json: no such file"),
    (lambda d: (d / "planner.json").write_text("{"), "planner.json:1: not valid JSON"),
    (lambda d: (d / "planner.json").write_text('{"format": "x"}'),
     "format: expected 'autorec-sharding-policy'"),
    (lambda d: (d / "planner.json").write_text('{"format": "autorec-sharding-policy", "hidden": 9}'),
     "does not fit"),
])
def test_bad_policy_files(tmp_path, change, message):
    save_policy(ShardingPolicy(8), tmp_path)
    change(tmp_path)
    with pytest.raises(PlanningError, match=message):
        load_policy(tmp_path)


def test_check_fits_messages():
    with pytest.raises(PlanningError, match="memory_per_device: expected a positive number"):
        check_fits(TABLES, 2, 0)
    with pytest.raises(PlanningError, match="the table set is empty"):
        check_fits(TableSet(()), 2, 1e9)


def test_committed_policy_plans_500_tables_on_16_devices():
    assert (DEFAULT_DIR / "cpu" / "planner.json").is_file()
    tables = TableSet.generate(500, seed=77)
    memory = memory_for(tables, 16, 1.3)
    RLPlanner().plan(tables, 16, memory).check(tables, memory)


def test_lower_bound_is_below_every_plan(model):
    from autorec.sharding.baselines import LookupGreedy, RandomPlanner, SizeGreedy
    from autorec.sharding.objectives import cost_lower_bound

    memory = memory_for(TABLES, 4, 1.3)
    bound = cost_lower_bound(model, TABLES, 4)
    for planner in (RLPlanner(model, ShardingPolicy(16)), SizeGreedy(), LookupGreedy(), RandomPlanner()):
        assert max_device_cost(model, TABLES, planner.plan(TABLES, 4, memory)) >= bound * (1 - 1e-6)
