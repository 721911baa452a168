"""One over-arch per last layer kind (``kind_heads``): trained alone from the shared one, used
by the kind each candidate ends in, kept on disk so a rerun trains none again."""

from __future__ import annotations

import pytest
import torch

from autorec.blocks import identity_kind
from autorec.data import load_dataset
from autorec.oneshot.heads import NONE, KindHeads, end_kinds, last_kind
from autorec.oneshot.search import CandidateSearch
from autorec.oneshot.train import OneShotTrainConfig, SupernetTraining
from autorec.space import SearchSpace
from tests.oneshot.test_run import of_stage, run_oneshot

SPACE = {"dim": [8], "dense_arch": [[16]], "over_arch": [[16], [32]],
         "layers": {"num": {"low": 1, "high": 2}, "kinds": ["dlrm", "dcnv2"]}}
SKIP = identity_kind()


@pytest.fixture(scope="module")
def data():
    return load_dataset("synthetic", preset="tiny", num_samples=3000)


@pytest.fixture()
def trained(data, tmp_path):
    config = OneShotTrainConfig(steps=4, batch_size=64, seed=1, shared_paths=0.5)
    run = SupernetTraining(SearchSpace.from_dict(SPACE), data, config, tmp_path / "supernet")
    run.fit()
    return run


def head_weights(run: SupernetTraining) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in run.search.supernet.over_arch.state_dict().items()}


def differ(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return any(not torch.equal(a[k], b[k]) for k in a)


def test_the_last_kind_is_the_last_layer_not_skipped():
    kinds = [("dlrm", "dcnv2"), ("dlrm", "dcnv2", SKIP)]
    assert last_kind(kinds, {"layer0.kind": "dcnv2", "layer1.kind": SKIP}) == "dcnv2"
    assert last_kind(kinds, {"layer0.kind": "dcnv2", "layer1.kind": "dlrm"}) == "dlrm"
    assert last_kind([("dlrm",)], {}) == "dlrm"  # one kind: no choice, it runs
    assert last_kind([("dlrm", SKIP)], {"layer0.kind": SKIP}) == NONE
    assert end_kinds(kinds) == ["dlrm", "dcnv2"]
    assert end_kinds([("dlrm", SKIP)]) == ["dlrm", NONE]


def test_each_kind_gets_its_own_head_trained_alone(trained, tmp_path):
    shared = head_weights(trained)
    body = {k: v.detach().clone() for k, v in trained.search.supernet.layers.state_dict().items()}
    heads = KindHeads(trained, 3, tmp_path / "heads")
    assert heads.fit() > 0
    assert heads.kinds == ["dlrm", "dcnv2"]
    assert not differ(head_weights(trained), shared)  # the shared head is back after fitting
    assert differ(heads.heads["dlrm"], shared) and differ(heads.heads["dcnv2"], shared)
    assert differ(heads.heads["dlrm"], heads.heads["dcnv2"])
    after = trained.search.supernet.layers.state_dict()
    assert all(torch.equal(body[k], after[k]) for k in body)  # the layers stayed frozen
    assert all(p.requires_grad for p in trained.search.supernet.layers.parameters())

    heads.use({"layer0.kind": "dlrm", "layer1.kind": "dcnv2"})
    assert not differ(head_weights(trained), heads.heads["dcnv2"])
    heads.use({"layer0.kind": "dcnv2", "layer1.kind": SKIP})
    assert not differ(head_weights(trained), heads.heads["dcnv2"])
    heads.use({"layer0.kind": "dcnv2", "layer1.kind": "dlrm"})
    assert not differ(head_weights(trained), heads.heads["dlrm"])
    heads.use(None)
    assert not differ(head_weights(trained), shared)


def test_a_candidate_is_scored_with_its_kinds_head(trained, tmp_path):
    heads = KindHeads(trained, 3, tmp_path / "heads")
    heads.fit()
    plain = CandidateSearch(trained, 256, ("val_auc",))
    with_heads = CandidateSearch(trained, 256, ("val_auc",), heads=heads)
    names = {n: v[0] for n, v in plain.names.items()}
    values = plain.values_of({**names, "layer0.kind": "dcnv2", "layer1.kind": "dlrm"})
    own = with_heads.rescore(values, 512)["val_auc"]
    heads.use(None)
    assert plain.rescore(values, 512)["val_auc"] != own


def test_saved_heads_are_loaded_not_trained_again(trained, tmp_path):
    first = KindHeads(trained, 3, tmp_path / "heads")
    first.fit()
    again = KindHeads(trained, 3, tmp_path / "heads")
    assert again.fit() == 0.0
    for kind in first.kinds:
        assert not differ(first.heads[kind], again.heads[kind])
    (tmp_path / "heads" / "dlrm.json").unlink()  # a head without its record is trained again
    more = KindHeads(trained, 3, tmp_path / "heads")
    assert more.fit() > 0
    other = KindHeads(trained, 2, tmp_path / "heads")  # so is one of another length
    assert other.fit() > 0


def test_steps_must_be_a_positive_integer(trained, tmp_path):
    for bad in (0, -1, True, 2.5):
        with pytest.raises(ValueError, match=f"kind_heads: expected an integer >= 1 .* got {bad!r}"):
            KindHeads(trained, bad, tmp_path)


def test_a_study_with_kind_heads_records_them_and_counts_their_seconds(tmp_path):
    config, study = run_oneshot(tmp_path, {"steps": 6, "candidates": 6, "rerank": 2, "calibrate": 0,
                                           "kind_heads": 2, "kind_heads_shared": 1.0})
    record = study.user_attrs["oneshot"]
    assert record["heads"]["steps"] == 2 and record["heads"]["kinds"] and record["heads"]["share"] == 1.0
    assert record["search_seconds"] >= record["heads"]["seconds"] > 0
    heads = config.directory / "oneshot" / "heads"
    assert sorted(p.name for p in heads.glob("*.safetensors")) == sorted(
        f"{k}.safetensors" for k in record["heads"]["kinds"])
    assert len(of_stage(study, "final")) == 1
    # the same study without the heads scores the same first candidate with the shared over-arch
    (tmp_path / "plain").mkdir()
    _, plain = run_oneshot(tmp_path / "plain", {"steps": 6, "candidates": 6, "rerank": 2, "calibrate": 0})
    first, shared = of_stage(study, "proxy")[0], of_stage(plain, "proxy")[0]
    assert first.params == shared.params
    assert first.user_attrs["proxy"]["val_auc"] != shared.user_attrs["proxy"]["val_auc"]


@pytest.mark.parametrize("value, message", [
    (-1, "kind_heads: expected an integer >= 0, got -1"),
    ("many", "kind_heads"),
])
def test_a_bad_kind_heads_is_named(tmp_path, value, message):
    from autorec.strategies.oneshot import OneShotStrategy

    with pytest.raises(ValueError, match=message):
        OneShotStrategy(kind_heads=value)


EMB_SPACE = {**SPACE, "embedding": {"dim": [0, 4, 8], "hash": [0.5, 1]}}


def test_the_heads_draw_all_alike_paths_on_their_share(data, tmp_path):
    """``share`` (default the supernet's ``shared_paths``) is the share of the heads' paths whose
    features take one width and one hash size: 1.0 all of them, 0.0 per-feature draws."""
    import torch

    config = OneShotTrainConfig(steps=2, batch_size=64, seed=1, shared_paths=0.5)
    run = SupernetTraining(SearchSpace.from_dict(EMB_SPACE), data, config, tmp_path / "supernet")
    run.fit()
    widths = [n for n in run.widest_embeddings if not n.endswith(".hash")]
    assert len(widths) > 3

    def alike_share(heads: KindHeads) -> float:
        paths = heads._paths("dlrm", torch.Generator().manual_seed(0))
        drawn = [next(paths) for _ in range(200)]
        return sum(len({p[n] for n in widths}) == 1 for p in drawn) / len(drawn)

    assert KindHeads(run, 2, tmp_path / "a").share == 0.5  # the supernet's
    assert alike_share(KindHeads(run, 2, tmp_path / "b", share=1.0)) == 1.0
    assert alike_share(KindHeads(run, 2, tmp_path / "c", share=0.0)) < 0.15  # alike by chance only
    assert 0.3 < alike_share(KindHeads(run, 2, tmp_path / "d")) < 0.7


def test_a_head_saved_with_another_share_is_trained_again(trained, tmp_path):
    import json

    first = KindHeads(trained, 2, tmp_path / "heads")  # the supernet's share, 0.5
    assert first.fit() > 0
    assert json.loads((tmp_path / "heads" / "dlrm.json").read_text()) == {"steps": 2, "share": 0.5}
    assert KindHeads(trained, 2, tmp_path / "heads", share=0.5).fit() == 0.0  # the same heads
    # a head saved before the share was recorded drew the supernet's share: still the same heads
    (tmp_path / "heads" / "dlrm.json").write_text(json.dumps({"steps": 2}))
    assert KindHeads(trained, 2, tmp_path / "heads").fit() == 0.0
    assert KindHeads(trained, 2, tmp_path / "heads", share=1.0).fit() > 0  # another share: trained


@pytest.mark.parametrize("bad", [-0.1, 1.5, True, "all"])
def test_a_bad_heads_share_is_named(trained, tmp_path, bad):
    with pytest.raises(ValueError, match=f"kind_heads_shared: expected a share of paths in \\[0, 1\\], "
                                         f"got {bad!r}"):
        KindHeads(trained, 2, tmp_path, share=bad)


def test_the_strategy_checks_kind_heads_shared():
    from autorec.strategies.oneshot import OneShotStrategy

    assert OneShotStrategy(kind_heads=3, kind_heads_shared=1.0).kind_heads_shared == 1.0
    with pytest.raises(ValueError, match=r"kind_heads_shared: expected a share of paths in \[0, 1\], got 2"):
        OneShotStrategy(kind_heads=3, kind_heads_shared=2)
    with pytest.raises(ValueError, match="kind_heads_shared: set without kind_heads"):
        OneShotStrategy(kind_heads_shared=1.0)


def test_every_head_trains_on_the_stream_from_its_start_made_once(trained, tmp_path, monkeypatch):
    """The heads share the stream's first ``steps`` batches, made once: each head is the one a
    fresh stream from the start gives (``train_head`` without batches), bit for bit."""
    from autorec.oneshot.heads import train_head

    made = []
    batches = trained.search.batches
    monkeypatch.setattr(trained.search, "batches", lambda *a, **k: made.append(1) or batches(*a, **k))
    heads = KindHeads(trained, 5, tmp_path / "heads")
    heads.fit()
    assert len(made) == 1  # one stream for every head
    monkeypatch.undo()
    for i, kind in enumerate(heads.kinds):
        trained.search.supernet.over_arch.load_state_dict(heads.shared)
        generator = torch.Generator().manual_seed(trained.config.seed + 1 + i)
        alone = train_head(trained, heads._paths(kind, generator), 5)  # its own stream, from the start
        assert not differ(alone, heads.heads[kind]), kind
