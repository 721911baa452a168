"""Issue 24, "a killed rank": kill -9 of one torchrun worker mid-checkpoint, elastic restart,
resume from the last complete checkpoint, the uncut run's metrics; and a checkpoint cut short
(the folders a kill mid-save leaves) is never loaded.

The 2-process kill is slow-marked (benchmarks/faults_ranks.py runs it); the cut-short
checkpoint runs in the default suite, in this process.
"""

import dataclasses
import shutil
from pathlib import Path

import numpy as np
import pytest

from autorec.data import load_dataset
from autorec.presets import preset
from autorec.train.checkpoints import LATEST, META, IncompleteCheckpoint, is_complete, staging
from autorec.train.trainer import TrainConfig, Trainer
from benchmarks.faults_ranks import LOSS_TOL, METRIC_TOL, differences, kill_one_rank, uncut

CONFIG = TrainConfig(epochs=2, patience=2, batch_size=200, dense_lr=3e-3, embedding_lr=0.1, progress=False,
                     checkpoint_every=1)  # 801 training rows: 5 steps an epoch


@pytest.fixture(scope="module")
def tiny():
    return load_dataset("synthetic", seed=0, preset="tiny", num_samples=1001)


def cut_short(source: Path, target: Path) -> None:
    """What a kill mid-save leaves of ``target``: some shards, one of them half written, and
    neither the shards' index nor autorec.json (both are written last)."""
    shutil.copytree(source, target)
    for name in (".metadata", META):
        (target / name).unlink()
    shard = max(target.glob("*.distcp"), key=lambda p: p.stat().st_size)
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])


def test_a_checkpoint_cut_short_by_a_kill_is_never_loaded(tiny, tmp_path):
    """Epoch 0 is checkpointed; then the state a kill during the next saves leaves: the next
    step's checkpoint half written in its staging folder, and the best checkpoint caught between
    its two renames (the old one aside, the new one half written). Resuming loads the last
    complete checkpoint and the best one, and ends on the uncut curve."""
    spec = preset("dlrm", tiny.schema)
    reference = Trainer(spec, tiny, CONFIG).fit()
    ck = tmp_path / "ck"
    resumable = dataclasses.replace(CONFIG, checkpoint_dir=str(ck))
    Trainer(spec, tiny, dataclasses.replace(resumable, epochs=1)).fit()
    last = ck / (ck / LATEST).read_text().strip()
    assert last.name == "step-000000005" and is_complete(last)
    cut_short(last, staging(ck / "step-000000006"))
    (ck / "best").rename(ck / ".best.old")
    cut_short(ck / ".best.old", staging(ck / "best"))

    resumed = Trainer(spec, tiny, dataclasses.replace(resumable, resume=True)).fit()
    assert resumed.resumed_from == {"epoch": 1, "step": 0, "world_size": 1}
    np.testing.assert_allclose(resumed.step_losses, reference.step_losses, rtol=0, atol=1e-6)
    assert resumed.test == pytest.approx(reference.test, abs=1e-6)
    assert resumed.best_epoch == reference.best_epoch
    assert is_complete(ck / "best") and not (ck / ".best.old").exists()
    assert not staging(ck / "step-000000006").exists()  # the next save replaced the debris


def test_latest_naming_a_damaged_checkpoint_is_refused_by_name(tiny, tmp_path):
    ck = tmp_path / "ck"
    config = dataclasses.replace(CONFIG, epochs=1, checkpoint_dir=str(ck))
    Trainer(preset("dlrm", tiny.schema), tiny, config).fit()
    last = ck / (ck / LATEST).read_text().strip()
    (last / META).unlink()
    with pytest.raises(IncompleteCheckpoint, match=rf"{last}: .*LATEST names this checkpoint, but it is "
                                                   r"incomplete .* delete .*LATEST to start afresh"):
        Trainer(preset("dlrm", tiny.schema), tiny, dataclasses.replace(config, resume=True)).fit()


@pytest.mark.slow
def test_kill_9_of_one_rank_mid_checkpoint_resumes_on_the_uncut_run(tmp_path):
    killed = kill_one_rank(tmp_path)
    assert killed.partial is not None, f"rank 1 was not killed mid-checkpoint:\n{killed.log}"
    assert killed.resumed, killed.log
    written = int(killed.partial.removeprefix(".step-").removesuffix(".partial"))
    assert killed.resumed_step is not None and killed.resumed_step <= written  # never the cut one
    gaps = differences(killed, uncut(tmp_path))
    assert gaps["steps"] == 0 and gaps["step_loss"] <= LOSS_TOL, gaps
    assert all(v <= METRIC_TOL for k, v in gaps.items() if k not in ("steps", "step_loss")), gaps
