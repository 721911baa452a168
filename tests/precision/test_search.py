"""Precision as a search choice: the space keys, the shipped space and study, the cost they
optimise, and (slow) the quality target of MXFP8 training on MovieLens."""

from __future__ import annotations

from pathlib import Path

import pytest

from autorec.costs import arch_cost
from autorec.data.schema import Schema, SparseFeature
from autorec.space import SearchSpace, SpaceError
from autorec.study import StudyConfig

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = Schema(dense=("x",), sparse=(SparseFeature("user", 50), SparseFeature("item", 40)))
NO_DENSE = Schema(dense=(), sparse=(SparseFeature("user", 50), SparseFeature("item", 40)))


def test_part_precisions_are_choices() -> None:
    space = SearchSpace.from_dict({"dense_arch_precision": ["fp32", "bf16"],
                                   "over_arch_precision": ["fp32", "mxfp8_e4m3", "mxfp4_e2m1"],
                                   "layers": {"kinds": ["dlrm"], "precision": ["fp32", "mxfp6_e2m3"]}})
    assert space.size(SCHEMA) == 2 * 3 * 2
    assert space.size(NO_DENSE) == 3 * 2  # no dense arch: its precision is no choice
    seen = set()
    for seed in range(30):
        spec = space.sample(SCHEMA, seed=seed)
        params = space.to_params(spec)
        assert space.from_params(params, SCHEMA) == spec
        seen.add((spec.dense_arch_precision, spec.over_arch_precision, spec.layers[0].precision))
        assert {"dense_arch.precision", "over_arch.precision", "layer0.dlrm.precision"} <= set(params)
    assert len(seen) > 6
    assert space.sample(NO_DENSE, seed=0).dense_arch_precision == "fp32"


def test_default_space_keeps_fp32_and_its_parameters() -> None:
    space = SearchSpace.from_dict({"layers": {"kinds": ["dlrm"]}})
    spec = space.sample(SCHEMA, seed=0)
    assert (spec.dense_arch_precision, spec.over_arch_precision) == ("fp32", "fp32")
    assert not any("precision" in name for name in space.to_params(spec))


def test_bad_precision_names_the_file_and_key(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("over_arch_precision: [fp32, mxfp3]\n")
    with pytest.raises(SpaceError, match=r"bad\.yaml.*over_arch_precision.*mxfp3"):
        SearchSpace.load(path)


def test_shipped_precision_space_and_study() -> None:
    space = SearchSpace.load(ROOT / "search_spaces" / "precision.yaml")
    assert space.size(SCHEMA) == 5**4  # dense arch, two layers, over-arch: 5 formats each
    config = StudyConfig.load(ROOT / "studies" / "precision.yaml")
    assert config.objectives == ("val_auc", "params_bytes")
    names = ("dense_arch.precision", "layer0.wukong.precision", "layer1.wukong.precision",
             "over_arch.precision")
    formats = ("fp32", "bf16", "mxfp8_e4m3", "mxfp6_e2m3", "mxfp4_e2m1")
    uniform = [space.from_params(dict.fromkeys(names, f), SCHEMA) for f in formats]
    assert [s.over_arch_precision for s in uniform] == list(formats)
    # Bytes follow the formats: fewer bits, fewer bytes; FLOPs do not change.
    dense_bytes = [arch_cost(s).dense_bytes for s in uniform]
    assert dense_bytes == sorted(dense_bytes, reverse=True) and len(set(dense_bytes)) == len(formats)
    assert len({arch_cost(s).forward_flops for s in uniform}) == 1
    mixed = space.sample(SCHEMA, seed=1)
    assert len({mixed.over_arch_precision, *(layer.precision for layer in mixed.layers)}) > 1


@pytest.mark.slow
def test_wukong_in_mxfp8_stays_within_0002_test_auc_of_fp32() -> None:
    """At equal training: both runs train the same epochs from the same seed and are compared
    at the epoch that fp32's selection (validation logloss) picks. Comparing each run's own
    selected checkpoint measures selection noise instead: on MovieLens-100K the MX run's first two
    epochs tie on validation logloss (0.5755 / 0.5759) and it picks the earlier, 0.01 AUC lower.
    The paired difference is averaged over three training seeds: on the AMD EPYC it was 0.0031,
    0.0000 and 0.0009 on seeds 0-2 (0.0016 and 0.0024 on seeds 3-4), so one seed's reading
    measures the seed as much as the format."""
    from autorec.data import load_dataset
    from autorec.precision.recipes import with_precision
    from autorec.presets import preset
    from autorec.train.trainer import TrainConfig, Trainer

    dataset = load_dataset("movielens100k", seed=0)
    spec = preset("wukong", dataset.schema)
    gaps = []
    for seed in range(3):
        config = TrainConfig(seed=seed, progress=False, epochs=3, patience=3, track_test=True)
        fp32 = Trainer(spec, dataset, config).fit()
        mx = Trainer(with_precision(spec, "mxfp8_e4m3"), dataset, config).fit()
        best = min(range(len(fp32.history)), key=lambda e: fp32.history[e].val["logloss"])
        gaps.append(fp32.history[best].test["auc"] - mx.history[best].test["auc"])
    assert abs(sum(gaps) / len(gaps)) <= 0.002, gaps
