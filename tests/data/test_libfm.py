"""libFM files: inferred, named and ranged fields, dense values, splits, and malformed lines."""

from __future__ import annotations

import gzip
import random
from pathlib import Path

import pytest
import torch

from autorec.data import DataError, load_dataset
from autorec.data.libfm import load_libfm


def frappe_lines(n: int, seed: int = 0) -> list[str]:
    """Frappe-like lines: -1/1 labels, 4 fields with disjoint global index ranges, values 1."""
    rng = random.Random(seed)
    starts = [0, 10, 30, 35]
    return [" ".join([rng.choice(["-1", "1"])] + [f"{lo + rng.randrange(5)}:1" for lo in starts])
            for _ in range(n)]


def write(path: Path, lines: list[str], *, compress: bool = False) -> Path:
    data = ("\n".join(lines) + "\n").encode()
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


def rows(ds) -> list[tuple]:
    """(label, {feature: ids}) of every sample of every split."""
    out = []
    for split in ("train", "val", "test"):
        for batch in ds.batches(split, 7, shuffle=False):
            per_feature = {k: [t.tolist() for t in jt.to_dense()]
                           for k, jt in batch.sparse_features.to_dict().items()}
            for i, label in enumerate(batch.labels.tolist()):
                out.append((label, tuple((k, tuple(v[i])) for k, v in per_feature.items())))
    return sorted(out)


@pytest.fixture
def lines() -> list[str]:
    return frappe_lines(60)


# ---------------------------------------------------------------------------------------------- good


@pytest.mark.parametrize("compress", [False, True])
def test_inferred_fields_by_position(tmp_path: Path, lines: list[str], compress: bool) -> None:
    ds = load_libfm(path=str(write(tmp_path / "frappe.libfm", lines, compress=compress)), seed=0)
    assert ds.schema.sparse_names == ("f0", "f1", "f2", "f3")
    assert all(not f.multi_hot and f.num_embeddings <= 5 for f in ds.schema.sparse)
    assert sum(ds.num_rows(s) for s in ("train", "val", "test")) == 60
    got = rows(ds)
    labels = sorted(0.0 if line.startswith("-1") else 1.0 for line in lines)
    assert sorted(label for label, _ in got) == labels
    # ids are the ranks of a field's distinct indices
    first_field = sorted({int(line.split()[1].split(":")[0]) for line in lines})
    want = sorted((0.0 if line.startswith("-1") else 1.0, first_field.index(int(line.split()[1][:-2])))
                  for line in lines)
    assert sorted((label, feats[0][1][0]) for label, feats in got) == want


def test_named_fields_and_dense_values(tmp_path: Path) -> None:
    path = write(tmp_path / "d.libfm", ["1 3:1 7:0.5 9:1", "0 4:1 7:2 9:1", "1 3:1 9:1", "0 4:1 9:1 7:1"] * 5)
    ds = load_libfm(path=str(path), seed=0, fields=["user", "item"], dense=[7],
                    fractions=(0.6, 0.2, 0.2))
    assert ds.schema.dense == ("x7",) and ds.schema.sparse_names == ("user", "item")
    dense = torch.cat([b.dense_features for s in ("train", "val", "test")
                       for b in ds.batches(s, 100, shuffle=False)])
    assert sorted(dense[:, 0].tolist()) == sorted([0.5, 2.0, 0.0, 1.0] * 5)


def test_field_ranges_make_multi_hot_features_that_keep_every_id(tmp_path: Path) -> None:
    lines = ["1 0:1 12:1 13:1 14:1 15:1 16:1 17:1", "0 1:1 12:1", "1 2:1", "0 0:1 19:1 19:1"] * 3
    ds = load_libfm(path=str(write(tmp_path / "r.libfm", lines)), seed=0,
                    field_ranges={"user": [0, 10], "tags": [10, 20]}, fractions=(0.5, 0.25, 0.25))
    tags = ds.schema.feature("tags")
    assert tags.multi_hot and tags.num_embeddings == 10
    assert not ds.schema.feature("user").multi_hot
    got = rows(ds)
    want_tags = sorted(tuple(int(e[:-2]) - 10 for e in line.split()[1:] if int(e[:-2]) >= 10)
                       for line in lines)
    assert sorted(dict(feats)["tags"] for _, feats in got) == want_tags
    assert (2, 3, 4, 5, 6, 7) in want_tags  # six ids, all kept


def test_labels_zero_one_and_zero_value_entries(tmp_path: Path) -> None:
    path = write(tmp_path / "z.libfm", ["1 0:1 5:1", "0 1:1 5:0", "1.0 0:1 6:1", "0 1:1 6:1"] * 3)
    ds = load_libfm(path=str(path), seed=0, field_ranges={"a": [0, 5], "b": [5, 10]})
    assert sorted(label for label, _ in rows(ds)) == [0.0] * 6 + [1.0] * 6
    assert ds.schema.feature("b").multi_hot  # some samples have no id there (5:0 is absent)


def test_split_is_deterministic_by_seed(tmp_path: Path, lines: list[str]) -> None:
    path = str(write(tmp_path / "s.libfm", lines))

    def val_labels(seed: int) -> list[list[float]]:
        return [b.dense_features.tolist() + b.labels.tolist() + b.sparse_features.values().tolist()
                for b in load_libfm(path=path, seed=seed).batches("val", 100, shuffle=False)]

    assert val_labels(0) == val_labels(0)
    assert val_labels(0) != val_labels(1)


def test_registry_and_describe(tmp_path: Path, lines: list[str]) -> None:
    ds = load_dataset("libfm", path=str(write(tmp_path / "x.libfm", lines)), seed=3)
    info = ds.describe()
    assert info["name"] == "libfm" and len(info["sparse"]) == 4
    assert sum(info["rows"].values()) == 60


# ----------------------------------------------------------------------------------------------- bad


@pytest.mark.parametrize(("bad", "message"), [
    ("1 0:1 10:1 30:1", "expected 4 categorical entries"),
    ("2 0:1 10:1 30:1 35:1", "expected a label 1/0 or 1/-1, got '2'"),
    ("yes 0:1 10:1 30:1 35:1", "expected a label"),
    ("1 0:1 10 30:1 35:1", "expected idx:value.*got '10'"),
    ("1 0:1 a:1 30:1 35:1", "expected idx:value.*got 'a:1'"),
    ("1 0:1 10:x 30:1 35:1", "expected idx:value.*got '10:x'"),
    ("1 0:1 10:1:1 30:1 35:1", "expected idx:value.*got '10:1:1'"),
    ("1 0:1 10: 30:1 35:1", "expected idx:value.*got '10:'"),
    ("1 0:1 -10:1 30:1 35:1", "expected a non-negative feature index, got -10"),
    ("1 0:1 10:0.5 30:1 35:1", "index 10 has value 0.5.*dense="),
])
def test_bad_lines_name_file_and_line(tmp_path: Path, lines: list[str], bad: str, message: str) -> None:
    lines = list(lines)
    lines[16] = bad
    with pytest.raises(DataError, match=rf"bad\.libfm:17: {message}"):
        load_libfm(path=str(write(tmp_path / "bad.libfm", lines)), seed=0)


def test_blank_lines_are_skipped_and_line_numbers_still_count_them(tmp_path: Path,
                                                                    lines: list[str]) -> None:
    lines = [*lines[:3], "", "  ", *lines[3:]]
    assert sum(load_libfm(path=str(write(tmp_path / "b.libfm", lines)), seed=0).num_rows(s)
               for s in ("train", "val", "test")) == 60
    lines[7] = "1 0:1"
    with pytest.raises(DataError, match=r"b\.libfm:8: expected 4"):
        load_libfm(path=str(write(tmp_path / "b.libfm", lines)), seed=0)


def test_index_outside_field_ranges(tmp_path: Path) -> None:
    path = write(tmp_path / "o.libfm", ["1 0:1 5:1", "0 1:1 50:1"])
    with pytest.raises(DataError, match=r"o\.libfm:2: index 50 lies in no range"):
        load_libfm(path=str(path), seed=0, field_ranges={"a": [0, 5], "b": [5, 10]})


def test_named_fields_count_must_match(tmp_path: Path, lines: list[str]) -> None:
    with pytest.raises(DataError, match=r"n\.libfm:1: expected 3 categorical entries \(one per name"):
        load_libfm(path=str(write(tmp_path / "n.libfm", lines)), seed=0, fields=["a", "b", "c"])


@pytest.mark.parametrize("content", [b"", b"\n\n", gzip.compress(b"")])
def test_empty_file(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "empty.libfm"
    path.write_bytes(content)
    with pytest.raises(DataError, match=r"empty\.libfm: file is empty"):
        load_libfm(path=str(path), seed=0)


def test_truncated_gzip(tmp_path: Path) -> None:
    path = write(tmp_path / "t.libfm.gz", frappe_lines(3000), compress=True)
    path.write_bytes(path.read_bytes()[:-300])
    with pytest.raises(DataError, match=r"t\.libfm\.gz: truncated or corrupt gzip"):
        load_libfm(path=str(path), seed=0)


def test_bad_options(tmp_path: Path, lines: list[str]) -> None:
    path = str(write(tmp_path / "x.libfm", lines))
    with pytest.raises(DataError, match="no such file"):
        load_libfm(path=str(tmp_path / "nope"), seed=0)
    with pytest.raises(ValueError, match="either fields"):
        load_libfm(path=path, seed=0, fields=["a"], field_ranges={"a": [0, 1]})
    with pytest.raises(ValueError, match="overlap"):
        load_libfm(path=path, seed=0, field_ranges={"a": [0, 10], "b": [5, 20]})


def split_rows(ds) -> dict[str, list[float]]:
    return {s: [x for b in ds.batches(s, 50, shuffle=False) for x in b.labels.tolist()]
            for s in ("train", "val", "test")}


def test_one_file_per_split_keeps_each_file_whole_and_in_order(tmp_path: Path) -> None:
    files = {name: write(tmp_path / f"{name}.libfm", frappe_lines(n, seed=k))
             for k, (name, n) in enumerate((("train", 60), ("valid", 25), ("test", 15)))}
    ds = load_dataset("libfm", seed=0, **{k: str(v) for k, v in files.items()})
    assert {s: ds.num_rows(s) for s in ("train", "val", "test")} == {"train": 60, "val": 25, "test": 15}
    labels = split_rows(ds)
    for split, name in (("train", "train"), ("val", "valid"), ("test", "test")):
        expected = [max(0.0, float(line.split()[0])) for line in files[name].read_text().splitlines()]
        assert labels[split] == expected
    # The ids are one mapping over the three files: a value has one id in every split.
    one = load_libfm(path=str(write(tmp_path / "all.libfm", [
        line for name in ("train", "valid", "test") for line in files[name].read_text().splitlines()])),
        split="sequential", fractions=(0.6, 0.25, 0.15))
    assert rows(one) == rows(ds)


def test_a_sequential_split_is_file_order_whatever_the_seed(tmp_path: Path) -> None:
    lines = frappe_lines(100)
    path = str(write(tmp_path / "s.libfm", lines))
    first = load_libfm(path=path, seed=0, split="sequential", fractions=(0.7, 0.2, 0.1))
    assert split_rows(first) == split_rows(load_libfm(path=path, seed=5, split="sequential",
                                                      fractions=(0.7, 0.2, 0.1)))
    labels = [max(0.0, float(line.split()[0])) for line in lines]
    assert split_rows(first) == {"train": labels[:70], "val": labels[70:90], "test": labels[90:]}


@pytest.mark.parametrize("options, message", [
    ({"split": "by_time"}, r"split: expected one of random, sequential, got 'by_time'"),
    ({"fractions": (0.8, 0.1)}, r"fractions: expected 3 positive shares .* got \[0.8, 0.1\]"),
    ({"fractions": (0.9, 0.2, -0.1)}, r"fractions: expected 3 positive shares"),
    ({"fractions": "most"}, r"fractions: expected 3 numbers"),
])
def test_bad_split_options_name_the_option(tmp_path: Path, lines: list[str], options, message) -> None:
    with pytest.raises(DataError, match=message):
        load_libfm(path=str(write(tmp_path / "x.libfm", lines)), seed=0, **options)


def test_bad_split_files_say_what_is_missing_or_extra(tmp_path: Path, lines: list[str]) -> None:
    a, b = (str(write(tmp_path / f"{n}.libfm", lines)) for n in ("a", "b"))
    with pytest.raises(DataError, match=r"split files train=, test= given without valid="):
        load_libfm(train=a, test=b)
    with pytest.raises(DataError, match=r"path= cannot go with train=, valid= and test="):
        load_libfm(path=a, train=a, valid=b, test=b)
    with pytest.raises(DataError, match=r"split= cannot go with"):
        load_libfm(train=a, valid=b, test=b, split="sequential")
    with pytest.raises(DataError, match=r"nope\.libfm: no such file"):
        load_libfm(train=a, valid=str(tmp_path / "nope.libfm"), test=b)
    with pytest.raises(DataError, match=r"libfm needs path= .* or train=, valid= and test="):
        load_libfm()
    empty = tmp_path / "empty.libfm"
    empty.write_bytes(b"")
    with pytest.raises(DataError, match=r"empty\.libfm: file is empty"):
        load_libfm(train=a, valid=b, test=str(empty))
    bad = str(write(tmp_path / "bad.libfm", [*lines[:3], "1 2:x"]))
    with pytest.raises(DataError, match=r"bad\.libfm:4: "):
        load_libfm(train=a, valid=bad, test=b)
