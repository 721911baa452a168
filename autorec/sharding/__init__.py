"""Embedding sharding: table sets, the learned shard cost model, the planner and its baselines."""

from autorec.sharding.base import Planner
from autorec.sharding.baselines import LookupGreedy, RandomPlanner, SizeGreedy, TorchrecPlanner
from autorec.sharding.cost_model import ShardCostModel
from autorec.sharding.planner import RLPlanner
from autorec.sharding.plans import Assignment, PlanningError, plan_json, sharding_plan
from autorec.sharding.tables import TableInfo, TableSet

__all__ = ["Assignment", "LookupGreedy", "Planner", "PlanningError", "RLPlanner", "RandomPlanner",
           "ShardCostModel", "SizeGreedy", "TableInfo", "TableSet", "TorchrecPlanner", "plan_json",
           "sharding_plan"]
