"""studies/scale_oneshot.yaml is the study ``benchmarks/oneshot_vs_tpe.py --variant k62`` writes:
the configuration BENCHMARKS.md measured, shipped for users, cannot drift from it."""

from __future__ import annotations

from pathlib import Path

import yaml

from autorec.study import StudyConfig
from benchmarks.oneshot_vs_tpe import parse, study_file

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "studies" / "scale_oneshot.yaml"


def test_the_shipped_scale_study_is_the_benchmarks_default_study(tmp_path: Path) -> None:
    args = parse(["--stage", "oneshot", "--variant", "k62", "--out", str(tmp_path)])
    bench = yaml.safe_load(study_file(args, "oneshot", 0).read_text())
    shipped = yaml.safe_load(SHIPPED.read_text())
    assert shipped["name"] == "scale_oneshot" and bench["name"] == "oneshot_k62_seed0"
    assert (SHIPPED.parent / shipped["space"]).resolve() == Path(bench["space"]).resolve()
    for key in ("data", "objectives", "budget", "pruner", "seed", "train"):
        assert shipped[key] == bench[key], key
    assert shipped["strategy"] == bench["strategy"]  # every option, as measured
    config = StudyConfig.load(SHIPPED)
    assert config.strategy.name == "oneshot" and config.space.is_file()
