import pandas as pd
import pytest
import torch

from autorec.data import DataError, load_dataset
from autorec.data.movielens import FILES, locate


@pytest.fixture(scope="module")
def ml():
    return load_dataset("movielens100k", seed=0)


def test_real_movielens_sizes_and_features(ml):
    assert [ml.num_rows(s) for s in ("train", "val", "test")] == [80_000, 10_000, 10_000]
    names = ml.schema.sparse_names
    for name in ("user_id", "item_id", "age", "gender", "occupation", "zip_code", "release_year",
                 "genres", "hour", "weekday"):
        assert name in names
    assert ml.schema.feature("user_id").num_embeddings == 944  # 943 users + the missing id
    assert ml.schema.feature("genres").multi_hot
    ctr = torch.cat([ml.splits[s].labels for s in ("train", "val", "test")]).mean().item()
    lines = (locate() / FILES[0]).read_text().splitlines()[1:]
    positive = sum(float(line.split("\t")[2]) >= 4 for line in lines)
    assert len(lines) == 100_000 and ctr == pytest.approx(positive / len(lines), abs=1e-6)


def test_genres_stay_jagged_and_complete(ml):
    folder = locate()
    items = pd.read_csv(folder / FILES[2], sep="\t", dtype=str, keep_default_na=False)
    most = int(items.iloc[:, 3].str.split().str.len().max())
    lengths = torch.cat([ml.splits[s].sparse[-1].offsets.diff() for s in ("train", "val", "test")])
    assert int(lengths.max()) == most and most >= 5  # never truncated
    assert int(lengths.min()) >= 1
    batch = next(iter(ml.batches("train", 64, shuffle=False)))
    assert batch.sparse_features["genres"].lengths().numel() == 64


def test_split_depends_only_on_seed(ml):
    again = load_dataset("movielens100k", seed=0)
    other = load_dataset("movielens100k", seed=1)
    assert torch.equal(ml.splits["test"].dense, again.splits["test"].dense)
    assert not torch.equal(ml.splits["test"].dense, other.splits["test"].dense)


def test_missing_wheel_and_bad_files_are_named(tmp_path):
    with pytest.raises(DataError, match="pip install --no-deps recbole"):
        locate("no-such-distribution-xyz")
    folder = locate()
    for name in FILES:
        (tmp_path / name).write_text((folder / name).read_text())
    inter = tmp_path / FILES[0]
    lines = inter.read_text().splitlines()
    fields = lines[3].split("\t")
    fields[2] = "three"
    lines[3] = "\t".join(fields)
    inter.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=r"ml-100k.inter:4: rating expected a number, got 'three'"):
        load_dataset("movielens100k", path=str(tmp_path))
    with pytest.raises(DataError, match="takes no options"):
        load_dataset("movielens100k", bogus=1)
