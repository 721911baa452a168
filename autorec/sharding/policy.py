"""The RL planner's policy network and its files (``planner.safetensors`` + ``planner.json``).

One network scores the candidates of both choices an episode makes per table, so the same
weights serve any number of tables and devices:

- a table encoder reads the table's normalised features (sizes, pooling, access reuse) and its
  predicted cost and bytes relative to the episode's scale (the even share: the cost of a device
  holding 1/D of every table; memory per device);
- the split head scores each k from [table encoding, k's block cost, its split overhead, its
  bytes, the least loaded device's load], minus learnt multiples of how far a block would
  overflow the even share and of the split overhead; the device head scores each device from
  [table encoding, its load before and after taking the block, its gap to the current maximum,
  its memory before and after], minus a learnt multiple of its load after taking the block
  above the least such load, in blocks, and minus a learnt multiple (0 at the start) of how
  much the block raises the sum of per-phase maxima above the least such rise. These greedy
  priors are what the policy starts from and what training corrects.

Shapes: B episodes played at once, D devices, K split options, H hidden width.

Example:
    >>> import tempfile
    >>> policy = ShardingPolicy(hidden=8)
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     load_policy(save_policy(policy, tmp)).hidden
    8
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from autorec.sharding.base import OBJECTIVES
from autorec.sharding.plans import PlanningError
from autorec.sharding.saved import load_weights, read_config

POLICY_WEIGHTS, POLICY_CONFIG = "planner.safetensors", "planner.json"
TABLE_FEATURES = 13 + 4
SPLIT_FEATURES = 7
DEVICE_FEATURES = 8


class ShardingPolicy(nn.Module):
    """The planner's policy network: a table encoder, a split head and a device head.

    Args:
        hidden: width H of every layer.
        prior: initial weight of the greedy prior (minus the load after placing, on the
            device logits).

    Example:
        >>> policy = ShardingPolicy(hidden=8)
        >>> enc = policy.encode(torch.zeros(3, TABLE_FEATURES))          # [B, H]
        >>> policy.split_logits(enc, torch.zeros(3, 5, SPLIT_FEATURES)).shape   # [B, K]
        torch.Size([3, 5])
        >>> policy.device_logits(enc, torch.zeros(3, 4, DEVICE_FEATURES)).shape  # [B, D]
        torch.Size([3, 4])
    """

    def __init__(self, hidden: int = 64, prior: float = 8.0) -> None:
        super().__init__()
        self.hidden = hidden
        self.objective = "max"  # what it was trained for (saved with it)
        self.table = nn.Sequential(nn.Linear(TABLE_FEATURES, hidden), nn.ReLU(),
                                   nn.Linear(hidden, hidden), nn.ReLU())
        self.split = nn.Sequential(nn.Linear(hidden + SPLIT_FEATURES, hidden), nn.ReLU(),
                                   nn.Linear(hidden, 1))
        self.device = nn.Sequential(nn.Linear(hidden + DEVICE_FEATURES, hidden), nn.ReLU(),
                                    nn.Linear(hidden, 1))
        # greedy priors (module doc): device: gap to the least loaded choice; split: overflow
        # of the average load, and the extra cost splitting adds
        self.prior = nn.Parameter(torch.tensor(float(prior)))
        self.split_prior = nn.Parameter(torch.tensor([float(prior), float(prior) / 2]))
        # the phase gap's weight (how much a device raises the sum of per-phase maxima above
        # the least such rise, in blocks) relative to the load gap's: 0 at the start (the
        # greedy prior balances the total), for training to set
        self.phase_mix = nn.Parameter(torch.tensor(0.0))

    def encode(self, table_features: Tensor) -> Tensor:
        """[B, TABLE_FEATURES] -> [B, H]."""
        return self.table(table_features)

    def split_logits(self, encoding: Tensor, split_features: Tensor) -> Tensor:
        """encoding [B, H], split_features [B, K, SPLIT_FEATURES] -> logits [B, K]."""
        enc = encoding.unsqueeze(1).expand(-1, split_features.shape[1], -1)
        learnt = self.split(torch.cat([enc, split_features], dim=-1)).squeeze(-1)
        overflow = (split_features[..., 5] - 1).clamp_min(0)
        return learnt - self.split_prior[0] * overflow - self.split_prior[1] * split_features[..., 3]

    def device_logits(self, encoding: Tensor, device_features: Tensor,
                      phase_gap: Tensor | None = None) -> Tensor:
        """encoding [B, H], device_features [B, D, DEVICE_FEATURES] -> logits [B, D]; the last
        feature, the load after taking the block above the least such load (in blocks), is the
        greedy prior's term; ``phase_gap`` [B, D] (the rise of the sum of per-phase maxima
        above the least such rise, in blocks) is the phase prior's."""
        enc = encoding.unsqueeze(1).expand(-1, device_features.shape[1], -1)
        learnt = self.device(torch.cat([enc, device_features], dim=-1)).squeeze(-1)
        logits = learnt - self.prior * device_features[..., -1]
        return logits if phase_gap is None else logits - self.prior * self.phase_mix * phase_gap



def save_policy(policy: ShardingPolicy, path: str | Path, metadata: dict[str, Any] | None = None) -> Path:
    """Write ``planner.safetensors`` and ``planner.json`` into the directory ``path``."""
    from safetensors.torch import save_file

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    save_file({k: v.detach().contiguous() for k, v in policy.state_dict().items()}, path / POLICY_WEIGHTS)
    config = {"format": "autorec-sharding-policy", "version": 2, "hidden": policy.hidden,
              "objective": policy.objective, "metadata": metadata or {}}
    (path / POLICY_CONFIG).write_text(json.dumps(config, indent=2) + "\n")
    return path


def load_policy(path: str | Path) -> ShardingPolicy:
    """The policy :func:`save_policy` wrote into the directory ``path``."""
    config, config_path, weights_path = read_config(
        path, POLICY_CONFIG, POLICY_WEIGHTS, "autorec-sharding-policy", PlanningError,
        f"train the planner's policy first (python benchmarks/sharding_plans.py --train --out {path})")
    hidden = config.get("hidden")
    if not isinstance(hidden, int) or hidden < 1:
        raise PlanningError(f"{config_path}: hidden: expected a positive integer, got {hidden!r}")
    objective = config.get("objective", "max")
    if objective not in OBJECTIVES:
        raise PlanningError(f"{config_path}: objective: expected one of {', '.join(OBJECTIVES)}, "
                            f"got {objective!r}")
    policy = ShardingPolicy(hidden)
    policy.objective = objective
    if config.get("version", 1) == 1:  # written before the phase term: its weight stays 0
        from safetensors.torch import load_file, save_file

        weights = load_file(weights_path)
        weights.setdefault("phase_mix", torch.tensor(0.0))
        with tempfile.TemporaryDirectory() as tmp:
            save_file(weights, Path(tmp) / POLICY_WEIGHTS)
            load_weights(policy, Path(tmp) / POLICY_WEIGHTS, config_path, PlanningError)
    else:
        load_weights(policy, weights_path, config_path, PlanningError)
    return policy.eval()
