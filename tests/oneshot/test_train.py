"""The supernet's single-path training: fair steps train every candidate; a cut run resumes."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from autorec.data import load_dataset
from autorec.oneshot.train import OneShotTrainConfig, SupernetTraining
from autorec.space import SearchSpace
from autorec.supernet import SupernetError

SPACE = {"dim": [8], "dense_arch": [[16]], "over_arch": [[16], [32]],
         "layers": {"num": [1], "kinds": ["dlrm", "dcnv2", "wukong"],
                    "wukong": {"n_fm": [2, 4], "n_lcb": [2], "rank": [2], "mlp": [[16]]}}}


@pytest.fixture(scope="module")
def data():
    return load_dataset("synthetic", preset="tiny", num_samples=3000)


def weights(run: SupernetTraining) -> dict[str, torch.Tensor]:
    """Every weight as a plain tensor (a sharded table: its one local shard, on one process)."""
    out = {}
    for key, value in run.search.model.state_dict().items():
        if hasattr(value, "local_shards"):
            value = value.local_shards()[0].tensor
        if isinstance(value, torch.Tensor):
            out[key] = value.detach().clone()
    return out


@pytest.mark.parametrize("decay", [0, 4])  # 4: the cut falls inside the dense learning rate's decay
def test_a_run_cut_after_a_checkpoint_resumes_to_the_same_weights(data, tmp_path, monkeypatch, decay):
    space = SearchSpace.from_dict(SPACE)
    config = OneShotTrainConfig(steps=6, batch_size=64, checkpoint_every=2, seed=3, dense_lr_decay=decay)
    straight = SupernetTraining(space, data, config, tmp_path / "straight")
    straight.fit()

    cut = SupernetTraining(space, data, config, tmp_path / "cut")
    real_step, calls = SupernetTraining.step, []

    def step_then_die(self, batch, index=None):
        if len(calls) == 5:  # the 5th step: after the checkpoint at step 4
            raise KeyboardInterrupt
        calls.append(1)
        return real_step(self, batch, index)

    monkeypatch.setattr(SupernetTraining, "step", step_then_die)
    with pytest.raises(KeyboardInterrupt):
        cut.fit()
    monkeypatch.setattr(SupernetTraining, "step", real_step)
    again = SupernetTraining(space, data, config, tmp_path / "cut")
    state = again.fit()
    assert state.step == 6 and state.resumed_from == [4] and len(state.losses) == 6
    a, b = weights(straight), weights(again)
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=1e-5, atol=1e-6, msg=key)


def test_a_finished_run_does_nothing_and_another_config_is_refused(data, tmp_path):
    space = SearchSpace.from_dict(SPACE)
    config = OneShotTrainConfig(steps=2, batch_size=64, checkpoint_every=1)
    SupernetTraining(space, data, config, tmp_path).fit()
    state = SupernetTraining(space, data, config, tmp_path).fit()
    assert state.step == 2 and state.resumed_from == [2]
    other = OneShotTrainConfig(steps=2, batch_size=32, checkpoint_every=1)
    with pytest.raises(ValueError, match="written with another configuration"):
        SupernetTraining(space, data, other, tmp_path).fit()


@pytest.mark.parametrize("options, message", [
    ({"steps": 0}, "steps: expected an integer >= 1, got 0"),
    ({"sampling": "strict"}, "sampling: expected one of fair, sandwich, uniform, got 'strict'"),
    ({"steps": 10, "embedding_warmup": 11},
     r"embedding_warmup: expected an integer in \[0, steps \(10\)\], got 11"),
    ({"embedding_warmup": -1}, r"embedding_warmup: expected an integer in \[0, steps \(2000\)\], got -1"),
    ({"embedding_warmup": True}, r"embedding_warmup: .* got True"),
    ({"steps": 10, "shared_until": 11}, r"shared_until: expected an integer in \[0, steps \(10\)\], got 11"),
    ({"shared_until": -1}, r"shared_until: expected an integer in \[0, steps \(2000\)\], got -1"),
    ({"shared_until": True}, r"shared_until: .* got True"),
    ({"steps": 10, "dense_lr_decay": 11},
     r"dense_lr_decay: expected an integer in \[0, steps \(10\)\], got 11"),
    ({"dense_lr_decay": -1}, r"dense_lr_decay: expected an integer in \[0, steps \(2000\)\], got -1"),
    ({"dense_lr_decay": 1.5}, r"dense_lr_decay: .* got 1.5"),
    ({"shared_paths": 1.5}, r"shared_paths: expected a share of steps in \[0, 1\], got 1.5"),
    ({"shared_paths": -0.1}, r"shared_paths: .* got -0.1"),
    ({"shared_paths": True}, r"shared_paths: .* got True"),
    ({"shared_paths": "half"}, r"shared_paths: .* got 'half'"),
    ({"width_columns": "wide"}, "width_columns: expected one of shared, own, got 'wide'"),
    ({"shared_until": 2, "fine_embedding_lr": 0},
     r"fine_embedding_lr: expected a learning rate > 0 or null, got 0"),
    ({"shared_until": 2, "fine_embedding_lr": -0.1}, r"fine_embedding_lr: .* got -0.1"),
    ({"shared_until": 2, "fine_embedding_lr": True}, r"fine_embedding_lr: .* got True"),
    ({"shared_until": 2, "fine_embedding_lr": "fast"}, r"fine_embedding_lr: .* got 'fast'"),
    ({"fine_embedding_lr": 0.1}, r"fine_embedding_lr: the fine phase starts at shared_until, which is 0"),
    ({"rescale": "no"}, "rescale: expected true, false or a list of layer kinds, got 'no'"),
    ({"rescale": 0}, "rescale: expected true, false or a list of layer kinds, got 0"),
    ({"rescale": []}, r"rescale: expected true, false or a list of layer kinds, got \[\]"),
    ({"rescale": ["dlrm", 1]}, r"rescale: expected .* got \['dlrm', 1\]"),
])
def test_bad_options(options, message):
    with pytest.raises(ValueError, match=message):
        OneShotTrainConfig(**options)


def test_a_checkpoint_from_before_an_option_existed_resumes_at_its_default(data, tmp_path):
    import json

    space = SearchSpace.from_dict(SPACE)
    config = OneShotTrainConfig(steps=2, batch_size=64, checkpoint_every=1)
    SupernetTraining(space, data, config, tmp_path).fit()
    for meta in tmp_path.glob("step-*/*.json"):
        record = json.loads(meta.read_text())
        if "config" in record:
            del record["config"]["embedding_warmup"]
            meta.write_text(json.dumps(record))
    assert SupernetTraining(space, data, config, tmp_path).fit().resumed_from == [2]
    with pytest.raises(ValueError, match="written with another configuration"):  # not at the default
        SupernetTraining(space, data, OneShotTrainConfig(steps=2, batch_size=64, checkpoint_every=1,
                                                         embedding_warmup=1), tmp_path).fit()


@pytest.mark.parametrize("sampling", ["uniform", "fair", "sandwich"])
def test_the_embedding_warmup_keeps_every_feature_widest_then_draws(data, tmp_path, monkeypatch, sampling):
    space = SearchSpace.from_dict({**SPACE, "embedding": {"dim": [0, 4, 8], "hash": [0.5, 1]}})
    run = SupernetTraining(space, data, OneShotTrainConfig(steps=8, batch_size=64, checkpoint_every=8,
                                                           embedding_warmup=3, sampling=sampling), tmp_path)
    widest = run.widest_embeddings
    emb = {c.name: c.values for c in run.choices if c.name.startswith("emb.")}
    assert len(widest) == len(emb) == 2 * len(data.schema.sparse)
    assert all(emb[name][i] == (1 if name.endswith(".hash") else 8) for name, i in widest.items())
    steps: list[list[dict[str, int]]] = []
    real = run.train_paths
    monkeypatch.setattr(run, "train_paths", lambda batch, paths: steps.append(paths) or real(batch, paths))
    run.fit()
    assert len(steps) == 8
    for paths in steps[:3]:
        assert all({k: p[k] for k in widest} == widest for p in paths)
        assert len(paths) == {"fair": 3, "uniform": 1, "sandwich": 3}[sampling]  # drawn as ever
        if sampling == "fair":
            assert len({p["layer0.kind"] for p in paths}) == 3
    # then drawn: over 5 steps of 2 x 4 embedding choices, not every one at its widest
    assert any({k: p[k] for k in widest} != widest for paths in steps[3:] for p in paths)


def _alike(path: dict[str, int], run: SupernetTraining) -> bool:
    """Whether ``path`` gives every feature one width and one hash size."""
    values = {c.name: c.values for c in run.choices}
    widths = {values[k][i] for k, i in path.items() if k.startswith("emb.") and not k.endswith(".hash")}
    hashes = {values[k][i] for k, i in path.items() if k.startswith("emb.") and k.endswith(".hash")}
    return len(widths) == 1 and len(hashes) == 1


@pytest.mark.parametrize("share", [0.0, 0.5, 1.0])
def test_shared_steps_give_every_feature_one_width_and_hash(data, tmp_path, monkeypatch, share):
    space = SearchSpace.from_dict({**SPACE, "embedding": {"dim": [0, 4, 8], "hash": [0.5, 1]}})
    # The paths of 400 steps are only recorded (the share is a count over many draws); the
    # corners of 12 steps are trained.
    n = 400 if share == 0.5 else 12
    run = SupernetTraining(space, data, OneShotTrainConfig(steps=n, batch_size=64, checkpoint_every=n,
                                                           shared_paths=share), tmp_path)
    assert len(data.schema.sparse) >= 4  # a per-feature draw all alike is then rare (3^-3 * 2^-3)
    steps: list[list[dict[str, int]]] = []
    real = run.train_paths
    monkeypatch.setattr(run, "train_paths", lambda batch, paths: steps.append(paths) or (
        real(batch, paths) if n == 12 else 0.0))
    run.fit()
    alike = [_alike(paths[0], run) for paths in steps]
    assert len(alike) == n
    if share == 1.0:
        assert all(alike)
        drawn = {(p[0]["emb.cat_0"], p[0]["emb.cat_0.hash"]) for p in steps}
        assert len(drawn) > 1  # drawn per step, not one setting for the run
    elif share == 0.0:
        assert not any(alike)
    else:  # 200 +- 10 expected; a share of 0.3 or 0.7 would give 120 or 280
        assert 160 < sum(alike) < 240


def test_fair_steps_train_every_kind(data, tmp_path):
    space = SearchSpace.from_dict(SPACE)
    run = SupernetTraining(space, data, OneShotTrainConfig(steps=3, batch_size=64, checkpoint_every=3,
                                                           sampling="fair"), tmp_path)
    before = weights(run)
    run.fit()
    after = weights(run)
    moved = {k.split(".candidates.")[1].split(".")[0] for k in before
             if ".candidates." in k and not torch.equal(before[k], after[k])}
    assert moved >= {"dcnv2", "wukong"}  # dlrm has no weights of its own


def test_uniform_sampling_the_default_runs_one_path_a_step(data, tmp_path, monkeypatch):
    space = SearchSpace.from_dict(SPACE)
    assert OneShotTrainConfig().sampling == "uniform"
    run = SupernetTraining(space, data, OneShotTrainConfig(steps=3, batch_size=64, checkpoint_every=3),
                           tmp_path)
    calls = []
    real = run.search._bce

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(run.search, "_bce", counted)
    state = run.fit()
    assert state.step == 3 and len(calls) == 3  # fair sampling would run 3 paths a step here


def test_the_supernet_is_built_for_the_space_choices_given(data, tmp_path):
    space = SearchSpace.from_dict(SPACE)
    with pytest.raises(ValueError, match=r"over_arch: \[64\] is not among the space's choices"):
        SupernetTraining(space, data, OneShotTrainConfig(over_arch=(64,)), tmp_path)
    with pytest.raises(ValueError, match=r"dim: 12 is not among the space's choices \[8\]"):
        SupernetTraining(space, data, OneShotTrainConfig(dim=12), tmp_path)
    run = SupernetTraining(space, data, OneShotTrainConfig(over_arch=(32,)), tmp_path)
    assert "over_arch" not in run.search.supernet.arch.choices  # fixed, not searched


def test_own_width_columns_train_and_refuse_a_shared_checkpoint(data, tmp_path):
    space = SearchSpace.from_dict({**SPACE, "dim": [16], "embedding": {"dim": [0, 4, 16]}})
    own = OneShotTrainConfig(steps=2, batch_size=64, checkpoint_every=1, width_columns="own")
    run = SupernetTraining(space, data, own, tmp_path / "own")
    assert run.fit().step == 2
    tables = [v for k, v in weights(run).items() if "embedding_bags" in k]
    assert tables and all(t.shape[1] == 4 + 16 for t in tables)
    shared = OneShotTrainConfig(steps=2, batch_size=64, checkpoint_every=1)
    SupernetTraining(space, data, shared, tmp_path / "shared").fit()
    with pytest.raises(ValueError, match="written with another configuration"):
        SupernetTraining(space, data, own, tmp_path / "shared").fit()


def test_sandwich_steps_train_the_largest_the_smallest_and_a_uniform_path(data, tmp_path, monkeypatch):
    space = SearchSpace.from_dict({**SPACE, "embedding": {"dim": [0, 4, 8], "hash": [0.5, 1]},
                                   "layers": {**SPACE["layers"], "num": {"low": 1, "high": 2}}})
    n = 40
    run = SupernetTraining(space, data, OneShotTrainConfig(steps=n, batch_size=64, checkpoint_every=n,
                                                           sampling="sandwich", shared_paths=1.0), tmp_path)
    values = {c.name: c.values for c in run.choices}
    assert values["layer1.kind"][-1] == "skip" and values["over_arch"] == ((16,), (32,))
    steps: list[list[dict[str, int]]] = []
    real = run.train_paths
    monkeypatch.setattr(run, "train_paths", lambda batch, paths: steps.append(paths) or (
        real(batch, paths) if len(steps) <= 2 else 0.0))  # two steps trained, the rest recorded
    run.fit()
    assert len(steps) == n and all(len(paths) == 3 for paths in steps)
    for largest, smallest, uniform in steps:
        big, small = ({k: values[k][i] for k, i in path.items()} for path in (largest, smallest))
        emb = [k for k in big if k.startswith("emb.")]
        assert all(big[k] == (1 if k.endswith(".hash") else 8) for k in emb)
        assert all(small[k] == (0.5 if k.endswith(".hash") else 4) for k in emb)  # kept, not dropped
        assert big["layer1.kind"] != "skip" and small["layer1.kind"] == "skip"
        assert big["over_arch"] == (32,) and small["over_arch"] == (16,)
        assert _alike(uniform, run)  # shared_paths applies to the uniform path
    # the choices that are no size are drawn in both extremes, not fixed
    for which in (0, 1):
        assert len({paths[which]["layer0.kind"] for paths in steps}) == 3
    assert len({paths[0]["layer1.kind"] for paths in steps}) == 3
    assert len({(p[2]["emb.cat_0"], p[2]["layer0.kind"]) for p in steps}) > 1


def test_uniform_paths_draw_as_before_the_sandwich_existed(data, tmp_path):
    """The uniform sampler's draws are the generator's, in the order they always were, so a
    recorded supernet's paths are the same after the sandwich was added."""
    space = SearchSpace.from_dict(SPACE)
    run = SupernetTraining(space, data, OneShotTrainConfig(steps=1, batch_size=64, seed=5), tmp_path)
    generator = torch.Generator().manual_seed(5)
    expected = {c.name: int(torch.randint(len(c.values), (1,), generator=generator)) for c in run.choices}
    assert run.uniform_path() == expected


@pytest.mark.parametrize(("rescale", "kinds"), [(True, {"dlrm", "dcnv2"}), (False, set()),
                                               (["dlrm"], {"dlrm"})])
def test_rescale_reaches_the_supernets_layers_and_off_trains_finite(data, tmp_path, rescale, kinds):
    space = SearchSpace.from_dict(SPACE)
    run = SupernetTraining(space, data, OneShotTrainConfig(steps=3, batch_size=64, checkpoint_every=3,
                                                           rescale=rescale), tmp_path)
    assert all(layer.rescale == kinds for layer in run.search.supernet.layers)
    state = run.fit()
    assert state.step == 3 and all(loss == loss for loss in state.losses)  # finite: no NaN
    # a checkpoint written either way is refused by a run with the other setting
    with pytest.raises(ValueError, match="written with another configuration"):
        SupernetTraining(space, data, OneShotTrainConfig(steps=3, batch_size=64, checkpoint_every=3,
                                                         rescale=not kinds), tmp_path).fit()


def test_rescale_naming_a_kind_with_a_norm_or_outside_the_space_is_refused(data, tmp_path):
    space = SearchSpace.from_dict(SPACE)
    for kinds in (["wukong"], ["dlrm", "mlp"]):
        with pytest.raises(SupernetError, match=r"rescale: \[.*\] are not layer kinds of this space "
                                                r"without a norm; expected true, false or some of "
                                                r"\['dlrm', 'dcnv2'\]"):
            SupernetTraining(space, data, OneShotTrainConfig(steps=1, batch_size=64, rescale=kinds), tmp_path)


def test_shared_until_trains_all_alike_paths_first_as_shared_paths_one_does(data, tmp_path, monkeypatch):
    """The first ``shared_until`` steps give every feature one width and one hash size, with the
    same draws as ``shared_paths: 1.0``: three such steps leave the same weights; after them the
    paths are per-feature again (``shared_paths: 0``)."""
    import torch

    space = SearchSpace.from_dict({**SPACE, "embedding": {"dim": [0, 4, 8], "hash": [0.5, 1]}})
    early = SupernetTraining(space, data, OneShotTrainConfig(steps=8, batch_size=64, checkpoint_every=8,
                                                             shared_until=3), tmp_path / "early")
    steps: list[list[dict[str, int]]] = []
    real = early.train_paths
    monkeypatch.setattr(early, "train_paths", lambda batch, paths: steps.append(paths) or real(batch, paths))
    early.fit()
    dims = [name for name in early.widest_embeddings if not name.endswith(".hash")]

    def alike(path: dict[str, int]) -> bool:
        return len({path[name] for name in dims}) == 1

    assert len(steps) == 8 and all(alike(p) for paths in steps[:3] for p in paths)
    assert not all(alike(p) for paths in steps[3:] for p in paths)
    weights = []
    for i, options in enumerate(({"shared_until": 3}, {"shared_paths": 1.0})):
        config = OneShotTrainConfig(steps=3, batch_size=64, checkpoint_every=3, **options)
        run = SupernetTraining(space, data, config, tmp_path / str(i))
        run.fit()
        weights.append(run.search.supernet.state_dict())
    assert weights[0].keys() == weights[1].keys()

    def local(value: torch.Tensor) -> torch.Tensor:  # a sharded table's one local shard
        return value.local_tensor() if hasattr(value, "local_tensor") else value

    assert all(torch.equal(local(weights[0][k]), local(weights[1][k])) for k in weights[0])


@pytest.mark.parametrize("decay", [0, 3, 5])
def test_dense_lr_decay_anneals_the_dense_rate_on_the_last_steps_only(data, tmp_path, monkeypatch, decay):
    """Each step's dense learning rate: ``dense_lr`` before the last ``dense_lr_decay`` steps,
    then falling along a half cosine, every step's above zero; the tables' rate never moves."""
    import math

    space = SearchSpace.from_dict(SPACE)
    run = SupernetTraining(space, data, OneShotTrainConfig(steps=5, batch_size=64, checkpoint_every=5,
                                                           dense_lr=0.01, dense_lr_decay=decay), tmp_path)
    dense, tables = [], []
    fused = [g for name, optim in run.search.weight_optimizer.optimizers if optim is not None
             for g in optim.param_groups if g not in run.dense_groups]
    real = run.train_paths

    def record(batch, paths):
        dense.append([g["lr"] for g in run.dense_groups])
        tables.append([g.get("lr") for g in fused])
        return real(batch, paths)

    monkeypatch.setattr(run, "train_paths", record)
    run.fit()
    assert run.dense_groups and all(len(set(lrs)) == 1 for lrs in dense)
    got = [lrs[0] for lrs in dense]
    falling = [0.01 * 0.5 * (1 + math.cos(math.pi * (i + 0.5) / decay)) for i in range(decay)]
    want = [0.01] * (5 - decay) + falling
    assert got == pytest.approx(want)
    assert all(b < a for a, b in zip(got[5 - decay:-1], got[6 - decay:], strict=True)) and got[-1] > 0
    assert all(t == tables[0] for t in tables)


def test_resume_loads_a_named_checkpoint_and_refuses_what_is_not_one(data, tmp_path):
    """``resume(checkpoint)`` loads that checkpoint, not the latest: a copy of step 2 kept
    elsewhere gives step 2's weights back after the run went on to step 4."""
    import shutil

    space = SearchSpace.from_dict(SPACE)
    config = OneShotTrainConfig(steps=4, batch_size=64, checkpoint_every=2, seed=3)
    run = SupernetTraining(space, data, config, tmp_path / "run")
    real_save = run.save

    def save_and_copy(state):
        real_save(state)
        if state.step == 2:
            shutil.copytree(tmp_path / "run" / "step-000000002", tmp_path / "kept")
            kept_weights.update(weights(run))
    kept_weights: dict[str, torch.Tensor] = {}
    run.save = save_and_copy
    run.fit()
    last = weights(run)
    assert any(not torch.equal(last[k], kept_weights[k]) for k in last)
    state = run.resume(tmp_path / "kept")
    assert state.step == 2
    now = weights(run)
    assert all(torch.equal(now[k], kept_weights[k]) for k in now)
    with pytest.raises(ValueError, match=r"not a supernet checkpoint \(no autorec.json\)"):
        run.resume(tmp_path / "run")


def table_lrs(run: SupernetTraining) -> set[float]:
    """The learning rates the fused tables' kernels hold (fbgemm's, which torchrec's fused
    optimizers hand their groups' lr at zero_grad and step)."""
    def kernels(optim):
        for _, child in getattr(optim, "_optims", []):
            yield from kernels(child)
        if hasattr(optim, "_emb_module"):
            yield optim._emb_module
    return {round(k.get_learning_rate(), 6) for k in kernels(run.search.model.fused_optimizer)}


@pytest.mark.parametrize("cut", [False, True])  # True: killed inside the fine phase, then resumed
def test_the_fine_phase_trains_the_tables_at_their_own_learning_rate(data, tmp_path, monkeypatch, cut):
    space = SearchSpace.from_dict({**SPACE, "embedding": {"dim": [0, 4, 8], "hash": [0.5, 1]}})
    config = OneShotTrainConfig(steps=6, batch_size=64, checkpoint_every=2, seed=1, shared_paths=0.5,
                                shared_until=3, embedding_lr=0.05, fine_embedding_lr=0.4)
    run = SupernetTraining(space, data, config, tmp_path / "fine")
    seen: list[set[float]] = []
    resumed = False
    real = SupernetTraining.train_paths

    def train_paths(self, batch, paths):
        loss = real(self, batch, paths)  # zero_grad hands the groups' lr to the kernels first
        seen.append(table_lrs(self))
        if cut and len(seen) == 5 and not resumed:  # after the checkpoint at step 4
            raise KeyboardInterrupt
        return loss

    monkeypatch.setattr(SupernetTraining, "train_paths", train_paths)
    if cut:
        with pytest.raises(KeyboardInterrupt):
            run.fit()
        run, resumed = SupernetTraining(space, data, config, tmp_path / "fine"), True
        del seen[4:]  # the 5th step is trained again
    assert run.fit().step == 6
    assert seen == [{0.05}] * 3 + [{0.4}] * 3
    # the same run at one lr throughout trains the tables alike up to the fine phase, then not
    monkeypatch.setattr(SupernetTraining, "train_paths", real)
    one_lr = dataclasses.replace(config, fine_embedding_lr=None)
    plain = SupernetTraining(space, data, one_lr, tmp_path / "plain")
    plain.fit()
    fine, other = weights(run), weights(plain)
    tables = [k for k in fine if "embedding_bags" in k]
    assert tables and any(not torch.equal(fine[k], other[k]) for k in tables)


@pytest.mark.parametrize("setting, kept", [(None, True), (False, False)])
def test_a_oneshot_study_keeps_freed_memory_as_its_train_section_says(tmp_path, monkeypatch, setting, kept):
    """The study's ``train: keep_freed_memory`` (default on, as for its Trainers) reaches the
    supernet's training, which runs before any Trainer of the study is built; whether glibc then
    keeps freed buffers is ``tests/train/test_memory.py``'s test, in a fresh process."""
    import autorec.oneshot.train as train_module
    from tests.oneshot.test_run import run_oneshot

    calls: list[bool] = []
    monkeypatch.setattr(train_module, "keep_freed", lambda: calls.append(True) or True)
    study = {} if setting is None else {"train": {"keep_freed_memory": setting}}
    run_oneshot(tmp_path, {"steps": 4, "candidates": 4, "rerank": 1, "calibrate": 0}, **study)
    assert bool(calls) is kept
