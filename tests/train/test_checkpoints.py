"""autorec.train.checkpoints.save_states and checkpoint_reader.load_state: a one-process save
reads back whole, neither a one-process save nor a load goes through the process group, and a
write that fails raises the writer's own error, never CheckpointException (which derives from
BaseException and would end a whole search)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp

from autorec.train.checkpoint_reader import CheckpointError, load_state
from autorec.train.checkpoints import save_states


def test_a_one_process_save_reads_back(tmp_path: Path) -> None:
    states = {"model": {"w": torch.arange(6.0).reshape(2, 3)}, "optim": {"step": torch.tensor(4)}}
    save_states(states, tmp_path / "ckpt", tmp_path / "ckpt", rank=0, world_size=1)
    back = {"model": {"w": torch.zeros(2, 3)}, "optim": {"step": torch.tensor(0)}}
    dcp.load(back, storage_reader=dcp.FileSystemReader(str(tmp_path / "ckpt")), no_dist=True)
    assert torch.equal(back["model"]["w"], states["model"]["w"]) and int(back["optim"]["step"]) == 4


def test_a_failed_write_raises_the_writers_own_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(OSError) as err:
        save_states({"model": {"w": torch.ones(2)}}, tmp_path / "file" / "ckpt", tmp_path / "ckpt",
                    rank=0, world_size=1)
    assert "file" in str(err.value)


def test_a_one_process_save_runs_no_collective_and_a_multi_rank_one_does(tmp_path: Path, monkeypatch) -> None:
    """The one-process save leaves the process group alone (a save through it slowed every later
    step, BENCHMARKS.md): with a group up and every collective dcp uses made to fail, it still
    writes; told of two ranks, it goes through the group and meets the failure."""
    if not dist.is_initialized():
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)

    def refuse(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a collective was called")

    for name in ("gather_object", "all_gather_object", "broadcast_object_list", "scatter_object_list",
                 "barrier", "all_reduce"):
        monkeypatch.setattr(dist, name, refuse)
    save_states({"model": {"w": torch.ones(2)}}, tmp_path / "one", tmp_path / "one", rank=0, world_size=1)
    assert (tmp_path / "one" / ".metadata").exists()
    with pytest.raises(RuntimeError, match="a collective was called"):
        save_states({"model": {"w": torch.ones(2)}}, tmp_path / "two", tmp_path / "two", rank=0, world_size=2)


def test_a_one_process_load_runs_no_collective_and_a_multi_rank_one_does(tmp_path: Path, monkeypatch) -> None:
    """``load_state`` in one process leaves the process group alone too (a load through it slowed
    every later supernet step 1.4-1.7 times, BENCHMARKS.md): with a group up and every collective
    dcp uses made to fail, it still reads the states back; in a group said to hold two ranks it
    goes through the group and meets the failure."""
    if not dist.is_initialized():
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    states = {"model": {"w": torch.arange(4.0)}, "optim": {"step": torch.tensor(3)}}
    save_states(states, tmp_path / "ckpt", tmp_path / "ckpt", rank=0, world_size=1)

    def refuse(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a collective was called")

    for name in ("gather_object", "all_gather_object", "broadcast_object_list", "scatter_object_list",
                 "barrier", "all_reduce"):
        monkeypatch.setattr(dist, name, refuse)
    back = {"model": {"w": torch.zeros(4)}, "optim": {"step": torch.tensor(0)}}
    load_state(back, tmp_path / "ckpt")
    assert torch.equal(back["model"]["w"], torch.arange(4.0)) and int(back["optim"]["step"]) == 3
    monkeypatch.setattr(dist, "get_world_size", lambda *args, **kwargs: 2)
    with pytest.raises((RuntimeError, CheckpointError), match="a collective was called"):
        load_state({"model": {"w": torch.zeros(4)}, "optim": {"step": torch.tensor(0)}}, tmp_path / "ckpt")
