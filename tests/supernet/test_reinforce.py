"""``arch_estimator: reinforce``: forward-only architecture steps that follow the paths' losses."""

import pytest
import torch

from autorec.data import load_dataset
from autorec.space import SearchSpace
from autorec.supernet import SupernetConfig, SupernetSearch
from tests.supernet.test_weight_sampling import SPACE, count_candidate_calls


@pytest.fixture(scope="module")
def data():
    return load_dataset("synthetic", preset="tiny", num_samples=3000)


def search(data, **options) -> SupernetSearch:
    return SupernetSearch(SearchSpace.from_dict(SPACE), data, 8, (8,), (16,), SupernetConfig(
        batch_size=64, arch_estimator="reinforce", **options))


def test_the_options_are_checked():
    with pytest.raises(ValueError, match="arch_estimator: expected one of gumbel, reinforce, got 'ppo'"):
        SupernetConfig(arch_estimator="ppo")
    with pytest.raises(ValueError, match=r"arch_samples: expected an integer >= 2 .*, got 1"):
        SupernetConfig(arch_samples=1)


def test_an_architecture_step_runs_its_paths_forward_only_and_moves_only_the_logits(data):
    run = search(data, steps=3, warmup_steps=2, arch_samples=5, arch_lr=0.5)
    calls = count_candidate_calls(run)
    train, val = run.batches()
    for step in range(2):
        run.step(step, train, val)
    assert sum(calls.values()) == 2  # warm-up: one path per weight step
    probe = run.selection_batches()[:2]
    before = {kind: run.path_outputs({"layer0.kind": kind}, probe)[0] for kind in run.supernet.layer_kinds[0]}
    logits = run.supernet.arch.logit("layer0.kind").detach().clone()
    # The architecture step alone (a weight step also precedes it in step()).
    calls_before = sum(calls.values())
    run.arch_optimizer.zero_grad()
    loss = run._reinforce_loss(next(val))
    loss.backward()
    run.arch_optimizer.step()
    assert sum(calls.values()) == calls_before + 5  # five paths scored, each one candidate
    # No weight, dense or embedding, moved: every path computes exactly what it did.
    for kind, logits_before in before.items():
        assert torch.equal(run.path_outputs({"layer0.kind": kind}, probe)[0], logits_before), kind
    assert not torch.equal(logits, run.supernet.arch.logit("layer0.kind").detach())


def test_the_logits_move_towards_the_path_of_lowest_validation_loss(data):
    run = search(data, steps=400, warmup_steps=100, weight_sampling="uniform", arch_lr=0.1)
    result = run.fit()
    batches = run.selection_batches()
    losses = {kind: run.path_scores({**run.supernet.arch.argmax(), "layer0.kind": kind}, batches)["val_loss"]
              for kind in run.supernet.layer_kinds[0]}
    probs = result.final_probs["layer0.kind"]
    assert max(probs, key=probs.get) == min(losses, key=losses.get), (probs, losses)
    assert max(probs.values()) > 0.6, probs


def test_with_reinforce_a_higher_lambda_gives_a_lower_expected_cost(data):
    options = {"steps": 120, "warmup_steps": 0, "arch_lr": 0.2, "weight_sampling": "uniform"}
    free = search(data, cost_lambda=0.0, **options).fit()
    costly = search(data, cost_lambda=3.0, **options).fit()
    assert free.cost_target == pytest.approx(costly.cost_target)
    assert costly.expected_cost < free.expected_cost
    assert costly.expected_cost < 0.8 * costly.cost_target


def test_a_field_of_a_kind_no_sampled_path_runs_gets_no_gradient(data):
    space = {**SPACE, "layers": {**SPACE["layers"],
                                 "wukong": {**SPACE["layers"]["wukong"], "n_fm": [1, 2]}}}
    run = SupernetSearch(SearchSpace.from_dict(space), data, 8, (8,), (16,), SupernetConfig(
        batch_size=64, arch_estimator="reinforce", arch_samples=3))
    arch = run.supernet.arch
    with torch.no_grad():  # wukong is (all but) never drawn
        arch.logit("layer0.kind")[run.supernet.layer_kinds[0].index("wukong")] = -30.0
    calls = count_candidate_calls(run)
    _, val = run.batches()
    run.arch_optimizer.zero_grad()
    run._reinforce_loss(next(val)).backward()
    assert calls["wukong"] == 0 and sum(calls.values()) == 3
    n_fm = arch.logit("layer0.wukong.n_fm").grad
    assert n_fm is None or not n_fm.any()  # its values decided none of the three paths
    assert arch.logit("layer0.kind").grad.abs().sum() > 0
