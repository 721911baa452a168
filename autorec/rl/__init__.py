"""Policy-gradient core shared by the RL sharding planner and the growth-schedule search.

Both searches are episodic: a policy network takes a sequence of discrete actions (assign this
table to that device; prune this layer by that much at that step), an environment scores the
finished episode with a cost model, and the policy is trained by REINFORCE against that score.
This package holds only that common core; the environments live with their problems
(``autorec.sharding``, ``autorec.growth``).
"""

from autorec.rl.policy_gradient import PolicyGradient, Rollout, masked_categorical

__all__ = ["PolicyGradient", "Rollout", "masked_categorical"]
