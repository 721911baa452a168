"""CSV and Parquet tables through a declared schema: vocabularies, multi-hot, and bad input."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from autorec.data import DataError, load_dataset
from autorec.data.table import load_csv, load_parquet

SCHEMA = {"label": "clicked", "dense": ["price", "age"],
          "sparse": ["user", {"name": "tags", "multi_hot": True, "separator": "|"}]}


def table_rows(n: int = 40) -> list[dict[str, str]]:
    return [{"clicked": str(i % 2), "price": f"{i * 0.5}", "age": "" if i % 5 == 0 else str(20 + i),
             "user": f"u{i % 6}", "tags": "|".join(f"t{(i + k) % 9}" for k in range(i % 4))}
            for i in range(n)]


def write_csv(path: Path, rows: list[dict[str, str]], sep: str = ",", *, compress: bool = False) -> Path:
    text = sep.join(rows[0]) + "\n" + "".join(sep.join(r.values()) + "\n" for r in rows)
    path.write_bytes(gzip.compress(text.encode()) if compress else text.encode())
    return path


def samples(ds) -> list[tuple]:
    """(label, dense, user ids, tags ids) of every sample of every split, sorted."""
    out = []
    for split in ("train", "val", "test"):
        for batch in ds.batches(split, 8, shuffle=False):
            features = batch.sparse_features.to_dict()
            users = features["user"].values().tolist()
            tags = [t.tolist() for t in features["tags"].to_dense()]
            for i, label in enumerate(batch.labels.tolist()):
                out.append((label, tuple(batch.dense_features[i].tolist()), users[i], tuple(tags[i])))
    return sorted(out)


@pytest.fixture
def csv_file(tmp_path: Path) -> Path:
    return write_csv(tmp_path / "clicks.csv", table_rows())


# ---------------------------------------------------------------------------------------------- good


def test_csv_columns_become_a_batch(csv_file: Path) -> None:
    ds = load_csv(path=str(csv_file), seed=0, schema=SCHEMA)
    assert ds.schema.dense == ("price", "age") and ds.schema.sparse_names == ("user", "tags")
    assert ds.schema.feature("tags").multi_hot and not ds.schema.feature("user").multi_hot
    assert ds.schema.feature("user").num_embeddings <= 2 + 6
    got = samples(ds)
    assert len(got) == 40
    want_dense = sorted((float(r["price"]), float(r["age"] or 0)) for r in table_rows())
    assert sorted(dense for _, dense, _, _ in got) == want_dense  # an empty cell is 0
    assert sorted(len(tags) for *_, tags in got) == sorted(i % 4 for i in range(40))


def test_multi_hot_keeps_every_id_in_order(tmp_path: Path) -> None:
    rows = table_rows(12)
    many = [f"x{k}" for k in range(15)]
    for r in rows:
        r["tags"] = "|".join(many)
    rows[0]["tags"], rows[1]["tags"] = "", "x3 | x3|x1"
    ds = load_csv(path=str(write_csv(tmp_path / "m.csv", rows)), seed=0, schema=SCHEMA,
                  fractions=(0.5, 0.25, 0.25))
    tags = sorted(tags for *_, tags in samples(ds))
    assert tags[0] == ()  # an empty multi-hot cell has no ids
    vocab_ids = [t for t in tags if len(t) == 15]
    assert len(vocab_ids) == 10 and len(set(vocab_ids)) == 1 and len(set(vocab_ids[0])) == 15
    x = vocab_ids[0]  # the ids of x0 .. x14
    assert [t for t in tags if len(t) == 3] == [(x[3], x[3], x[1])]  # repeats kept, spaces stripped


def test_vocabulary_from_train_with_oov_and_min_count(tmp_path: Path) -> None:
    rows = table_rows(30)
    for i, r in enumerate(rows):
        r["user"] = f"u{i}"  # every user unique: with min_count 2 all are OOV
    rows[3]["user"] = ""
    schema = {"label": "clicked", "sparse": [{"name": "user", "min_count": 2},
                                             {"name": "tags", "multi_hot": True}]}
    ds = load_csv(path=str(write_csv(tmp_path / "v.csv", rows)), seed=0, schema=schema)
    assert ds.schema.feature("user").num_embeddings == 2
    users = sorted(u for *_, u, _ in samples(ds))
    assert users == [0] + [1] * 29  # 0: empty cell, 1: OOV
    # min_count 1: values of val/test rows never seen in train are OOV too.
    ds = load_csv(path=str(write_csv(tmp_path / "v.csv", rows)), seed=0,
                  schema={**schema, "sparse": ["user"]})

    def users_of(split: str) -> set[int]:
        return set(next(iter(ds.batches(split, 100, shuffle=False))).sparse_features.values().tolist())

    assert users_of("test") <= {0, 1}
    assert 1 not in users_of("train")


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_schema_from_a_file(tmp_path: Path, csv_file: Path, fmt: str) -> None:
    spec = tmp_path / f"schema.{fmt}"
    if fmt == "json":
        spec.write_text(json.dumps(SCHEMA))
    else:
        spec.write_text("label: clicked\ndense: [price, age]\n"
                        "sparse:\n  - user\n  - {name: tags, multi_hot: true, separator: '|'}\n")
    assert samples(load_csv(path=str(csv_file), seed=0, schema=str(spec))) == \
        samples(load_csv(path=str(csv_file), seed=0, schema=SCHEMA))


def test_gzip_csv_other_separator_and_max_rows(tmp_path: Path) -> None:
    plain = load_csv(path=str(write_csv(tmp_path / "a.csv", table_rows())), seed=0, schema=SCHEMA)
    packed = write_csv(tmp_path / "b.tsv", table_rows(), "\t", compress=True)
    assert samples(load_csv(path=str(packed), seed=0, schema=SCHEMA, sep="\t")) == samples(plain)
    few = load_csv(path=str(packed), seed=0, schema=SCHEMA, sep="\t", max_rows=10)
    assert sum(few.num_rows(s) for s in ("train", "val", "test")) == 10


def test_parquet_with_list_and_text_multi_hot(tmp_path: Path) -> None:
    rows = table_rows()
    frame = pd.DataFrame({
        "clicked": [int(r["clicked"]) for r in rows],
        "price": [float(r["price"]) for r in rows],
        "age": [float(r["age"]) if r["age"] else None for r in rows],
        "user": [int(r["user"][1:]) for r in rows],
        "tags": [r["tags"].split("|") if r["tags"] else [] for r in rows],
    })
    path = tmp_path / "t.parquet"
    frame.to_parquet(path)
    from_lists = load_parquet(path=str(path), seed=0, schema=SCHEMA)
    assert from_lists.describe()["name"] == "parquet"
    as_text = write_csv(tmp_path / "t.csv", [{**r, "user": r["user"][1:]} for r in rows])
    assert samples(from_lists) == samples(load_csv(path=str(as_text), seed=0, schema=SCHEMA))
    frame["tags"] = ["|".join(t) for t in frame["tags"]]
    frame.to_parquet(path)
    assert samples(load_parquet(path=str(path), seed=0, schema=SCHEMA)) == samples(from_lists)
    few = load_parquet(path=str(path), seed=0, schema=SCHEMA, max_rows=10)
    assert sum(few.num_rows(s) for s in ("train", "val", "test")) == 10


def test_split_is_deterministic_by_seed(csv_file: Path) -> None:
    def val(seed: int) -> list[float]:
        ds = load_dataset("csv", path=str(csv_file), seed=seed, schema=SCHEMA)
        return next(iter(ds.batches("val", 100, shuffle=False))).dense_features[:, 0].tolist()

    assert val(0) == val(0)
    assert val(0) != val(1)


def test_describe(csv_file: Path) -> None:
    info = load_csv(path=str(csv_file), seed=0, schema=SCHEMA).describe()
    assert info["name"] == "csv" and info["dense"] == ["price", "age"]
    assert info["sparse"][1] == {"name": "tags", "num_embeddings": info["sparse"][1]["num_embeddings"],
                                 "multi_hot": True}
    assert info["rows"] == {"train": 32, "val": 4, "test": 4}


# ----------------------------------------------------------------------------------------------- bad


def test_missing_column_names_file_and_column(tmp_path: Path) -> None:
    rows = [{k: v for k, v in r.items() if k != "age"} for r in table_rows()]
    with pytest.raises(DataError, match=r"nocol\.csv: column 'age' named by the schema is missing"):
        load_csv(path=str(write_csv(tmp_path / "nocol.csv", rows)), seed=0, schema=SCHEMA)
    pd.DataFrame(rows).to_parquet(tmp_path / "nocol.parquet")
    with pytest.raises(DataError, match=r"nocol\.parquet: column 'age' named by the schema is missing"):
        load_parquet(path=str(tmp_path / "nocol.parquet"), seed=0, schema=SCHEMA)


@pytest.mark.parametrize(("column", "value", "message"), [
    ("price", "cheap", "column 'price': expected a finite number, got 'cheap'"),
    ("age", "inf", "column 'age': expected a finite number"),
    ("clicked", "2", r"label column 'clicked': expected a number in \[0, 1\], got 2.0"),
    ("clicked", "", r"label column 'clicked': expected a number in \[0, 1\], got an empty cell"),
])
def test_bad_value_names_file_and_line(tmp_path: Path, column: str, value: str, message: str) -> None:
    rows = table_rows()
    rows[5][column] = value  # row 5 is on line 7: the header is line 1
    with pytest.raises(DataError, match=rf"bad\.csv:7: {message}"):
        load_csv(path=str(write_csv(tmp_path / "bad.csv", rows)), seed=0, schema=SCHEMA)


def test_line_numbers_count_physical_lines(tmp_path: Path) -> None:
    rows = table_rows(8)
    rows[1]["user"] = '"two\nlines"'
    rows[4]["price"] = "n/a"
    text = ",".join(rows[0]) + "\n\n" + "".join(",".join(r.values()) + "\n" for r in rows)
    (tmp_path / "q.csv").write_text(text)  # blank line 2, row 1 spans lines 4-5: row 4 is line 8
    with pytest.raises(DataError, match=r"q\.csv:8: column 'price'"):
        load_csv(path=str(tmp_path / "q.csv"), seed=0, schema=SCHEMA)


@pytest.mark.parametrize(("line", "fields"), [("1,2.0,30,u1,t1,extra", 6), ("1,2.0", 2)])
def test_ragged_row_names_file_and_line(tmp_path: Path, csv_file: Path, line: str, fields: int) -> None:
    lines = csv_file.read_text().splitlines()
    lines[9] = line
    (tmp_path / "ragged.csv").write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=rf"ragged\.csv:10: expected 5 fields .*got {fields}"):
        load_csv(path=str(tmp_path / "ragged.csv"), seed=0, schema=SCHEMA)


def test_parquet_bad_value_names_the_row(tmp_path: Path) -> None:
    frame = pd.DataFrame({"clicked": [0, 1, 1], "price": ["1", "2", "x"], "age": [1, 2, 3],
                          "user": ["a", "b", "c"], "tags": ["", "p", "q|r"]})
    frame.to_parquet(tmp_path / "bad.parquet")
    with pytest.raises(DataError, match=r"bad\.parquet: row 3: column 'price': expected a finite number"):
        load_parquet(path=str(tmp_path / "bad.parquet"), seed=0, schema=SCHEMA)
    pq.write_table(pa.table({"clicked": [0], "price": [1.0], "age": [1], "user": [["a"]], "tags": ["p"]}),
                   tmp_path / "list.parquet")
    with pytest.raises(DataError, match=r"list\.parquet: column 'user' holds lists; declare it multi_hot"):
        load_parquet(path=str(tmp_path / "list.parquet"), seed=0, schema=SCHEMA)


@pytest.mark.parametrize(("content", "message"), [
    (b"", "file is empty"), (b"\n", "file is empty"),
    (b"clicked,price,age,user,tags\n", "the table has no rows"),
])
def test_empty_csv(tmp_path: Path, content: bytes, message: str) -> None:
    (tmp_path / "e.csv").write_bytes(content)
    with pytest.raises(DataError, match=rf"e\.csv: {message}"):
        load_csv(path=str(tmp_path / "e.csv"), seed=0, schema=SCHEMA)


def test_corrupt_files(tmp_path: Path) -> None:
    packed = write_csv(tmp_path / "cut.csv", table_rows(3000), compress=True)
    packed.write_bytes(packed.read_bytes()[:-200])
    with pytest.raises(DataError, match=r"cut\.csv: .*(truncated|corrupt)"):
        load_csv(path=str(packed), seed=0, schema=SCHEMA)
    (tmp_path / "junk.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(DataError, match=r"junk\.parquet: cannot read as Parquet"):
        load_parquet(path=str(tmp_path / "junk.parquet"), seed=0, schema=SCHEMA)


@pytest.mark.parametrize(("schema", "message"), [
    (None, "need schema="),
    ({"dense": ["price"], "sparse": ["user"]}, "label \\(required\\)"),
    ({"label": "clicked", "sparse": ["user"], "wide": ["x"]}, "expected keys"),
    ({"label": "clicked", "dense": ["price"]}, "at least one sparse feature"),
    ({"label": "clicked", "sparse": [{"multi_hot": True}]}, "mapping with a name"),
    ({"label": "clicked", "sparse": [{"name": "tags", "sep": "|"}]}, "unknown keys sep"),
    ({"label": "clicked", "sparse": [{"name": "tags", "min_count": 0}]}, "min_count >= 1"),
    ({"label": "clicked", "sparse": ["user", "user"]}, "named more than once: user"),
    ([1, 2], "expected a mapping"),
])
def test_bad_schema(csv_file: Path, schema: object, message: str) -> None:
    with pytest.raises(DataError, match=message):
        load_csv(path=str(csv_file), seed=0, schema=schema)


def test_bad_schema_file(tmp_path: Path, csv_file: Path) -> None:
    with pytest.raises(DataError, match=r"nope\.yaml: cannot read the schema"):
        load_csv(path=str(csv_file), seed=0, schema=str(tmp_path / "nope.yaml"))
    (tmp_path / "broken.yaml").write_text("label: [unclosed\n")
    with pytest.raises(DataError, match=r"broken\.yaml: cannot read the schema"):
        load_csv(path=str(csv_file), seed=0, schema=str(tmp_path / "broken.yaml"))


def test_bad_paths(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no such file"):
        load_csv(path=str(tmp_path / "none.csv"), seed=0, schema=SCHEMA)
    with pytest.raises(DataError, match="parquet needs path="):
        load_parquet(seed=0, schema=SCHEMA)
    with pytest.raises(ValueError, match="fractions"):
        load_csv(path=str(write_csv(tmp_path / "f.csv", table_rows())), seed=0, schema=SCHEMA,
                 fractions=(1.0, 0.0, 0.0))


def test_batches_are_torch_tensors(csv_file: Path) -> None:
    batch = next(iter(load_csv(path=str(csv_file), seed=0, schema=SCHEMA).batches("train", 5, shuffle=True)))
    assert batch.dense_features.dtype == torch.float32 and batch.labels.shape == (5,)
    assert batch.sparse_features.keys() == ["user", "tags"]


@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_a_sequential_split_is_file_order_and_the_vocabulary_sees_only_its_train_rows(tmp_path: Path,
                                                                                      kind: str) -> None:
    rows = table_rows(40)
    for i, r in enumerate(rows):
        r["user"] = f"early{i % 3}" if i < 32 else f"late{i}"  # users only the held-out rows have
    if kind == "csv":
        path = write_csv(tmp_path / "t.csv", rows)
    else:
        path = tmp_path / "t.parquet"
        typed = [{**r, "clicked": int(r["clicked"]), "price": float(r["price"]),
                  "age": float(r["age"]) if r["age"] else None} for r in rows]
        pq.write_table(pa.Table.from_pylist(typed), path)
    ds = load_dataset(kind, path=str(path), seed=3, schema=SCHEMA, split="sequential")
    prices = {s: [p for b in ds.batches(s, 8, shuffle=False) for p in b.dense_features[:, 0].tolist()]
              for s in ("train", "val", "test")}
    assert prices == {"train": [i * 0.5 for i in range(32)], "val": [i * 0.5 for i in range(32, 36)],
                      "test": [i * 0.5 for i in range(36, 40)]}
    assert ds.schema.feature("user").num_embeddings == 2 + 3  # the late users are out of vocabulary


def test_bad_split_options_are_refused_before_reading(tmp_path: Path) -> None:
    missing = str(tmp_path / "absent.csv")
    with pytest.raises(DataError, match=r"absent\.csv: no such file"):
        load_csv(path=missing, schema=SCHEMA, split="sequential")
    path = str(write_csv(tmp_path / "t.csv", table_rows(10)))
    with pytest.raises(DataError, match=r"split: expected one of random, sequential, got 'by_day'"):
        load_csv(path=path, schema=SCHEMA, split="by_day")
