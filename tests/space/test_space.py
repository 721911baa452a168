import dataclasses
import functools
import itertools
import json
from pathlib import Path

import optuna
import pytest

from autorec.arch import (
    ArchSpec,
    ArchSpecError,
    CrossConfig,
    DhenConfig,
    DotConfig,
    SkipConfig,
    TableSpec,
    WukongConfig,
)
from autorec.data import Schema, SparseFeature, load_dataset
from autorec.presets import preset, tables_for
from autorec.space import SPACES_DIR, SearchSpace, SpaceError

optuna.logging.set_verbosity(optuna.logging.WARNING)

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ["zoo", "wukong", "dhen", "dlrm", "quickstart", "precision", "growth"]
# Which presets each shipped space must hold, so a search over it can match them.
PRESETS_IN = {"zoo": ["dlrm", "dcnv2", "wukong", "dhen"], "quickstart": ["dlrm", "dcnv2", "wukong", "dhen"],
              "wukong": ["wukong"], "dhen": ["dhen"],
              "dlrm": ["dlrm", "dcnv2"], "precision": ["wukong"], "growth": ["dcnv2"]}

SMALL = Schema(dense=("d0", "d1", "d2"),
               sparse=(SparseFeature("user", 50), SparseFeature("item", 80), SparseFeature("city", 12),
                       SparseFeature("tags", 30, multi_hot=True), SparseFeature("hour", 24)))


@pytest.fixture(scope="module")
def movielens() -> Schema:
    return load_dataset("movielens100k").schema


@functools.cache
def shipped(name: str) -> SearchSpace:
    return SearchSpace.load(ROOT / "search_spaces" / f"{name}.yaml")


# ---- a tiny space whose architectures a brute force can list ------------------------------
# Two widths (multiples of 4, as torchrec's kernels need), dims that narrow DHEN num_heads (16
# divides neither), a Wukong layer that leaves one
# vector (so DLRM n_passthrough and the DHEN dot module get narrowed), conditional DHEN fields.
TINY = {
    "dim": [8, 24],
    "embedding": {"dim_ratio": [1, 0.5], "groups": {"ab": ["a", "b"]}},
    "dense_arch": [[8], []],
    "over_arch": [[8]],
    "layers": {
        "num": [0, 1, 2],
        "kinds": ["wukong", "dhen", "dlrm", "dcnv2", "skip"],
        "wukong": {"n_fm": [1, 2], "n_lcb": [0, 1], "rank": [1], "mlp": [[4]]},
        "dhen": {"modules": [["dot"], ["attention"], ["linear", "dcn"]], "ensemble": ["concat", "sum"],
                 "n_out": [1, 2], "num_heads": [1, 2, 16], "dcn_layers": [1, 2]},
        "dlrm": {"n_passthrough": [0, 1, 2], "self_interaction": [False, True]},
        "dcnv2": {"num_layers": {"low": 1, "high": 2}, "rank": [0, 2]},
    },
}
TINY_SCHEMA = Schema(dense=("x",), sparse=(SparseFeature("a", 10), SparseFeature("b", 20, multi_hot=True),
                                           SparseFeature("c", 5)))


def tiny(**changes) -> SearchSpace:
    return SearchSpace.from_dict({**TINY, **changes}, "tiny.yaml")


def brute_force_layers() -> list:
    """Every layer config of TINY, unused DHEN fields at their defaults (as the space keeps them)."""
    layers = [WukongConfig(n_fm=f, n_lcb=c, rank=1, mlp=(4,)) for f in (1, 2) for c in (0, 1)]
    for modules, ensemble, n_out, heads, dcn in itertools.product(
            [("dot",), ("attention",), ("linear", "dcn")], ["concat", "sum"], [1, 2], [1, 2, 16], [1, 2]):
        layers.append(DhenConfig(modules=modules, ensemble=ensemble, n_out=n_out,
                                 num_heads=heads if "attention" in modules else 2,
                                 dcn_layers=dcn if "dcn" in modules else 1))
    layers += [DotConfig(n_passthrough=p, self_interaction=s) for p in (0, 1, 2) for s in (False, True)]
    layers += [CrossConfig(num_layers=n, rank=r) for n in (1, 2) for r in (0, 2)]
    layers.append(SkipConfig())
    return list(dict.fromkeys(layers))


@functools.cache
def brute_force_specs() -> frozenset:
    """Every valid ArchSpec of TINY with tables as wide as D and dense arch [8], by trying them all."""
    configs = brute_force_layers()
    specs = set()
    for dim, num in itertools.product([8, 24], [0, 1, 2]):
        for layers in itertools.product(configs, repeat=num):
            try:
                specs.add(ArchSpec(name="tiny", dim=dim, tables=tables_for(TINY_SCHEMA, dim), n_dense=1,
                                   dense_arch=(8,), layers=layers, over_arch=(8,)))
            except ArchSpecError:
                pass
    return frozenset(specs)


class EnumerationTrial:
    """A duck-typed trial that replays a prefix of choice indices, then takes the first choice."""

    def __init__(self, prefix: list[int], distributions: dict) -> None:
        self.prefix, self.path, self.distributions = prefix, [], distributions

    def _index(self, name: str, choices: tuple) -> int:
        assert self.distributions.setdefault(name, choices) == choices, f"{name} changed its choices"
        i = self.prefix[len(self.path)] if len(self.path) < len(self.prefix) else 0
        self.path.append((i, len(choices)))
        return i

    def suggest_categorical(self, name, choices):
        return choices[self._index(name, tuple(choices))]

    def suggest_int(self, name, low, high, step=1):
        return low + step * self._index(name, tuple(range(low, high + 1, step)))


def enumerate_space(space: SearchSpace, schema: Schema) -> tuple[list, dict]:
    """Every architecture suggest() can make, by walking every branch of its choices."""
    specs, distributions, todo = [], {}, [[]]
    while todo:
        prefix = todo.pop()
        trial = EnumerationTrial(prefix, distributions)
        specs.append(space.suggest(trial, schema))
        for depth in range(len(prefix), len(trial.path)):
            head = [i for i, _ in trial.path[:depth]]
            todo.extend([*head, j] for j in range(1, trial.path[depth][1]))
    return specs, distributions


def test_size_matches_brute_force():
    # the table widths (2 ratios for group ab, 2 for c) and dense archs (2) multiply the stacks
    assert tiny().size(TINY_SCHEMA) == 2 * 2 * 2 * len(brute_force_specs())
    assert len(brute_force_specs()) > 1000


def test_suggest_makes_exactly_the_valid_architectures():
    space = tiny(embedding={"groups": {"ab": ["a", "b"]}}, dense_arch=[[8]])
    made, distributions = enumerate_space(space, TINY_SCHEMA)
    assert len(made) == len(set(made)) == space.size(TINY_SCHEMA)
    assert set(made) == brute_force_specs()
    # choices narrowed by D or by the input vectors are parameters of their own
    assert {"layer0.dhen.num_heads@dim=8", "layer1.dlrm.n_passthrough@f_in=1",
            "layer1.dhen.modules@dim=8,f_in=1"} <= set(distributions)
    assert distributions["layer0.dhen.num_heads@dim=24"] == (1, 2)
    assert distributions["layer1.dhen.modules@dim=24,f_in=1"] == ("attention", "linear+dcn")


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_spaces_load_and_hold_the_presets(name, movielens):
    space = shipped(name)
    assert space == SearchSpace.load(name)  # a bare name finds the shipped file
    assert space.name == name and space.description
    for schema in (movielens, SMALL):
        assert space.size(schema) > 1
        for preset_name in PRESETS_IN[name]:
            spec = preset(preset_name, schema)
            assert space.contains(spec), space.to_params(spec)
            assert space.from_params(space.to_params(spec), schema) == spec.replace(name=name)
    assert max(size for sizes in space.over_arch for size in sizes) <= 512


def test_shipped_sizes(movielens):
    sizes = {name: shipped(name).size(movielens) for name in SHIPPED}
    assert sizes["zoo"] > max(sizes["wukong"], sizes["dhen"], sizes["dlrm"], sizes["quickstart"])
    # 5 dense x 6 over x 3 dims x (20 + 20 * 20) stacks of 1 or 2 layers (4 dlrm, 16 dcnv2 layers)
    assert sizes["dlrm"] == 5 * 6 * 3 * (20 + 20 * 20)
    assert all(isinstance(size, int) for size in sizes.values())


SAMPLERS = {  # factories: a sampler keeps state from the study it served
    "random": lambda: optuna.samplers.RandomSampler(seed=0),
    "tpe": lambda: optuna.samplers.TPESampler(seed=0, n_startup_trials=5),
    "tpe-grouped": lambda: optuna.samplers.TPESampler(seed=0, n_startup_trials=5, multivariate=True,
                                                      group=True),
}


@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
@pytest.mark.parametrize("name, sampler", [("zoo", "random"), ("zoo", "tpe"), ("zoo", "tpe-grouped"),
                                           ("dhen", "tpe")])
def test_suggest_under_optuna_samplers(name, sampler, movielens):
    space = shipped(name)
    study = optuna.create_study(sampler=SAMPLERS[sampler]())
    kinds = set()
    for _ in range(30):
        trial = study.ask()
        spec = space.suggest(trial, movielens)
        spec.validate()
        assert ArchSpec.from_json(spec.to_json()) == spec
        assert spec.feature_names == movielens.sparse_names and spec.n_dense == movielens.n_dense
        assert [t.name for t in spec.tables] == [f"t_{f}" for f in movielens.sparse_names]
        assert space.from_params(trial.params, movielens) == spec
        assert space.to_params(spec) == trial.params
        kinds.update(layer.kind for layer in spec.layers)
        study.tell(trial, spec.dim + 0.1 * len(spec.layers))
    assert len(kinds) >= (1 if name == "dhen" else 3)


@pytest.mark.parametrize("name", SHIPPED)
def test_params_round_trip(name):
    space = shipped(name)
    for seed in range(20):
        spec = space.sample(SMALL, seed)
        params = space.to_params(spec)
        assert all(isinstance(v, int | str | float | bool) for v in params.values())
        assert space.from_params(params, SMALL) == spec
        assert space.contains(spec.replace(name="renamed", metadata=(("by", "test"),)))


def test_parameter_names_are_readable():
    space = SearchSpace.from_dict({
        "dim": [8, 16], "embedding": {"dim": [4, 8], "groups": {"ids": ["user", "item"]}},
        "dense_arch": [[32], [64, 32]], "over_arch": [[64], [128, 64]],
        "layers": {"num": [1], "kinds": ["dhen", "wukong"],
                   "dhen": {"modules": [["dot", "attention"], ["conv"]], "n_out": [2, 4]},
                   "wukong": {"mlp": [[64], []]}}})
    spec = preset("dhen", SMALL).replace(
        dim=8, tables=widths(SMALL, 4), dense_arch=(64, 32), over_arch=(128, 64),
        layers=(DhenConfig(modules=("dot", "attention"), ensemble="concat", n_out=4),))
    params = space.to_params(spec)
    assert params == {"dim": 8, "emb.ids": 4, "emb.city": 4, "emb.tags": 4, "emb.hour": 4,
                      "dense_arch": "64-32", "layer0.kind": "dhen", "layer0.dhen.modules": "dot+attention",
                      "layer0.dhen.n_out": 4, "over_arch": "128-64"}
    params = {k: v for k, v in params.items() if not k.startswith("layer0.dhen.")}
    wukong = space.from_params({**params, "layer0.kind": "wukong", "layer0.wukong.mlp": "none"}, SMALL)
    assert wukong.layers == (WukongConfig(mlp=()),)


def widths(schema: Schema, *dims: int) -> tuple:
    """Tables for ``schema``, the first ones ``dims`` wide, the rest as wide as the last."""
    return tuple(dataclasses.replace(t, dim=dims[min(i, len(dims) - 1)])
                 for i, t in enumerate(tables_for(schema, 1)))


def test_embedding_groups_share_a_width():
    space = SearchSpace.from_dict({"dim": [16], "embedding": {"dim_ratio": [1, 0.5, 0.25], "groups": "all"}})
    assert space.size(SMALL) == 3
    spec = space.from_params({"emb.all": 0.25}, SMALL)
    assert {t.dim for t in spec.tables} == {4}
    grouped = SearchSpace.from_dict({"dim": [8],
                                     "embedding": {"dim": [4, 8], "groups": {"g": ["tags", "user"]}}})
    assert grouped.size(SMALL) == 2 ** 4  # g, item, city, hour
    mixed = space.sample(SMALL, 0).replace(tables=widths(SMALL, 8, 4))
    with pytest.raises(SpaceError, match=r"tables\[1\]\.dim: the spec has 4, the space can only give 8"):
        space.to_params(mixed)


def test_contains_is_false_outside_the_space():
    space = shipped("dlrm")
    inside = space.sample(SMALL, 3)
    assert space.contains(inside)
    assert not space.contains(inside.replace(dim=64, tables=widths(SMALL, 64)))
    assert not space.contains(preset("wukong", SMALL))
    assert not space.contains(inside.replace(over_arch=(1024,)))
    with pytest.raises(SpaceError, match=r"dlrm\.yaml: 'wukong' is not in the space: "
                                         r"layer0\.kind: 'wukong' is not among the choices 'dlrm', 'dcnv2'"):
        space.to_params(preset("wukong", SMALL))
    with pytest.raises(SpaceError, match=r"tables\[0\]: a space makes one table t_<feature>"):
        space.to_params(inside.replace(tables=(TableSpec(name="shared", features=("user", "item"),
                                                         num_embeddings=9, dim=inside.dim),)))
    # an unused DHEN field must keep its default to be in the space
    dhen = shipped("dhen")
    spec = dhen.sample(SMALL, 0).replace(layers=(DhenConfig(modules=("dot",), num_heads=4),))
    assert not dhen.contains(spec)


def test_sample_is_deterministic_by_seed():
    space = shipped("zoo")
    assert space.sample(SMALL, 7) == space.sample(SMALL, 7)
    assert len({space.sample(SMALL, seed) for seed in range(10)}) >= 8


def test_from_params_rejects_bad_params():
    space = shipped("dlrm")
    params = space.to_params(space.sample(SMALL, 0))
    with pytest.raises(SpaceError, match=r"dlrm\.yaml: parameter 'dim': .*not found"):
        space.from_params({k: v for k, v in params.items() if k != "dim"}, SMALL)
    with pytest.raises(SpaceError, match=r"parameter 'dim': .*7"):
        space.from_params({**params, "dim": 7}, SMALL)
    with pytest.raises(SpaceError, match=r"params: 'layer9\.kind' not used"):
        space.from_params({**params, "layer9.kind": "dlrm"}, SMALL)


def test_dead_end_spaces_are_rejected():
    # two vectors give one dot, one D-wide row; after it no DLRM layer without passthrough is valid
    space = SearchSpace.from_dict({"layers": {"num": 3, "kinds": ["dlrm"],
                                              "dlrm": {"n_passthrough": 0, "self_interaction": False}}},
                                  "dead.yaml")
    schema = Schema(dense=(), sparse=(SparseFeature("u", 5), SparseFeature("v", 5)))
    with pytest.raises(SpaceError, match=r"dead\.yaml: layers: no kind in layers\.kinds can be layer 1 "
                                         r"when dim is 16 and it gets 1 input vector"):
        space.size(schema)
    assert SearchSpace.from_dict({"layers": {"num": 3, "kinds": ["dlrm", "skip"]}}).size(schema) == 8


def test_unknown_group_feature_is_named_at_binding():
    space = SearchSpace.from_dict({"embedding": {"groups": {"ids": ["user", "itm"]}}}, "g.yaml")
    with pytest.raises(SpaceError, match=r"g\.yaml: embedding\.groups\.ids\[1\]: no sparse feature 'itm'"):
        space.sample(SMALL, 0)


def test_empty_file_is_the_dlrm_preset():
    space = SearchSpace.from_yaml("", "empty.yaml")
    assert space.size(SMALL) == 1
    assert space.sample(SMALL, 0) == preset("dlrm", SMALL).replace(name="empty")


@pytest.mark.parametrize("text, message", [
    ("layers:\n  kinds: [wukong, dhen, transformr]\n",
     "layers.kinds[2]: expected one of dcnv2, dhen, dlrm, mlp, skip, wukong, got 'transformr'"),
    ("dims: [8]\n", "dims: unknown section; expected one of name, description, dim, embedding"),
    ("layers:\n  wukong: {nfm: [4]}\n",
     "layers.wukong.nfm: unknown key; expected one of precision, n_fm, n_lcb, rank, mlp"),
    ("layers:\n  skip: {precision: [bf16]}\n",
     "layers.skip.precision: unknown key; layers.skip takes no options"),
    ("dim: [8, big]\n", "dim[1]: expected an integer, got 'big'"),
    ("layers: {num: 1.5}\n", "layers.num: expected an integer, got 1.5"),
    ("layers: {dlrm: {self_interaction: [0, 1]}}\n",
     "layers.dlrm.self_interaction[0]: expected true or false"),
    ("layers: [wukong]\n", "layers: expected a mapping with keys from num, kinds"),
    ("over_arch: [256, 128]\n", "over_arch[0]: expected one choice, a list such as [256, 128], got 256"),
    ("over_arch: 256\n", "over_arch: expected a list of choices such as [[256, 128]], got 256"),
    ("over_arch: {low: 1, high: 4}\n", "over_arch: a {low, high, step} range takes integers"),
    ("dim: []\n", "dim: expected at least one choice, got an empty list"),
    ("layers: {kinds: []}\n", "layers.kinds: expected at least one choice"),
    ("layers:\n  num: {low: 3, high: 1}\n", "layers.num: low 3 > high 1"),
    ("layers:\n  num: {low: 1}\n", "layers.num.high: required key is missing"),
    ("layers:\n  dcnv2: {num_layers: {low: 1, high: 4, step: 2}}\n",
     "layers.dcnv2.num_layers.step: expected an integer >= 1 that divides high - low (3), got 2"),
    ("dim: [8, 8]\n", "dim[1]: choice 8 is given twice"),
    ("dim: 0\n", "dim: expected an integer >= 1, got 0"),
    ("layers: {wukong: {n_fm: [4, 0]}}\n", "layers.wukong.n_fm[1]: expected an integer >= 1, got 0"),
    ("layers: {dhen: {modules: [[dot, mystery]]}}\n",
     "layers.dhen.modules[0][1]: expected one of dot, attention, dcn, linear, conv, got 'mystery'"),
    ("layers: {dhen: {modules: {subsets_of: [dot, dot]}}}\n", "layers.dhen.modules.subsets_of[1]: choice"),
    ("layers: {dhen: {modules: {subsets_of: [dot], max_size: 2}}}\n",
     "layers.dhen.modules: expected 1 <= min_size <= max_size <= 1"),
    ("layers: {dhen: {ensemble: max}}\n", "layers.dhen.ensemble: expected one of concat, sum, weighted_sum"),
    ("layers: {precision: [fp32, fp7]}\n", "layers.precision[1]: expected one of fp32, bf16"),
    ("embedding: {precision: bf16}\n", "embedding.precision: expected one of fp32, fp16, got 'bf16'"),
    ("dim: [8]\nembedding: {dim_ratio: [1, 0.3]}\n",
     "embedding.dim_ratio[1]: 0.3 * dim 8 = 2.4 is not a whole number >= 1 of columns"),
    ("dim: [8, 16]\nembedding: {dim_ratio: [1, 0.25]}\n",
     "embedding.dim_ratio[1]: 0.25 * dim 8 = 2 columns is not a multiple of 4: torchrec's fused"),
    ("embedding: {dim: [0, 4, 6]}\n", "embedding.dim[2]: expected 0 or a multiple of 4, got 6"),
    ("embedding: {dim: [8], dim_ratio: [1]}\n", "embedding: give dim (absolute widths) or dim_ratio"),
    ("embedding: {groups: some}\n", "embedding.groups: expected per_feature, all or a mapping"),
    ("embedding: {groups: {a: [u], b: [u]}}\n", "embedding.groups.b[0]: feature 'u' is already in group 'a'"),
    ("name: 5\n", "name: expected a string, got 5"),
    ("- 1\n- 2\n", "expected a mapping with keys from name, description"),
    ("dim: [8, 16\nlayers: {}\n", ":2:7: invalid YAML: expected ',' or ']'"),
    ("dim: [8]\nlayers:\n  kinds: [dlrm]\n   num: 2\n", ":4:4: invalid YAML: expected <block end>"),
    ("dim: [8]\nlayers: {}\ndim: [16]\n", ":3:1: invalid YAML: found duplicate key 'dim'"),
])
def test_malformed_files_name_the_file_and_key(tmp_path, text, message):
    path = tmp_path / "search_spaces" / "bad.yaml"
    path.parent.mkdir()
    path.write_text(text)
    with pytest.raises(SpaceError) as info:
        SearchSpace.load(path)
    assert str(info.value).startswith(str(path))
    assert message in str(info.value)


def test_unreadable_file():
    with pytest.raises(SpaceError, match=r"nowhere\.yaml: cannot read"):
        SearchSpace.load("nowhere.yaml")


def test_shipped_dir_is_the_repo_folder():
    assert SPACES_DIR == ROOT / "search_spaces"
    # towers.yaml names the features of the synthetic groups4 data (smoke-run by tests/test_studies.py)
    assert sorted(p.stem for p in SPACES_DIR.glob("*.yaml")) == sorted([*SHIPPED, "towers"])


def test_shipped_specs_are_json_serialisable(movielens):
    for name in SHIPPED:
        spec = shipped(name).sample(movielens, 1)
        assert json.loads(spec.to_json())["name"] == name
