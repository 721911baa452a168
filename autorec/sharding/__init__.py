"""Embedding sharding: table sets, the learned shard cost model, the planner and its baselines."""

from autorec.sharding.cost_model import ShardCostModel
from autorec.sharding.tables import TableInfo, TableSet

__all__ = ["ShardCostModel", "TableInfo", "TableSet"]
