"""A block kind defined here, in the test file, and registered: nothing else in autorec changes,
yet it is parsed, searched (a real study), trained, grown, exported and reported."""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest
import torch
import yaml
from torch import nn
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from autorec.arch import ArchSpec, BlockConfig, TableSpec, WukongConfig
from autorec.arch.checks import check_int
from autorec.blocks import (
    BlockKind,
    InteractionBlock,
    SearchRules,
    build_block,
    kind,
    kind_names,
    register_kind,
    unregister_kind,
)
from autorec.costs import arch_cost
from autorec.data import Schema, SparseFeature
from autorec.export import load_model, load_predictions
from autorec.growth.ops import grow, prune
from autorec.growth.shrink import shrink
from autorec.models import build_model
from autorec.report import write_report
from autorec.space import SearchSpace
from autorec.study import StudyConfig, export_trials, load_study, run_study
from autorec.supernet import Supernet, SupernetError

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True, kw_only=True)
class MixConfig(BlockConfig):
    """``n_out`` learned convex mixtures of the input vectors."""

    kind: ClassVar[str] = "mix"
    n_out: int = 2

    def validate(self, path: str) -> None:
        super().validate(path)
        check_int(f"{path}.n_out", self.n_out, 1)

    def out_features(self, num_in: int, dim: int) -> int:
        self.validate(self.kind)
        return self.n_out


class MixBlock(InteractionBlock):
    """Shapes: [B, F, D] -> [B, n_out, D]; each output row a softmax-weighted sum of the inputs."""

    config_type = MixConfig

    def __init__(self, config: MixConfig, num_in: int, dim: int) -> None:
        super().__init__(config, num_in, dim)
        self.logits = nn.Parameter(torch.randn(config.n_out, num_in))
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(torch.einsum("of,bfd->bod", torch.softmax(self.logits, -1), x))


class MixRules(SearchRules):
    shape_fields = ("n_out",)


@pytest.fixture
def mix() -> Iterator[BlockKind]:
    entry = register_kind(BlockKind(MixConfig, MixBlock, rules=MixRules(), tower_module=MixConfig(n_out=1)))
    yield entry
    unregister_kind("mix")


SCHEMA = Schema(dense=("x",), sparse=(SparseFeature("u", 10), SparseFeature("i", 20), SparseFeature("c", 5)))


def _spec() -> ArchSpec:
    tables = tuple(TableSpec(name=f"t_{f.name}", features=(f.name,), num_embeddings=f.num_embeddings, dim=8)
                   for f in SCHEMA.sparse)
    return ArchSpec(dim=8, tables=tables, n_dense=1, dense_arch=(16,), over_arch=(32, 16),
                    layers=(MixConfig(n_out=3), WukongConfig(n_fm=4, n_lcb=4, rank=4, mlp=(32,))))


def test_it_is_registered_and_parsed(mix):
    assert "mix" in kind_names() and kind("mix") is mix
    spec = _spec()
    assert ArchSpec.from_json(spec.to_json()) == spec
    assert build_block(MixConfig(n_out=3), 4, 8)(torch.randn(2, 4, 8)).shape == (2, 3, 8)
    assert arch_cost(spec).parts[2].forward_flops > 0  # layers.0, counted on the built block


def test_unregistered_it_is_unknown():
    with pytest.raises(KeyError, match="no block kind 'mix'"):
        kind("mix")
    with pytest.raises(ValueError, match="kind: expected one of"):
        ArchSpec.from_dict({**json.loads(_spec().to_json()), "layers": [{"kind": "mix", "n_out": 2}]})


def test_a_space_searches_it(mix):
    space = SearchSpace.from_dict({"dim": [8], "layers": {"num": [1, 2], "kinds": ["mix", "dlrm"],
                                                          "mix": {"n_out": [1, 2, 4]}}})
    # one layer: 3 mix + 1 dlrm; two: 4 first layers x 4 second ones (each still valid)
    assert space.size(SCHEMA) == 4 + 4 * 4
    specs = {space.sample(SCHEMA, seed) for seed in range(1000)}
    assert any(isinstance(layer, MixConfig) for spec in specs for layer in spec.layers)
    assert len(specs) == space.size(SCHEMA)
    for spec in specs:
        assert space.from_params(space.to_params(spec), SCHEMA) == spec


def test_it_searches_trains_exports_and_reports(mix, tmp_path):
    space = tmp_path / "mix.yaml"
    space.write_text(yaml.safe_dump({"dim": [8], "over_arch": [[16]],
                                     "layers": {"num": [1], "kinds": ["mix"], "mix": {"n_out": [2, 3]}}}))
    study_file = tmp_path / "study.yaml"
    study_file.write_text(yaml.safe_dump({
        "name": "mix", "data": {"name": "synthetic", "options": {"preset": "tiny", "num_samples": 2000},
                                "seed": 0},
        "space": str(space), "strategy": "tpe", "objectives": ["val_auc"], "pruner": "none", "seed": 0,
        "storage": f"sqlite:///{tmp_path / 'mix.db'}",
        "budget": {"trials": 3, "epochs": 1, "batch_size": 256, "max_steps_per_epoch": 3}}))
    config = StudyConfig.load(study_file)
    run_study(config, workers=1, log=lambda _: None)
    study = load_study(config)
    done = [t for t in study.trials if t.state.name == "COMPLETE"]
    trained = [t for t in done if "reused_from" not in t.user_attrs]
    # The space holds two architectures: each trained once, the re-proposals reuse them.
    assert sorted(t.params["layer0.mix.n_out"] for t in trained) == [2, 3]
    assert {t.params["layer0.mix.n_out"] for t in done} <= {2, 3}

    (out,) = export_trials(config, tmp_path / "export", log=lambda _: None)
    model = load_model(out)
    assert isinstance(model.layers[0], MixBlock)
    sample = load_predictions(out)
    with torch.no_grad():
        torch.testing.assert_close(model(sample.dense, sample.kjt()), sample.logits, atol=1e-5, rtol=1e-5)

    html = write_report(study, tmp_path / "report.html").read_text()
    assert "mix" in html


def test_growth_carries_it(mix):
    spec = _spec()
    half = shrink(spec, 0.5)
    assert half.layers[0] == spec.layers[0]  # carried as it is
    assert half.layers[1].n_fm < spec.layers[1].n_fm
    torch.manual_seed(0)
    model = build_model(spec)
    small = prune(model, spec, half)
    big = grow(small, half, spec)
    torch.testing.assert_close(small.layers[0].logits, model.layers[0].logits)
    kjt = KeyedJaggedTensor.from_lengths_sync(["u", "i", "c"], torch.tensor([1, 2, 3, 4, 0, 1]),
                                              torch.ones(6, dtype=torch.int32))
    x = torch.randn(2, 1)
    with torch.no_grad():
        torch.testing.assert_close(big(x, kjt), small(x, kjt), atol=1e-5, rtol=1e-5)


def test_the_supernet_refuses_it_by_name(mix):
    space = SearchSpace.from_dict({"dim": [8], "layers": {"kinds": ["mix", "dlrm"]}})
    with pytest.raises(SupernetError, match="'mix' has no weight-shared super-op"):
        Supernet(space, SCHEMA, dim=8, dense_arch=(64,), over_arch=(256, 128))


KIND_NAMES = {"dcnv2", "dhen", "dlrm", "mlp", "skip", "wukong"}


def _code_strings(path: Path) -> list[tuple[int, str]]:
    """String constants of a module that are not docstrings."""
    tree = ast.parse(path.read_text())
    docs = {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs]


@pytest.mark.parametrize("room", ["space", "growth"])
def test_no_kind_is_named_in(room):
    """space/ and growth/ ask the registry; a string literal naming a kind would be a branch on it."""
    hits = [f"{path.relative_to(ROOT)}:{line}: {value!r}"
            for path in sorted((ROOT / "autorec" / room).glob("*.py"))
            for line, value in _code_strings(path) if value in KIND_NAMES]
    assert not hits, hits
