"""``weight_sampling: uniform``: every candidate trains equally often; the logits still learn."""

import pytest
import torch

from autorec.data import load_dataset
from autorec.space import SearchSpace
from autorec.supernet import SupernetConfig, SupernetSearch

# One layer, three kinds of very different FLOPs (the cross network's full-rank D x D product
# against the dot interaction and a small Wukong).
SPACE = {
    "dim": [8], "dense_arch": [[8]], "over_arch": [[16]],
    "layers": {"num": {"low": 1, "high": 1}, "kinds": ["dlrm", "dcnv2", "wukong"],
               "dlrm": {"n_passthrough": [1], "self_interaction": [False]},
               "dcnv2": {"num_layers": [3], "rank": [0]},
               "wukong": {"n_fm": [2], "n_lcb": [2], "rank": [2], "mlp": [[8]]}},
}


@pytest.fixture(scope="module")
def data():
    return load_dataset("synthetic", preset="tiny", num_samples=3000)


def run(data, **options) -> tuple[SupernetSearch, object]:
    search = SupernetSearch(SearchSpace.from_dict(SPACE), data, 8, (8,), (16,), SupernetConfig(
        batch_size=64, warmup_steps=0, **options))
    return search, search.fit()


def test_the_option_is_checked():
    with pytest.raises(ValueError, match="weight_sampling: expected one of arch, uniform, got 'spos'"):
        SupernetConfig(weight_sampling="spos")


def test_uniform_weight_steps_train_every_kind_equally_while_the_logits_move(data):
    # A large architecture learning rate, so under the default the logits pull the weight steps
    # towards their favourite; uniform weight sampling must not follow them.
    options = {"steps": 300, "arch_lr": 0.3, "cost_lambda": 1.0}
    search, result = run(data, weight_sampling="uniform", **options)
    counts = result.weight_counts[0]
    assert sum(counts.values()) == 300 and set(counts) == {"dlrm", "dcnv2", "wukong"}
    # Binomial(300, 1/3): mean 100, sd 8.2; 35 is more than 4 sd.
    assert all(abs(n - 100) <= 35 for n in counts.values()), counts
    probs = torch.softmax(search.supernet.arch.logit("layer0.kind").detach(), dim=0)
    assert float(probs.max() - probs.min()) > 0.2, probs  # the architecture step still learned
    # The same run with the default sampling: the weight steps follow the logits.
    _, default = run(data, **options)
    assert max(default.weight_counts[0].values()) > max(counts.values()), default.weight_counts


def test_with_uniform_weight_sampling_a_higher_lambda_gives_a_lower_expected_cost(data):
    options = {"steps": 120, "arch_lr": 0.2, "weight_sampling": "uniform"}
    _, free = run(data, cost_lambda=0.0, **options)
    _, costly = run(data, cost_lambda=3.0, **options)
    # Both start at the same E[cost] (the target, ratio 1); the penalty pushes it down.
    assert free.cost_target == pytest.approx(costly.cost_target)
    assert costly.expected_cost < free.expected_cost
    assert costly.expected_cost < 0.8 * costly.cost_target


def test_arch_every_is_checked_and_spaces_the_architecture_steps():
    with pytest.raises(ValueError, match="supernet arch_every: expected an integer >= 1, got 0"):
        SupernetConfig(arch_every=0)
    config = SupernetConfig(steps=12, warmup_steps=2, arch_every=3)
    assert [s for s in range(12) if config.arch_step_at(s)] == [2, 5, 8, 11]
    assert [s for s in range(4) if SupernetConfig(steps=4, warmup_steps=1).arch_step_at(s)] == [1, 2, 3]


def count_candidate_calls(search: SupernetSearch) -> dict[str, int]:
    """Runs of each layer-0 candidate, counted by forward hooks. A single path on its live
    vectors (autorec.supernet.compact) computes some ops off their forward, so the counted
    supernet runs padded (the same paths; tests/supernet/test_compact.py: the same numbers)."""
    search.supernet.compact = False
    calls = dict.fromkeys(search.supernet.layer_kinds[0], 0)
    for kind, candidate in search.supernet.layers[0].candidates.items():
        candidate.register_forward_hook(lambda *_, kind=kind: calls.__setitem__(kind, calls[kind] + 1))
    return calls


def hooked(data, **options) -> tuple[SupernetSearch, dict[str, int]]:
    search = SupernetSearch(SearchSpace.from_dict(SPACE), data, 8, (8,), (16,), SupernetConfig(
        batch_size=64, **options))
    return search, count_candidate_calls(search)


@pytest.mark.parametrize("weight_hard", [True, False])
def test_weight_hard_sets_the_weight_steps_path_and_arch_every_their_partners(data, weight_hard):
    # Soft architecture steps (every candidate runs), after steps 4, 7 and 10 of 12.
    search, calls = hooked(data, steps=12, warmup_steps=4, arch_every=3, hard=False,
                           weight_hard=weight_hard, weight_sampling="uniform")
    train, val = search.batches()
    for step in range(12):
        search.step(step, train, val)
    per_weight_step = 1 if weight_hard else 3
    assert sum(calls.values()) == 12 * per_weight_step + 3 * 3, calls
    if weight_hard:
        assert search.weight_counts[0] == {k: n - 3 for k, n in calls.items()}


def test_weight_hard_none_follows_hard(data):
    assert SupernetConfig(hard=False).weight_step_hard is False
    assert SupernetConfig(hard=True).weight_step_hard is True
    assert SupernetConfig(hard=True, weight_hard=False).weight_step_hard is False
    search, calls = hooked(data, steps=5, warmup_steps=5, hard=True)
    train, val = search.batches()
    for step in range(5):
        search.step(step, train, val)
    assert sum(calls.values()) == 5, calls  # no architecture step in the warm-up, one path each
