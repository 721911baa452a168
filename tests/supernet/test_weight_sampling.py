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
