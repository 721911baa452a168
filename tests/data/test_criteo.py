"""The Criteo TSV stream: parsing, ids, splits, workers, and every malformed input."""

from __future__ import annotations

import gzip
import math
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from autorec.data import DataError, load_dataset
from autorec.data.criteo import SPARSE_NAMES, hashed_ids, load_criteo


def criteo_lines(n: int, seed: int = 0) -> list[str]:
    """Criteo-like lines with empty fields, negative counts and few/many distinct ids."""
    rng = random.Random(seed)
    lines = []
    for _ in range(n):
        fields = [str(rng.randint(0, 1))]
        fields += ["" if rng.random() < 0.2 else str(rng.choice([-2, -1, 0, 1, 5, 123, 40000]))
                   for _ in range(13)]
        fields += ["" if rng.random() < 0.1 else f"{rng.randrange(2**32 if c % 2 else 6):08x}"
                   for c in range(26)]
        lines.append("\t".join(fields))
    return lines


def write(path: Path, lines: list[str], *, compress: bool = False) -> Path:
    data = ("\n".join(lines) + "\n").encode()
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


def reference(lines: list[str], hash_size: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A plain line-by-line parse: labels [N], dense [N, 13], ids [N, 26]."""
    labels, dense, values, missing = [], [], [], []
    for line in lines:
        fields = line.split("\t")
        labels.append(float(fields[0]))
        dense.append([math.log1p(max(int(x or 0), 0)) for x in fields[1:14]])
        values.append([int(x, 16) if x else 0 for x in fields[14:]])
        missing.append([not x for x in fields[14:]])
    ids = hashed_ids(np.array(values, dtype=np.uint64), np.array(missing), hash_size)
    return torch.tensor(labels), torch.tensor(dense, dtype=torch.float32), torch.from_numpy(ids)


def collect(batches) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Concatenated labels, dense and ids [N, 26] of an iterable of single-hot Batches."""
    labels, dense, ids = [], [], []
    for batch in batches:
        kjt = batch.sparse_features
        assert kjt.keys() == list(SPARSE_NAMES)
        assert bool((kjt.lengths() == 1).all())
        labels.append(batch.labels)
        dense.append(batch.dense_features)
        ids.append(kjt.values().view(26, -1).T)
    if not labels:
        return torch.empty(0), torch.empty(0, 13), torch.empty(0, 26, dtype=torch.int64)
    return torch.cat(labels), torch.cat(dense), torch.cat(ids)


def as_sorted_rows(data: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> list[tuple]:
    labels, dense, ids = data
    return sorted(zip(labels.tolist(), ids.tolist(), dense.round(decimals=4).tolist(), strict=True))


def all_rows(ds, split: str = "train", **kwargs):
    return collect(ds.batches(split, 64, shuffle=False, **kwargs))


@pytest.fixture
def lines() -> list[str]:
    return criteo_lines(300)


@pytest.fixture
def tsv(tmp_path: Path, lines: list[str]) -> Path:
    return write(tmp_path / "train.txt", lines)


# ---------------------------------------------------------------------------------------------- good


def test_stream_matches_an_in_memory_parse(tsv: Path, lines: list[str]) -> None:
    ds = load_criteo(path=str(tsv), seed=0, hash_size=1000, fractions=(1.0, 0.0, 0.0), block_bytes=997)
    labels, dense, ids = all_rows(ds)
    want_labels, want_dense, want_ids = reference(lines, 1000)
    assert torch.equal(labels, want_labels)
    assert torch.equal(ids, want_ids)
    torch.testing.assert_close(dense, want_dense)
    assert int(ids.max()) < 1000


def test_dense_and_missing_fields(tmp_path: Path) -> None:
    line = "\t".join(["1", "", "-3", "0", "7"] + ["2"] * 9 + ["", "0000000a"] + ["ff"] * 24)
    ds = load_criteo(path=str(write(tmp_path / "one.tsv", [line])), seed=0, fractions=(1, 0, 0))
    batch = next(iter(ds.batches("train", 8, shuffle=False)))
    assert batch.labels.tolist() == [1.0]
    assert batch.dense_features.dtype == torch.float32
    # empty -> 0, negative clipped to 0, else log1p.
    torch.testing.assert_close(batch.dense_features[0, :4], torch.tensor([0.0, 0.0, 0.0, math.log1p(7)]))
    ids = batch.sparse_features.values()
    assert ids[0] == 0 and ids[1] != 0  # empty categorical -> the reserved id 0


def test_long_signed_and_upper_case_fields(tmp_path: Path) -> None:
    dense = ["123456789012", "-987654321", "999999999999999999", "-0", "00042"] + ["1"] * 8
    cats = ["ABCDEF0123456789", "1234567890a", "DeadBeef", "0", "000000000000000f"] + ["7"] * 21
    lines = ["\t".join(["0", *dense, *cats]), "\t".join(["1", *dense[::-1], *cats[::-1]])]
    ds = load_criteo(path=str(write(tmp_path / "long.tsv", lines)), seed=0, fractions=(1, 0, 0))
    got, want = all_rows(ds), reference(lines, 1 << 20)
    assert torch.equal(got[2], want[2]) and torch.equal(got[0], want[0])
    torch.testing.assert_close(got[1], want[1])


def test_vectorised_parser_agrees_with_python_on_random_fields() -> None:
    from autorec.data.criteo.parse import LineError, parse_block

    rng = random.Random(7)
    decimals = ["", "0", "-3", "12", "-0", "1" * 18, "-" + "9" * 18, "1" * 19, "1a", "--1", "-", "1-",
                " 1", "+1", "1.0", "9" * 9]
    hexes = ["", "0", "a", "F", "00ff", "1" * 16, "abcdefABCDEF0123", "1" * 17, "g", "-1", "0x1", "12 ",
             "ffffffff", "1234567890"]

    def python_parse(fields: list[str]) -> tuple | None:
        try:
            assert fields[0] in ("0", "1")
            dense = []
            for x in fields[1:14]:
                assert x == "" or (x.lstrip("-").isdigit() and x.count("-") <= 1 and x[-1] != "-"
                                   and len(x.lstrip("-")) <= 18 and x.strip() == x)
                dense.append(int(x or 0))
            cats = []
            for x in fields[14:]:
                assert x == "" or (len(x) <= 16 and all(c in "0123456789abcdefABCDEF" for c in x))
                cats.append(int(x, 16) if x else 0)
            return dense, cats
        except AssertionError:
            return None

    for _ in range(300):
        fields = [rng.choice(["0", "1", "1", "0", "2"])]
        fields += [rng.choice(decimals) if rng.random() < 0.1 else str(rng.randrange(-5, 10**6))
                   for _ in range(13)]
        fields += [rng.choice(hexes) if rng.random() < 0.1 else f"{rng.randrange(2**32):08x}"
                   for _ in range(26)]
        want = python_parse(fields)
        try:
            rows = parse_block("\t".join(fields).encode() + b"\n")
        except LineError:
            assert want is None, fields
            continue
        assert want is not None, fields
        assert rows.dense[0].tolist() == want[0] and rows.cats[0].tolist() == want[1]


def test_gzip_is_detected_by_magic_bytes(tmp_path: Path, lines: list[str]) -> None:
    plain = load_criteo(path=str(write(tmp_path / "a.txt", lines)), seed=1)
    hidden = load_criteo(path=str(write(tmp_path / "b.txt", lines, compress=True)), seed=1)
    assert hidden.describe()["gzip"] == [True]
    for split in ("train", "val", "test"):
        assert as_sorted_rows(all_rows(plain, split)) == as_sorted_rows(all_rows(hidden, split))
    # A plain file named .gz is read as plain.
    misnamed = load_criteo(path=str(write(tmp_path / "c.gz", lines)), seed=1)
    assert as_sorted_rows(all_rows(misnamed)) == as_sorted_rows(all_rows(plain))


@pytest.mark.parametrize("block_bytes", [7, 500, 1 << 20])
@pytest.mark.parametrize("compress", [False, True])
def test_block_size_does_not_change_rows(tmp_path: Path, lines: list[str], block_bytes: int,
                                         compress: bool) -> None:
    path = write(tmp_path / "d.tsv", lines, compress=compress)
    got = all_rows(load_criteo(path=str(path), seed=3, block_bytes=block_bytes))
    want = all_rows(load_criteo(path=str(path), seed=3))
    assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))


def test_splits_partition_the_lines_and_follow_the_seed(tsv: Path, lines: list[str]) -> None:
    ds = load_criteo(path=str(tsv), seed=0, hash_size=1000)
    parts = {s: as_sorted_rows(all_rows(ds, s)) for s in ("train", "val", "test")}
    everything = as_sorted_rows(reference(lines, 1000))
    assert sorted(parts["train"] + parts["val"] + parts["test"]) == everything
    assert 0.7 < len(parts["train"]) / len(lines) < 0.9 and parts["val"] and parts["test"]
    again = load_criteo(path=str(tsv), seed=0, hash_size=1000)
    assert as_sorted_rows(all_rows(again, "val")) == parts["val"]
    other = load_criteo(path=str(tsv), seed=1, hash_size=1000)
    assert as_sorted_rows(all_rows(other, "val")) != parts["val"]


@pytest.mark.parametrize("compress", [False, True])
def test_dataloader_workers_share_lines_without_duplicates(tmp_path: Path, lines: list[str],
                                                           compress: bool) -> None:
    path = write(tmp_path / "w.tsv", lines, compress=compress)
    ds = load_criteo(path=str(path), seed=0, block_bytes=600)
    single = as_sorted_rows(all_rows(ds))
    parallel = as_sorted_rows(collect(ds.loader("train", 64, shuffle=False, num_workers=2)))
    assert parallel == single


def test_shuffle_is_seeded_per_epoch_and_keeps_the_rows(tsv: Path) -> None:
    ds = load_criteo(path=str(tsv), seed=0, block_bytes=800, shuffle_rows=50)

    def order(seed: int, epoch: int) -> torch.Tensor:
        return collect(ds.batches("train", 32, shuffle=True, seed=seed, epoch=epoch))[2]

    assert torch.equal(order(0, 0), order(0, 0))
    assert not torch.equal(order(0, 0), order(0, 1))
    assert not torch.equal(order(0, 0), all_rows(ds)[2])
    assert sorted(order(0, 1).tolist()) == sorted(all_rows(ds)[2].tolist())
    sizes = [len(b.labels) for b in ds.batches("train", 32, shuffle=True)]
    assert all(s == 32 for s in sizes[:-1]) and 0 < sizes[-1] <= 32


def test_max_rows_reads_the_first_lines(tmp_path: Path, lines: list[str]) -> None:
    for compress in (False, True):
        path = write(tmp_path / f"m{compress}.tsv", lines, compress=compress)
        ds = load_criteo(path=str(path), seed=0, max_rows=37, fractions=(1, 0, 0), block_bytes=300)
        assert as_sorted_rows(all_rows(ds)) == as_sorted_rows(reference(lines[:37], 1 << 20))


def test_vocabulary_ids(tmp_path: Path) -> None:
    def line(label: str, value: str) -> str:
        return "\t".join([label] + ["1"] * 13 + [value] * 26)

    lines = [line("1", "aa")] * 3 + [line("0", "bb")] + [line("0", "")] + [line("1", "cc")] * 2
    ds = load_criteo(path=str(write(tmp_path / "v.tsv", lines)), seed=0, vocab_min_count=2,
                     fractions=(1, 0, 0))
    assert [f.num_embeddings for f in ds.schema.sparse] == [4] * 26  # missing, OOV, aa, cc
    ids = all_rows(ds)[2][:, 0].tolist()
    assert ids == [2, 2, 2, 1, 0, 3, 3]
    assert ds.num_rows("train") == 7 and ds.describe()["rows"]["val"] == 0


def test_vocabulary_comes_from_the_train_split_only(tsv: Path, lines: list[str]) -> None:
    ds = load_criteo(path=str(tsv), seed=0, vocab_min_count=1)
    train_ids = all_rows(ds, "train")[2]
    test_ids = all_rows(ds, "test")[2]
    sizes = torch.tensor([f.num_embeddings for f in ds.schema.sparse])
    assert bool((train_ids < sizes).all()) and bool((train_ids != 1).all())  # no OOV in train
    assert bool((test_ids == 1).any())  # ids unseen in train are OOV
    assert sum(ds.num_rows(s) for s in ("train", "val", "test")) == len(lines)


def test_a_directory_of_parts_and_windows_line_ends(tmp_path: Path, lines: list[str]) -> None:
    parts = tmp_path / "days"
    parts.mkdir()
    (parts / "day_2").write_bytes(("\r\n".join(lines[100:]) + "\r\n").encode())
    write(parts / "day_1", lines[:100], compress=True)
    ds = load_dataset("criteo", path=str(parts), seed=0, fractions=(1, 0, 0), hash_size=99)
    assert [Path(f).name for f in ds.describe()["files"]] == ["day_1", "day_2"]
    labels, dense, ids = all_rows(ds)
    want = reference(lines, 99)
    assert torch.equal(ids, want[2]) and torch.equal(labels, want[0])
    torch.testing.assert_close(dense, want[1])


def test_describe(tsv: Path) -> None:
    info = load_criteo(path=str(tsv), seed=0, hash_size=64).describe()
    assert info["name"] == "criteo" and len(info["dense"]) == 13 and len(info["sparse"]) == 26
    assert info["sparse"][0]["num_embeddings"] == 64 and info["ids"] == "hashed"
    assert info["rows"] == {"train": None, "val": None, "test": None}


# ----------------------------------------------------------------------------------------------- bad


def read_all(path: Path, **options) -> None:
    ds = load_criteo(path=str(path), seed=0, block_bytes=256, **options)
    for split in ("train", "val", "test"):
        for _ in ds.batches(split, 16, shuffle=False):
            pass


def broken(tmp_path: Path, lines: list[str], line_no: int, bad_line: str, **write_options) -> Path:
    lines = list(lines)
    lines[line_no - 1] = bad_line
    return write(tmp_path / "bad.tsv", lines, **write_options)


def replace_field(line: str, col: int, value: str) -> str:
    fields = line.split("\t")
    fields[col] = value
    return "\t".join(fields)


@pytest.mark.parametrize("line_no", [1, 2, 157])
@pytest.mark.parametrize("compress", [False, True])
def test_wrong_column_count_names_file_and_line(tmp_path: Path, lines: list[str], line_no: int,
                                                compress: bool) -> None:
    path = broken(tmp_path, lines, line_no, "\t".join(lines[0].split("\t")[:39]), compress=compress)
    with pytest.raises(DataError, match=rf"bad\.tsv:{line_no}: expected 40 tab-separated fields.*got 39"):
        read_all(path)


@pytest.mark.parametrize(("col", "value", "expected"), [
    (3, "12x", "integer"), (13, "1.5", "integer"), (1, "-", "integer"),
    (20, "xyz", "hex id"), (39, "0x12", "hex id"), (14, "1" * 17, "hex id"),
    (0, "2", "label 0 or 1"), (0, "", "label 0 or 1"),
])
def test_bad_field_names_file_line_and_column(tmp_path: Path, lines: list[str], col: int, value: str,
                                              expected: str) -> None:
    path = broken(tmp_path, lines, 201, replace_field(lines[200], col, value))
    with pytest.raises(DataError, match=rf"bad\.tsv:201: column {col + 1} .*{expected}.*{value!r}"):
        read_all(path)


def test_error_in_a_dataloader_worker_names_file_and_line(tmp_path: Path, lines: list[str]) -> None:
    path = broken(tmp_path, lines, 250, replace_field(lines[249], 5, "x"))
    ds = load_criteo(path=str(path), seed=0, block_bytes=256, fractions=(1, 0, 0))
    with pytest.raises(DataError, match=r"bad\.tsv:250: column 6"):
        for _ in ds.loader("train", 16, shuffle=False, num_workers=2):
            pass


def test_empty_line(tmp_path: Path, lines: list[str]) -> None:
    with pytest.raises(DataError, match=r"bad\.tsv:42: .*got an empty line"):
        read_all(broken(tmp_path, lines, 42, ""))


@pytest.mark.parametrize("compress", [False, True])
def test_empty_file(tmp_path: Path, compress: bool) -> None:
    path = tmp_path / "empty.tsv"
    path.write_bytes(gzip.compress(b"") if compress else b"")
    with pytest.raises(DataError, match=r"empty\.tsv: file is empty"):
        load_criteo(path=str(path), seed=0)


def test_truncated_gzip_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path / "cut.gz", criteo_lines(3000), compress=True)
    path.write_bytes(path.read_bytes()[: path.stat().st_size * 2 // 3])
    with pytest.raises(DataError, match=r"cut\.gz: truncated or corrupt gzip"):
        read_all(path)


def test_corrupt_gzip_names_the_file(tmp_path: Path, lines: list[str]) -> None:
    path = write(tmp_path / "crc.gz", lines, compress=True)
    data = bytearray(path.read_bytes())
    data[-6] ^= 0xFF  # the CRC
    path.write_bytes(bytes(data))
    with pytest.raises(DataError, match=r"crc\.gz: truncated or corrupt gzip"):
        read_all(path)
    path.write_bytes(b"\x1f\x8b" + b"garbage" * 10)
    with pytest.raises(DataError, match=r"crc\.gz: truncated or corrupt gzip"):
        load_criteo(path=str(path), seed=0)


def test_bad_arguments(tmp_path: Path, tsv: Path) -> None:
    with pytest.raises(DataError, match="no such file"):
        load_criteo(path=str(tmp_path / "missing.tsv"), seed=0)
    with pytest.raises(DataError, match="needs path"):
        load_criteo(seed=0)
    with pytest.raises(ValueError, match="either hash_size"):
        load_criteo(path=str(tsv), seed=0, hash_size=10, vocab_min_count=2)
    with pytest.raises(ValueError, match="fractions"):
        load_criteo(path=str(tsv), seed=0, fractions=(0.5, 0.1, 0.1))
    with pytest.raises(TypeError):
        load_criteo(path=str(tsv), seed=0, hash_sise=10)
    with pytest.raises(KeyError):
        load_criteo(path=str(tsv), seed=0).batches("dev", 4, shuffle=False)


def split_of(ds, split: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return collect(ds.batches(split, 64, shuffle=False))


@pytest.mark.parametrize("compress", [False, True])
def test_a_sequential_split_holds_out_the_last_lines_in_file_order(tmp_path: Path, compress: bool) -> None:
    lines = criteo_lines(300, seed=4)
    parts = tmp_path / "days"  # Terabyte-like: the split runs across the day files in order
    parts.mkdir()
    for k, (lo, hi) in enumerate(((0, 100), (100, 170), (170, 300))):
        write(parts / f"day_{k}{'.gz' if compress else ''}", lines[lo:hi], compress=compress)
    ds = load_criteo(path=str(parts), seed=0, hash_size=1000, split="sequential", fractions=(0.8, 0.1, 0.1),
                     block_bytes=997)
    assert {s: ds.num_rows(s) for s in ("train", "val", "test")} == {"train": 240, "val": 30, "test": 30}
    for split, (lo, hi) in (("train", (0, 240)), ("val", (240, 270)), ("test", (270, 300))):
        got, want = split_of(ds, split), reference(lines[lo:hi], 1000)
        for a, b in zip(got, want, strict=True):
            torch.testing.assert_close(a, b)
    assert ds.describe()["split"] == "sequential 80/10/10"
    # Workers and the seed change nothing; vocabularies come from the first 80% only.
    again = load_criteo(path=str(parts), seed=7, hash_size=1000, split="sequential", block_bytes=997)
    by_workers = collect(again.loader("test", 64, shuffle=False, num_workers=2))[2]
    assert sorted(map(tuple, by_workers.tolist())) == sorted(map(tuple, want[2].tolist()))
    vocab = load_criteo(path=str(parts), seed=0, vocab_min_count=1, split="sequential", block_bytes=997)
    first = {line.split("\t")[15] for line in lines[:240]} - {""}
    assert vocab.schema.sparse[1].num_embeddings == 2 + len(first)


def test_one_file_or_directory_per_split(tmp_path: Path) -> None:
    lines = criteo_lines(90, seed=5)
    days = tmp_path / "train_days"
    days.mkdir()
    write(days / "day_0", lines[:30])
    write(days / "day_1.gz", lines[30:60], compress=True)
    valid, test = write(tmp_path / "valid.tsv", lines[60:75]), write(tmp_path / "test.tsv", lines[75:])
    ds = load_dataset("criteo", seed=0, hash_size=1000, train=str(days), valid=str(valid), test=str(test))
    for split, (lo, hi) in (("train", (0, 60)), ("val", (60, 75)), ("test", (75, 90))):
        torch.testing.assert_close(split_of(ds, split)[2], reference(lines[lo:hi], 1000)[2])
    assert ds.describe()["split"] == "files"
    vocab = load_criteo(seed=0, vocab_min_count=1, train=str(days), valid=str(valid), test=str(test))
    assert {s: vocab.num_rows(s) for s in ("train", "val", "test")} == {"train": 60, "val": 15, "test": 15}
    cut = load_criteo(seed=0, hash_size=1000, train=str(days), valid=str(valid), test=str(test), max_rows=10)
    assert [len(split_of(cut, s)[0]) for s in ("train", "val", "test")] == [10, 10, 10]


def test_bad_split_options_name_the_option(tmp_path: Path, tsv: Path) -> None:
    with pytest.raises(DataError, match=r"split: expected one of random, sequential, got 'daily'"):
        load_criteo(path=str(tsv), split="daily")
    with pytest.raises(DataError, match=r"split files train= given without valid=, test="):
        load_criteo(train=str(tsv))
    with pytest.raises(DataError, match=r"fractions= cannot go with train=, valid= and test="):
        load_criteo(train=str(tsv), valid=str(tsv), test=str(tsv), fractions=(0.8, 0.1, 0.1))
    with pytest.raises(DataError, match=r"nope: no such file or directory"):
        load_criteo(train=str(tsv), valid=str(tsv), test=str(tmp_path / "nope"))
    with pytest.raises(DataError, match=r"fractions: expected 3 non-negative .* got \[0.5, 0.6, -0.1\]"):
        load_criteo(path=str(tsv), split="sequential", fractions=(0.5, 0.6, -0.1))
