"""Growth and pruning: structured pruning, function-preserving growth, and their schedules."""

from autorec.growth.gates import add_gates, gate_penalty
from autorec.growth.ops import drop_modules, grow, prune, shrink
from autorec.growth.plan import GrowthError

__all__ = ["GrowthError", "add_gates", "drop_modules", "gate_penalty", "grow", "prune", "shrink"]
