"""The shared policy-gradient core: masked sampling and REINFORCE that actually learns."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from autorec.rl import PolicyGradient, Rollout, masked_categorical
from tests.doctests import assert_examples_run


def test_doctests() -> None:
    assert_examples_run("autorec.rl.policy_gradient")


def test_masked_actions_are_never_sampled() -> None:
    logits = torch.zeros(2000, 5)
    mask = torch.tensor([True, False, True, False, True]).expand(2000, 5)
    action, log_prob, entropy = masked_categorical(
        logits, mask, generator=torch.Generator().manual_seed(0))
    assert set(action.tolist()) == {0, 2, 4}
    torch.testing.assert_close(log_prob, torch.full((2000,), -torch.log(torch.tensor(3.0))))
    torch.testing.assert_close(entropy, torch.full((2000,), torch.log(torch.tensor(3.0))))


def test_sampling_follows_the_probabilities() -> None:
    logits = torch.log(torch.tensor([0.1, 0.6, 0.3])).expand(20000, 3)
    action, _, _ = masked_categorical(logits, generator=torch.Generator().manual_seed(1))
    freq = torch.bincount(action, minlength=3).double() / 20000
    torch.testing.assert_close(freq, torch.tensor([0.1, 0.6, 0.3], dtype=torch.double),
                               atol=0.015, rtol=0)


def test_greedy_takes_the_best_allowed_action() -> None:
    logits = torch.tensor([[3.0, 2.0, 1.0], [0.0, 1.0, 2.0]])
    mask = torch.tensor([[False, True, True], [True, True, True]])
    action, _, _ = masked_categorical(logits, mask, greedy=True)
    assert action.tolist() == [1, 2]


def test_same_seed_same_actions() -> None:
    logits = torch.randn(50, 7, generator=torch.Generator().manual_seed(3))
    a, _, _ = masked_categorical(logits, generator=torch.Generator().manual_seed(9))
    b, _, _ = masked_categorical(logits, generator=torch.Generator().manual_seed(9))
    assert torch.equal(a, b)


def test_bad_masks_are_refused() -> None:
    with pytest.raises(ValueError, match="allows no action"):
        masked_categorical(torch.zeros(2, 3), torch.tensor([[True, False, False], [False] * 3]))
    with pytest.raises(ValueError, match=r"mask has shape \(3,\), expected the logits' shape"):
        masked_categorical(torch.zeros(2, 3), torch.ones(3, dtype=torch.bool))


class _Assign(nn.Module):
    """Put each of 6 items on one of 3 bins; reward = -(max bin load). Loads are fixed."""

    loads = torch.tensor([5.0, 4.0, 3.0, 3.0, 2.0, 1.0])

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6 + 3, 32), nn.Tanh(), nn.Linear(32, 3))

    def rollout(self, generator: torch.Generator, greedy: bool = False) -> Rollout:
        bins = torch.zeros(3)
        log_prob, entropy = torch.zeros(()), torch.zeros(())
        for i, load in enumerate(self.loads):
            state = torch.cat([nn.functional.one_hot(torch.tensor(i), 6).float(), bins / 9])
            action, lp, ent = masked_categorical(self.net(state), greedy=greedy,
                                                 generator=generator)
            bins[action] += load
            log_prob, entropy = log_prob + lp, entropy + ent
        return Rollout(log_prob, entropy, reward=-float(bins.max()), info=bins)


@pytest.mark.parametrize("baseline", ["batch", "ema"])
def test_reinforce_learns_a_balanced_assignment(baseline: str) -> None:
    torch.manual_seed(0)
    policy = _Assign()
    untrained = sum(policy.rollout(torch.Generator().manual_seed(s)).reward for s in range(64))
    history = PolicyGradient(policy, lr=0.02, baseline=baseline).fit(
        policy.rollout, iterations=150, batch_size=16, seed=0)
    assert len(history) == 150
    best = policy.rollout(torch.Generator(), greedy=True)
    # 18 units over 3 bins: the optimum max load is 6; random assignment averages about 10.
    assert untrained / 64 < -8.5
    assert best.reward >= -7.0


def test_callback_stops_training() -> None:
    policy = _Assign()
    history = PolicyGradient(policy).fit(policy.rollout, iterations=50, batch_size=2,
                                         callback=lambda i, stats: i == 4)
    assert len(history) == 5


def test_bad_arguments_are_refused() -> None:
    policy = _Assign()
    with pytest.raises(ValueError, match="baseline: expected one of batch, ema, got 'mean'"):
        PolicyGradient(policy, baseline="mean")
    with pytest.raises(ValueError, match="no trainable parameters"):
        PolicyGradient(nn.ReLU())
    trainer = PolicyGradient(policy)
    with pytest.raises(ValueError, match="no rollouts"):
        trainer.update([])
    bad = policy.rollout(torch.Generator().manual_seed(0))
    bad.reward = float("nan")
    with pytest.raises(ValueError, match="non-finite reward"):
        trainer.update([bad])
    with pytest.raises(ValueError, match="iterations and batch_size must be >= 1"):
        trainer.fit(policy.rollout, iterations=0, batch_size=4)
