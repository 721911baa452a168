"""REINFORCE with a baseline, written once for every episodic search in autorec.

Why by hand: the RL libraries on PyPI (stable-baselines3, rllib, torchrl) expect a gym-style
environment stepped one action at a time with fixed observation and action spaces. Our
environments have variable sizes (hundreds of tables, 4-16 devices) and score a whole episode at
once through a differentiable-free cost model, so the whole algorithm is the twenty lines of
``PolicyGradient.update``; an adapter to a framework would be longer than that.

Example:
    >>> import torch
    >>> from torch import nn
    >>> class Bandit(nn.Module):  # one action among 4; action 2 pays 1, the rest 0
    ...     def __init__(self) -> None:
    ...         super().__init__()
    ...         self.logits = nn.Parameter(torch.zeros(4))
    ...     def rollout(self, generator: torch.Generator) -> Rollout:
    ...         action, log_prob, entropy = masked_categorical(self.logits, generator=generator)
    ...         return Rollout(log_prob, entropy, reward=float(action == 2))
    >>> policy = Bandit()
    >>> history = PolicyGradient(policy, lr=0.1).fit(policy.rollout, iterations=60, batch_size=16)
    >>> int(policy.logits.argmax())
    2
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

BASELINES = ("batch", "ema")


def masked_categorical(logits: Tensor, mask: Tensor | None = None, *, greedy: bool = False,
                       generator: torch.Generator | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """Sample (or, with ``greedy``, take the argmax of) one action per row of ``logits``.

    Args:
        logits: ``[..., A]`` unnormalised action scores.
        mask: ``[..., A]`` bool, False where an action is not allowed (e.g. a device without
            memory left); every row needs at least one allowed action.
        greedy: take the most likely allowed action instead of sampling.
        generator: the random stream to sample from (for reproducible rollouts).

    Returns:
        ``(action [...] long, log_prob [...], entropy [...])``; log-prob and entropy carry the
        gradient of ``logits``, over the allowed actions only.

    Example:
        >>> logits = torch.tensor([[0.0, 5.0, 1.0]])
        >>> action, log_prob, entropy = masked_categorical(
        ...     logits, torch.tensor([[True, False, True]]), greedy=True)
        >>> action.tolist()
        [2]
    """
    if mask is not None:
        if mask.shape != logits.shape:
            raise ValueError(f"mask has shape {tuple(mask.shape)}, expected the logits' shape "
                             f"{tuple(logits.shape)}")
        if not bool(mask.any(dim=-1).all()):
            raise ValueError("masked_categorical: a row of the mask allows no action")
        logits = logits.masked_fill(~mask, -math.inf)
    log_probs = torch.log_softmax(logits, dim=-1)
    probs = log_probs.exp()
    if greedy:
        action = log_probs.argmax(dim=-1)
    else:
        flat = probs.detach().reshape(-1, probs.shape[-1])
        action = torch.multinomial(flat, 1, generator=generator).reshape(probs.shape[:-1])
    log_prob = log_probs.gather(-1, action.unsqueeze(-1)).squeeze(-1)
    # 0 * -inf is nan: masked actions contribute nothing to the entropy.
    entropy = -(probs * log_probs.masked_fill(probs == 0, 0.0)).sum(dim=-1)
    return action, log_prob, entropy


@dataclass
class Rollout:
    """One finished episode.

    Attributes:
        log_prob: scalar with gradient, the sum of the episode's action log-probabilities.
        entropy: scalar with gradient, the sum of the episode's action entropies.
        reward: the episode's score (higher is better).
        info: whatever the environment wants back, e.g. the plan the actions built.
    """

    log_prob: Tensor
    entropy: Tensor
    reward: float
    info: Any = None


class PolicyGradient:
    """REINFORCE with a baseline, standardised advantages, an entropy bonus and Adam.

    Args:
        policy: the module whose parameters the rollouts' log-probabilities depend on.
        lr: Adam's learning rate.
        entropy_weight: weight of the entropy bonus (keeps the policy exploring).
        baseline: "batch" subtracts the batch's mean reward; "ema" subtracts an exponential
            moving average of past batch means (for batches too small to average).
        ema: the moving average's decay, for ``baseline="ema"``.
        max_grad_norm: gradient clipping norm.

    Example:
        >>> policy = nn.Linear(1, 3)
        >>> trainer = PolicyGradient(policy, lr=0.05)
        >>> def rollout(generator: torch.Generator) -> Rollout:
        ...     action, log_prob, entropy = masked_categorical(
        ...         policy(torch.ones(1)), generator=generator)
        ...     return Rollout(log_prob, entropy, reward=-float(action))
        >>> stats = trainer.fit(rollout, iterations=80, batch_size=16)
        >>> int(policy(torch.ones(1)).argmax())
        0
    """

    def __init__(self, policy: nn.Module, *, lr: float = 3e-3, entropy_weight: float = 1e-3,
                 baseline: str = "batch", ema: float = 0.9, max_grad_norm: float = 1.0) -> None:
        if baseline not in BASELINES:
            raise ValueError(f"baseline: expected one of {', '.join(BASELINES)}, got {baseline!r}")
        if not 0.0 <= ema < 1.0:
            raise ValueError(f"ema: expected a decay in [0, 1), got {ema}")
        params = [p for p in policy.parameters() if p.requires_grad]
        if not params:
            raise ValueError("policy has no trainable parameters")
        self.policy = policy
        self.params = params
        self.optimizer = torch.optim.Adam(params, lr=lr)
        self.entropy_weight = entropy_weight
        self.baseline = baseline
        self.ema = ema
        self.max_grad_norm = max_grad_norm
        self._running: float | None = None

    def update(self, rollouts: Sequence[Rollout]) -> dict[str, float]:
        """One gradient step on a batch of rollouts.

        Returns:
            ``{"loss", "reward_mean", "reward_max", "entropy"}`` of this batch.
        """
        if not rollouts:
            raise ValueError("update: no rollouts")
        rewards = torch.tensor([float(r.reward) for r in rollouts], dtype=torch.float64)
        if not bool(torch.isfinite(rewards).all()):
            raise ValueError(f"update: non-finite reward in {rewards.tolist()}")
        mean = float(rewards.mean())
        if self.baseline == "batch":
            base = mean
        else:
            base = mean if self._running is None else self._running
            self._running = mean if self._running is None else (
                self.ema * self._running + (1 - self.ema) * mean)
        advantage = rewards - base
        scale = float(rewards.std()) if len(rollouts) > 1 else 0.0
        if scale > 1e-12:
            advantage = advantage / scale
        log_probs = torch.stack([r.log_prob.reshape(()) for r in rollouts])
        entropies = torch.stack([r.entropy.reshape(()) for r in rollouts])
        loss = -(advantage.to(log_probs.dtype) * log_probs).mean() \
            - self.entropy_weight * entropies.mean()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.params, self.max_grad_norm)
        self.optimizer.step()
        return {"loss": float(loss.detach()), "reward_mean": mean, "reward_max": float(rewards.max()),
                "entropy": float(entropies.detach().mean())}

    def fit(self, rollout_fn: Callable[[torch.Generator], Rollout], *, iterations: int,
            batch_size: int, seed: int = 0,
            callback: Callable[[int, dict[str, float]], bool | None] | None = None,
            ) -> list[dict[str, float]]:
        """Train: ``iterations`` times, draw ``batch_size`` rollouts and take one step.

        Args:
            rollout_fn: plays one episode with the policy, sampling from the generator given.
            iterations: number of updates.
            batch_size: rollouts per update.
            seed: seeds the generator the rollouts sample from.
            callback: called as ``callback(i, stats)`` after each update; True stops training.

        Returns:
            The stats of every update, in order.
        """
        if iterations < 1 or batch_size < 1:
            raise ValueError(f"fit: iterations and batch_size must be >= 1, got {iterations} "
                             f"and {batch_size}")
        generator = torch.Generator().manual_seed(seed)
        history: list[dict[str, float]] = []
        self.policy.train()
        for i in range(iterations):
            stats = self.update([rollout_fn(generator) for _ in range(batch_size)])
            history.append(stats)
            if callback is not None and callback(i, stats):
                break
        return history
