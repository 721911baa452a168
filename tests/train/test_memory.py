"""keep_freed_memory: glibc keeps a step's large temporaries warm (autorec/train/memory.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from autorec.config.train import TrainSettings
from autorec.train.records import TrainConfig

# a DLRM's training steps at batch 4096, dim 64: the minor page faults of 6 steps after 3
_STEPS = """
import json, resource, sys, warnings
warnings.filterwarnings("ignore")
from autorec.data import load_dataset
from autorec.presets import preset
from autorec.train.trainer import TrainConfig, Trainer
data = load_dataset("synthetic", preset="tiny", num_samples=4096 * 12)
config = TrainConfig(batch_size=4096, progress=False, keep_freed_memory=sys.argv[1] == "keep")
trainer = Trainer(preset("dlrm", data.schema, dim=64), data, config)
batches = iter(trainer._batches("train", 4096, True, 0))
steps = [next(batches) for _ in range(9)]
for batch in steps[:3]:
    trainer.train_step(batch)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for batch in steps[3:]:
    trainer.train_step(batch)
print(json.dumps({"faults_per_step": (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 6}))
"""


def _faults_per_step(mode: str) -> float:
    done = subprocess.run([sys.executable, "-c", _STEPS, mode], capture_output=True, text=True, check=True)
    return float(json.loads(done.stdout.strip().splitlines()[-1])["faults_per_step"])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_a_trainers_steps_stop_faulting_their_temporaries_in() -> None:
    """Measured: 1400-2500 minor faults a step without it (the step's large temporaries mapped
    afresh), 30-210 with it; each way in a fresh process (the setting is process-wide)."""
    from autorec.train.memory import keep_freed_memory

    assert keep_freed_memory() is True  # glibc here: the setting is taken
    plain, kept = _faults_per_step("plain"), _faults_per_step("keep")
    assert plain > 1000  # the premise: without it the steps fault their temporaries in
    assert kept < plain / 4


def test_on_by_default_and_off_by_setting() -> None:
    assert TrainConfig().keep_freed_memory is True
    assert TrainSettings().to_kwargs()["keep_freed_memory"] is True
    assert TrainSettings(keep_freed_memory=False).to_kwargs()["keep_freed_memory"] is False
    with pytest.raises(ValueError, match="keep_freed_memory"):
        TrainSettings(keep_freed_memory="sometimes")


def test_the_train_command_turns_it_off() -> None:
    """``autorec train --no-keep-freed-memory`` reaches the trainer's config (and the flag on by
    default is not a store_true that can never be turned off)."""
    from autorec.cli.main import build_parser

    args = build_parser().parse_args(["train", "--no-keep-freed-memory"])
    assert args.keep_freed_memory is False
    assert build_parser().parse_args(["train"]).keep_freed_memory is True
