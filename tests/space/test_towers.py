"""The search space's ``towers`` section: counting, sampling, round trips, partition files, errors."""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest

from autorec.data import Schema, SparseFeature
from autorec.space import SearchSpace, SpaceError
from autorec.space.towers import tower_module, write_partition
from tests.doctests import assert_examples_run

SCHEMA = Schema(("x",), tuple(SparseFeature(f"f{i}", 10) for i in range(8)))
BASE = {"dim": [8], "layers": {"kinds": ["dlrm", "mlp"]}}


def _space(towers: dict, source: str = "<space>") -> SearchSpace:
    return SearchSpace.from_dict({**BASE, "towers": towers}, source)


def test_size_counts_every_tower_choice() -> None:
    space = _space({"num": [0, 2, 4], "kinds": ["dlrm", "mlp"], "n_out": [1, 2]})
    # (1 without towers + 2 counts x 2 kinds x 2 sizes) x 2 layer kinds
    assert space.size(SCHEMA) == (1 + 2 * 2 * 2) * 2
    assert SearchSpace.from_dict(BASE).size(SCHEMA) == 2


def test_samples_cover_the_choices_and_round_trip() -> None:
    space = _space({"num": [0, 2, 4], "kinds": ["dlrm", "mlp"], "n_out": [1, 2]})
    seen = set()
    for seed in range(60):
        spec = space.sample(SCHEMA, seed)
        t = spec.towers
        seen.add((t.num_towers, t.module.kind, t.n_out) if t else None)
        params = space.to_params(spec)
        assert space.from_params(params, SCHEMA) == spec
        assert space.contains(spec)
        if spec.towers:
            assert spec.towers.module == tower_module(spec.towers.module.kind)
            assert spec.num_inputs == spec.towers.num_towers * spec.towers.n_out + 1
            assert params["towers.num"] == spec.towers.num_towers
        else:
            assert "towers.kind" not in params
    assert len(seen) == 9


def test_optuna_suggests_towers() -> None:
    space = _space({"num": [2, 4], "kinds": ["mlp"], "n_out": [2]})
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    trial = study.ask()
    spec = space.suggest(trial, SCHEMA)
    assert spec.towers is not None and trial.params["towers.num"] == spec.towers.num_towers


def test_round_robin_and_file_partitions(tmp_path: Path) -> None:
    spec = _space({"num": [2]}).sample(SCHEMA, 0)
    assert spec.towers.groups == (("f0", "f2", "f4", "f6"), ("f1", "f3", "f5", "f7"))
    groups = (("f0", "f1", "f2"), ("f3", "f4", "f5", "f6", "f7"))
    write_partition(tmp_path / "parts.json", {2: groups})
    (tmp_path / "s.yaml").write_text("towers: {num: [2], partition: parts.json}\n")
    assert SearchSpace.load(tmp_path / "s.yaml").sample(SCHEMA, 0).towers.groups == groups
    without = _space({"num": [0]}).sample(SCHEMA, 0)
    assert without.towers is None
    # A spec whose groups differ from the space's partition is not in the space.
    assert not _space({"num": [2]}).contains(spec.replace(towers=spec.towers.__class__(
        groups=groups, module=spec.towers.module, n_out=spec.towers.n_out)))


@pytest.mark.parametrize(("towers", "message"), [
    ({"nums": [2]}, "towers.nums: unknown key"),
    ({"kinds": ["moe"]}, "towers.kinds[0]: expected one of dcnv2, dhen, dlrm, mlp, skip, wukong"),
    ({"num": [-1]}, "towers.num"),
    ({"n_out": [0]}, "towers.n_out"),
    ({"partition": 3}, "towers.partition: expected round_robin or a JSON file name"),
    ({"partition": "missing.json"}, "towers.partition: no such partition file"),
])
def test_bad_sections_name_the_key(towers: dict, message: str) -> None:
    with pytest.raises(SpaceError) as info:
        _space(towers, "my.yaml")
    assert "my.yaml: " in str(info.value) and message in str(info.value)


def test_bad_partition_files_name_the_file_and_key(tmp_path: Path) -> None:
    cases = {"bad.json": ("{not json", "invalid JSON"),
             "count.json": (json.dumps({"2": [["f0"]]}), "expected 2 non-empty lists"),
             "key.json": (json.dumps({"two": [["f0"], ["f1"]]}), "expected a tower count")}
    for name, (text, message) in cases.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(SpaceError, match=message):
            _space({"num": [2], "partition": str(tmp_path / name)})
    write_partition(tmp_path / "feats.json", {2: (("f0", "zz"), ("f1",))})
    space = _space({"num": [2], "partition": str(tmp_path / "feats.json")}, "s.yaml")
    with pytest.raises(SpaceError, match=r"towers.partition\[2\].*unknown \['zz'\]"):
        space.size(SCHEMA)
    with pytest.raises(SpaceError, match="no partition for 4 towers"):
        _space({"num": [4], "partition": str(tmp_path / "feats.json")}).size(SCHEMA)


def test_a_module_that_cannot_take_a_tower_is_an_error() -> None:
    # Round robin with 8 towers gives 1-feature towers; DLRM without passthrough needs 2+.
    with pytest.raises(SpaceError, match=r"towers\.kinds: dlrm cannot be the module of a 1-feature tower"):
        _space({"num": [8], "kinds": ["dlrm"]}).size(SCHEMA)
    with pytest.raises(SpaceError, match=r"towers\.num: 9 towers for 8 sparse features"):
        _space({"num": [9], "kinds": ["mlp"]}).size(SCHEMA)


def test_doctests() -> None:
    assert_examples_run("autorec.space.towers")
