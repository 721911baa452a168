"""benchmarks/oneshot_variants.py: every named run of issue 20 parses into a study the strategy accepts."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from autorec.strategies import make_strategy
from autorec.study import StudyConfig
from benchmarks.oneshot_variants import VARIANTS, merged_options, variant_defaults
from benchmarks.oneshot_vs_tpe import adopt_supernet, parse, study_file


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_each_variant_writes_a_study_its_strategy_accepts(name: str, tmp_path: Path) -> None:
    args = parse(["--stage", "oneshot", "--variant", name, "--out", str(tmp_path)])
    assert args.tag == f"_{name}"
    config = StudyConfig.load(study_file(args, "oneshot", seed=1))
    assert config.name == f"oneshot_{name}_seed1"
    options = config.strategy.options
    flags, variant_options = VARIANTS[name]
    assert {k: options[k] for k in variant_options} == variant_options
    assert options["candidates"] == flags["candidates"]
    assert options.get("rerank_steps", 0) == flags["short_rerank"]  # (0: no re-rank training)
    make_strategy("oneshot", seed=1, **options)  # the strategy's own checks pass


def test_k15_is_k14_on_its_supernets_with_a_rung_of_two(tmp_path: Path) -> None:
    k14 = yaml.safe_load(study_file(parse(["--stage", "oneshot", "--variant", "k14", "--out", str(tmp_path)]),
                                    "oneshot").read_text())["strategy"]["options"]
    args = parse(["--stage", "oneshot", "--variant", "k15", "--out", str(tmp_path)])
    k15 = yaml.safe_load(study_file(args, "oneshot").read_text())["strategy"]["options"]
    assert args.supernet_from == "_k14"
    assert {k: (k14[k], v) for k, v in k15.items() if k14.get(k) != v} == {"final_candidates": (1, 2)}


def test_flags_given_beside_a_variant_win(tmp_path: Path) -> None:
    args = parse(["--stage", "oneshot", "--variant", "k16", "--out", str(tmp_path),
                  "--supernet-steps", "1500", "--tag", "_k16b",
                  "--oneshot-options", '{"calibrate": 0, "final_candidates": 3}'])
    assert (args.supernet_steps, args.tag, args.candidates) == (1500, "_k16b", 120)
    options = json.loads(args.oneshot_options)
    assert options["calibrate"] == 0 and options["final_candidates"] == 3 and options["hash_rows"] == "own"
    default = parse(["--stage", "oneshot", "--out", str(tmp_path)])  # none named: k62, the best measured
    k62 = parse(["--stage", "oneshot", "--variant", "k62", "--out", str(tmp_path)])
    assert default.variant == "k62" and vars(default) == vars(k62) and k62.candidates == 0
    assert k62.checkpoint_every == 1000 and json.loads(k62.oneshot_options)["fine_after_pick"] is True
    plain = parse(["--stage", "oneshot", "--variant", "none", "--out", str(tmp_path)])  # the flags' own
    assert (plain.tag, plain.candidates, plain.oneshot_options) == ("_s3k", 300, "{}")


def test_bad_variants_and_options_are_named(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse(["--stage", "oneshot", "--variant", "k99"])
    assert "--variant: invalid choice: 'k99'" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="no variant 'k99'; expected one of k8i, k9"):
        variant_defaults("k99")
    with pytest.raises(SystemExit, match=r"--oneshot-options: not JSON .*: '\{calibrate'"):
        merged_options("k16", "{calibrate")
    with pytest.raises(SystemExit, match=r"--oneshot-options: expected a JSON object, got list: '\[1\]'"):
        parse(["--stage", "oneshot", "--variant", "k16", "--oneshot-options", "[1]"])


def test_a_variant_on_anothers_supernets_trains_them_as_long() -> None:
    """An adopted supernet resumes only under its own configuration: the same steps."""
    for name, (flags, _) in VARIANTS.items():
        source = flags.get("supernet_from")
        if source is not None:
            assert flags["supernet_steps"] == VARIANTS[source[1:]][0]["supernet_steps"], name


def test_a_supernet_is_adopted_whole_or_the_missing_source_is_named(tmp_path: Path) -> None:
    """``--supernet-from _kA`` copies seed N's supernet folder of study ``oneshot_kA_seedN``; a
    source that ``--out`` lost is an error naming its path, and ``none`` trains the variant's own."""
    target = SimpleNamespace(name="oneshot_kB_seed0", directory=tmp_path / "oneshot_kB_seed0")
    args = parse(["--stage", "oneshot", "--out", str(tmp_path), "--supernet-from", "_kA"])
    with pytest.raises(SystemExit, match=r"--supernet-from _kA: no supernet at .*oneshot_kA_seed0"):
        adopt_supernet(args, 0, target)
    assert not (target.directory / "oneshot").exists()  # nothing half-made
    own = parse(["--stage", "oneshot", "--out", str(tmp_path), "--supernet-from", "none"])
    adopt_supernet(own, 0, target)
    assert not (target.directory / "oneshot").exists()  # its own: nothing adopted, no error
    source = tmp_path / "oneshot_kA_seed0" / "oneshot_kA_seed0" / "oneshot" / "supernet"
    source.mkdir(parents=True)
    (source / "step-2000.safetensors").write_bytes(b"weights")
    adopt_supernet(args, 0, target)
    assert (target.directory / "oneshot" / "supernet" / "step-2000.safetensors").read_bytes() == b"weights"
