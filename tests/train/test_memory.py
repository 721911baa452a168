"""keep_freed_memory: glibc keeps a step's large temporaries warm (autorec/train/memory.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.train.switches import check_switch_on_by_default

# A Trainer (or a one-shot supernet's training) built with the setting on or off, then four 24 MiB
# buffers taken, written and freed eight times over: the minor page faults of each round. Off,
# glibc serves them by mmap until its sliding threshold has risen past their size, so round 2
# faults all four in again (24,576 pages; later rounds, from the heap, 0-24,544 each as glibc
# trims it or not). On, the heap keeps them: round 2 faults one buffer at most (6,144) and most
# later rounds fault nothing, but not every one (6,094 pages in round 3 of one newcomer-check run
# under load, where something else took a block between the buffers), so the test counts the
# rounds that fault nothing. A training step's own faults move from run to run with that sliding
# threshold (0 to 6,000 a step at D 64 here), so BENCHMARKS.md ("Freed memory kept for reuse")
# measures them over processes.
_ROUNDS = """
import json, resource, sys, warnings
warnings.filterwarnings("ignore")
import torch
from autorec.data import load_dataset
from autorec.presets import preset
from autorec.train.trainer import TrainConfig, Trainer
data = load_dataset("synthetic", preset="tiny", num_samples=256)
keep = sys.argv[1] == "keep"
if sys.argv[2] == "supernet":  # a one-shot supernet's training, built on its own (no Trainer)
    import tempfile
    from autorec.oneshot.train import OneShotTrainConfig, SupernetTraining
    from autorec.space import SearchSpace
    space = SearchSpace.from_dict({"dim": [8], "dense_arch": [[16]], "over_arch": [[16]],
                                   "layers": {"num": [1], "kinds": ["dlrm", "dcnv2"]}})
    SupernetTraining(space, data, OneShotTrainConfig(steps=2, batch_size=64), tempfile.mkdtemp(),
                     keep_freed_memory=keep)
else:
    Trainer(preset("dlrm", data.schema), data,
            TrainConfig(batch_size=64, progress=False, keep_freed_memory=keep))
faults = []
for _ in range(8):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    buffers = [torch.empty(6 * 2**20).fill_(1.0) for _ in range(4)]  # 4 x 24 MiB
    del buffers
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(json.dumps(faults))
"""


def _faults_by_round(mode: str, built: str = "trainer") -> list[int]:
    done = subprocess.run([sys.executable, "-c", _ROUNDS, mode, built], capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
@pytest.mark.parametrize("built", ["trainer", "supernet"])
def test_a_trainer_keeps_freed_buffers_mapped_for_reuse(built: str) -> None:
    """Each way in a fresh process (the setting is process-wide); see ``_ROUNDS``. A one-shot
    supernet's training applies it too: its steps run before any Trainer of the study is built."""
    from autorec.train.memory import keep_freed_memory

    assert keep_freed_memory() is True  # glibc here: the setting is taken
    plain, kept = _faults_by_round("plain", built), _faults_by_round("keep", built)
    assert plain[1] > 20_000  # the premise: off, round 2 faults all four buffers in again
    assert kept[1] < plain[1] / 2  # on: round 2 reuses most of them warm (one may be placed anew)
    assert sum(f < 100 for f in kept[2:]) >= 4  # and most of rounds 3-8 fault nothing


def test_on_by_default_and_off_by_setting_or_flag() -> None:
    check_switch_on_by_default("keep_freed_memory")
