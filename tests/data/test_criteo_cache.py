"""The Criteo column cache: the same rows as the stream, built once, rebuilt on change, never half."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import torch

from autorec.data import DataError, load_dataset
from autorec.data.criteo import cache as cache_module
from autorec.data.criteo import load_criteo
from autorec.data.criteo.cache import CachedCriteo
from autorec.data.criteo.stream import Reader
from tests.data.test_criteo import all_rows, as_sorted_rows, collect, criteo_lines, write

OPTIONS = [
    {"hash_size": 1000},
    {"hash_size": 1000, "split": "sequential", "fractions": (0.7, 0.2, 0.1)},
    {"vocab_min_count": 2},
]


@pytest.fixture
def tsv(tmp_path: Path) -> Path:
    return write(tmp_path / "day_0.txt", criteo_lines(400, seed=3))


def entries(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir())


@pytest.mark.parametrize("options", OPTIONS)
def test_the_cache_serves_the_streams_rows_split_by_split(tmp_path: Path, tsv: Path, options: dict) -> None:
    root = tmp_path / "cache"
    streamed = load_criteo(path=str(tsv), seed=5, block_bytes=997, **options)
    cached = load_criteo(path=str(tsv), seed=5, block_bytes=997, cache=str(root), **options)
    assert isinstance(cached, CachedCriteo) and len(entries(root)) == 1
    assert cached.schema == streamed.schema
    total = 0
    for split in ("train", "val", "test"):
        want, got = all_rows(streamed, split), all_rows(cached, split)
        for a, b in zip(want, got, strict=True):  # file order in both: equal, not only as sets
            assert torch.equal(a, b)
        assert cached.num_rows(split) == len(got[0])
        total += len(got[0])
    assert total == 400 and cached.num_rows("val") > 0
    assert cached.describe()["cache"] == str(cached.entry)
    assert cached.describe()["split"] == streamed.describe()["split"]


def test_a_second_open_reads_the_entry_without_parsing(tmp_path: Path, tsv: Path, monkeypatch) -> None:
    root = tmp_path / "cache"
    first = load_criteo(path=str(tsv), seed=0, vocab_min_count=1, cache=str(root))

    def no_parse(*_: object) -> None:
        raise AssertionError("parsed again")

    monkeypatch.setattr(Reader, "parse", no_parse)  # the vocabulary pass and the build both parse
    again = load_criteo(path=str(tsv), seed=0, vocab_min_count=1, cache=str(root))
    assert again.entry == first.entry and again.schema == first.schema
    assert torch.equal(all_rows(again)[2], all_rows(first)[2])
    with pytest.raises(AssertionError, match="parsed again"):  # other options: a new entry
        load_criteo(path=str(tsv), seed=1, vocab_min_count=1, cache=str(root))


def test_a_changed_file_or_option_makes_a_new_entry(tmp_path: Path, tsv: Path) -> None:
    root = tmp_path / "cache"
    before = load_criteo(path=str(tsv), seed=0, hash_size=1000, cache=str(root))
    write(tsv, criteo_lines(200, seed=4))
    os.utime(tsv, ns=(1, 1))  # a different size and time
    after = load_criteo(path=str(tsv), seed=0, hash_size=1000, cache=str(root))
    assert after.entry != before.entry and sum(after.num_rows(s) for s in ("train", "val", "test")) == 200
    other = load_criteo(path=str(tsv), seed=0, hash_size=512, cache=str(root))
    assert other.entry != after.entry and other.schema.sparse[0].num_embeddings == 512
    # the entry of the file's old version can never be asked for again: removed by the build
    assert entries(root) == sorted([after.entry.name, other.entry.name])


def test_a_build_removes_entries_of_changed_or_gone_files_and_keeps_the_rest(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    a = write(tmp_path / "a.txt", criteo_lines(120, seed=1))
    b = write(tmp_path / "b.txt", criteo_lines(120, seed=2))
    gone = write(tmp_path / "gone.txt", criteo_lines(120, seed=3))
    kept_a = load_criteo(path=str(a), seed=0, hash_size=100, cache=str(root)).entry
    old_b = load_criteo(path=str(b), seed=0, hash_size=100, cache=str(root)).entry
    old_gone = load_criteo(path=str(gone), seed=0, hash_size=100, cache=str(root)).entry
    (root / "notes").mkdir()  # not an entry: left alone
    other_build = root / f"{kept_a.name}.tmp-999999999"  # another build's folder: not touched here
    other_build.mkdir()
    gone.unlink()
    write(b, criteo_lines(130, seed=2))
    os.utime(b, ns=(7, 7))
    new_b = load_criteo(path=str(b), seed=0, hash_size=100, cache=str(root)).entry
    assert new_b != old_b and not old_gone.exists()
    assert entries(root) == sorted([kept_a.name, new_b.name, "notes", other_build.name])
    again = load_criteo(path=str(a), seed=0, hash_size=100, cache=str(root))  # still served
    assert again.entry == kept_a and again.num_rows("train") > 0


def test_shuffled_epochs_hold_every_row_once_and_follow_seed_and_epoch(tmp_path: Path, tsv: Path) -> None:
    ds = load_criteo(path=str(tsv), seed=0, hash_size=1000, fractions=(1.0, 0.0, 0.0),
                     cache=str(tmp_path / "c"))
    plain = all_rows(ds)
    one = collect(ds.batches("train", 64, shuffle=True, seed=1, epoch=0))
    assert as_sorted_rows(one) == as_sorted_rows(plain) and not torch.equal(one[2], plain[2])
    assert torch.equal(collect(ds.batches("train", 64, shuffle=True, seed=1, epoch=0))[2], one[2])
    assert not torch.equal(collect(ds.batches("train", 64, shuffle=True, seed=1, epoch=1))[2], one[2])
    loader = ds.loader("train", 64, shuffle=True, seed=1, num_workers=2)
    assert as_sorted_rows(collect(loader)) == as_sorted_rows(plain)  # workers share, never repeat
    assert len(ds.batches("train", 64, shuffle=True)) == -(-400 // 64)
    assert collect(ds.batches("val", 64, shuffle=True))[0].numel() == 0  # an empty split


def test_a_failed_build_leaves_no_entry_and_names_the_bad_line(tmp_path: Path) -> None:
    lines = criteo_lines(300, seed=1)
    lines[250] = lines[250].replace("\t", "\tx", 1)  # a non-numeric count on line 251
    path = write(tmp_path / "bad.txt", lines)
    root = tmp_path / "cache"
    with pytest.raises(DataError, match=rf"{path}:251: .*int_0"):
        load_criteo(path=str(path), seed=0, hash_size=1000, block_bytes=997, cache=str(root))
    assert entries(root) == []  # neither the entry nor its temporary folder


def test_a_killed_build_is_not_taken_for_an_entry(tmp_path: Path, tsv: Path, monkeypatch) -> None:
    root = tmp_path / "cache"
    calls = {"n": 0}
    encode = Reader.encode

    def dies(self: Reader, rows):  # stands for a kill in the middle of the build
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return encode(self, rows)

    monkeypatch.setattr(Reader, "encode", dies)
    with pytest.raises(KeyboardInterrupt):
        load_criteo(path=str(tsv), seed=0, hash_size=1000, block_bytes=997, cache=str(root))
    assert entries(root) == []
    monkeypatch.setattr(Reader, "encode", encode)
    ds = load_criteo(path=str(tsv), seed=0, hash_size=1000, block_bytes=997, cache=str(root))
    assert sum(ds.num_rows(s) for s in ("train", "val", "test")) == 400


def test_a_leftover_temporary_folder_of_a_dead_build_is_replaced(tmp_path: Path, tsv: Path) -> None:
    root = tmp_path / "cache"
    ds = load_criteo(path=str(tsv), seed=0, hash_size=1000, cache=str(root))
    key = ds.entry.name
    for p in ds.entry.iterdir():
        p.unlink()
    ds.entry.rmdir()
    (root / f"{key}.tmp-{os.getpid()}").mkdir()  # a build of this process that died
    (root / f"{key}.tmp-{os.getpid()}" / "train.labels").write_bytes(b"half")
    again = load_criteo(path=str(tsv), seed=0, hash_size=1000, cache=str(root))
    assert entries(root) == [key] and again.num_rows("train") == ds.num_rows("train")


def test_the_folder_of_a_killed_builder_in_another_process_is_cleared(tmp_path: Path, tsv: Path) -> None:
    import subprocess
    import sys

    root = tmp_path / "cache"
    ds = load_criteo(path=str(tsv), seed=0, hash_size=1000, cache=str(root))
    key = ds.entry.name
    shutil.rmtree(ds.entry)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # a process that has exited: its pid is free
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        for pid in (dead.pid, alive.pid):
            (root / f"{key}.tmp-{pid}").mkdir()
        load_criteo(path=str(tsv), seed=0, hash_size=1000, cache=str(root))
        assert entries(root) == sorted([key, f"{key}.tmp-{alive.pid}"])  # a running build is left alone
    finally:
        alive.kill()
        alive.wait()


def test_two_builders_of_one_key_both_read_the_finished_entry(tmp_path: Path, tsv: Path, monkeypatch) -> None:
    root = tmp_path / "cache"
    build = cache_module.build

    def raced(reader: Reader, entry: Path) -> None:  # another process renames its entry first
        monkeypatch.setattr(cache_module.os, "getpid", lambda: 99999)
        build(reader, entry)
        monkeypatch.undo()
        build(reader, entry)

    monkeypatch.setattr(cache_module, "build", raced)
    ds = load_criteo(path=str(tsv), seed=0, hash_size=1000, cache=str(root))
    assert entries(root) == [ds.entry.name] and ds.num_rows("train") > 0


def test_a_damaged_entry_or_a_bad_cache_folder_is_named(tmp_path: Path, tsv: Path) -> None:
    root = tmp_path / "cache"
    ds = load_criteo(path=str(tsv), seed=0, hash_size=1000, cache=str(root))
    column = ds.entry / "train.ids"
    column.write_bytes(column.read_bytes()[:-8])
    with pytest.raises(DataError, match=rf"{column}: \d+ bytes, expected \d+ .*delete the folder to rebuild"):
        load_criteo(path=str(tsv), seed=0, hash_size=1000, cache=str(root))
    (ds.entry / "meta.json").write_text("{not json")
    with pytest.raises(DataError, match=r"meta.json: unreadable cache entry"):
        load_criteo(path=str(tsv), seed=0, hash_size=1000, cache=str(root))
    a_file = tmp_path / "file"
    a_file.write_text("")
    with pytest.raises(DataError, match=rf"criteo cache: {a_file} is a file; expected a folder for cache="):
        load_criteo(path=str(tsv), seed=0, hash_size=1000, cache=str(a_file))
    missing = tmp_path / "missing.txt"
    with pytest.raises(DataError, match=rf"{missing}: no such file or directory"):
        load_criteo(path=str(missing), seed=0, cache=str(root))


def test_a_training_runs_from_the_cache_through_load_dataset(tmp_path: Path, tsv: Path) -> None:
    from autorec.presets import preset
    from autorec.train.trainer import TrainConfig, Trainer

    ds = load_dataset("criteo", path=str(tsv), seed=0, hash_size=256, cache=str(tmp_path / "c"))
    assert isinstance(ds, CachedCriteo)
    config = TrainConfig(epochs=1, batch_size=64, max_steps_per_epoch=3, progress=False)
    result = Trainer(preset("dlrm", ds.schema), ds, config).fit()
    epoch = result.history[0]
    assert len(result.history) == 1 and 0.0 <= epoch.val["auc"] <= 1.0 and epoch.samples == 3 * 64
