"""Growth and pruning: structured pruning, function-preserving growth, and their schedules."""

from autorec.growth.gates import add_gates, gate_penalty
from autorec.growth.modules import drop_modules
from autorec.growth.ops import grow, prune
from autorec.growth.plan import GrowthError
from autorec.growth.schedule import GrowthSchedule, Phase, ScheduleError
from autorec.growth.shrink import shrink

# Training under a schedule and the schedule search import the trainer: from their modules,
# autorec.growth.train (train_schedule) and autorec.growth.search (search, rl_search, tpe_search).
__all__ = ["GrowthError", "GrowthSchedule", "Phase", "ScheduleError", "add_gates", "drop_modules",
           "gate_penalty", "grow", "prune", "shrink"]
