"""MovieLens-100K, the embedded default, read from the copy the ``recbole`` wheel ships.

The wheel is installed with ``--no-deps`` and never imported: we only locate its data files
through ``importlib.metadata``. One sample per rating; label = rating >= 4.

Sparse features: user_id, item_id, age, gender, occupation, zip_code, zip3 (first three zip
digits: a coarser region), release_year, genres (multi-hot), hour, weekday.
Dense features: age, release year and rating time, scaled to about [0, 1].
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from autorec.data.base import InMemoryDataset
from autorec.data.schema import DataError, Schema, SparseFeature
from autorec.data.tabular import Jagged, TabularData

FILES = ("ml-100k.inter", "ml-100k.user", "ml-100k.item")
_INSTALL_HINT = "install it with `pip install --no-deps recbole==1.2.1` (make demo does this)"


def locate(distribution: str = "recbole") -> Path:
    """The folder holding ml-100k.{inter,user,item} inside the installed wheel."""
    try:
        files = importlib.metadata.distribution(distribution).files or []
    except importlib.metadata.PackageNotFoundError:
        raise DataError(f"movielens100k needs the {distribution!r} wheel, which ships the data; "
                        f"{_INSTALL_HINT}") from None
    for f in files:
        if str(f).endswith("ml-100k/ml-100k.inter"):
            folder = Path(str(f.locate())).parent
            missing = [name for name in FILES if not (folder / name).is_file()]
            if missing:
                raise DataError(f"{folder}: missing {', '.join(missing)}; {_INSTALL_HINT}")
            return folder
    raise DataError(f"the installed {distribution!r} has no ml-100k files; {_INSTALL_HINT}")


def _read(path: Path, columns: list[str]) -> pd.DataFrame:
    frame = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
    frame.columns = [c.split(":")[0] for c in frame.columns]
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise DataError(f"{path}:1: expected columns {columns}, missing {missing}")
    return frame


def _codes(values: pd.Series) -> tuple[np.ndarray, int]:
    """Ids 1..V for the distinct values (0 is kept for missing or unseen), and V + 1."""
    codes, uniques = pd.factorize(values, sort=True)
    return codes.astype(np.int64) + 1, len(uniques) + 1


def _scaled(values: pd.Series, path: Path, column: str, lenient: bool = False) -> np.ndarray:
    """Min-max scaled numbers, missing ones at the median; ``values`` indexed by file row.

    ``lenient`` takes any non-number as missing: the shipped item file writes unknown release
    years as "unkonwn" and, for one title, "V".
    """
    missing = (values == "") | (pd.to_numeric(values, errors="coerce").isna() if lenient else False)
    numbers = pd.to_numeric(values.where(~missing), errors="coerce")
    bad = values[numbers.isna() & ~missing]
    if len(bad):
        raise DataError(f"{path}:{bad.index[0] + 2}: {column} expected a number, got {bad.iloc[0]!r}")
    filled = numbers.fillna(numbers.median()).to_numpy(np.float64)
    lo, hi = filled.min(), filled.max()
    return ((filled - lo) / (hi - lo if hi > lo else 1.0)).astype(np.float32)


def load_movielens100k(path: str | None = None, seed: int = 0, **options: object) -> InMemoryDataset:
    """The MovieLens-100K dataset with a random 80/10/10 split by ``seed``.

    Args:
        path: a folder with ml-100k.{inter,user,item} in RecBole's layout; default: the wheel's.
        seed: fixes the split.

    Example:
        >>> ds = load_movielens100k(seed=0)
        >>> ds.num_rows("train"), ds.schema.n_dense
        (80000, 3)
    """
    if options:
        raise DataError(f"movielens100k takes no options, got {sorted(options)}")
    folder = Path(path) if path else locate()
    inter = _read(folder / FILES[0], ["user_id", "item_id", "rating", "timestamp"])
    users = _read(folder / FILES[1], ["user_id", "age", "gender", "occupation", "zip_code"])
    items = _read(folder / FILES[2], ["item_id", "release_year", "class"])
    source = folder / FILES[0]
    users["age_scaled"] = _scaled(users["age"], folder / FILES[1], "age")
    items["year_scaled"] = _scaled(items["release_year"], folder / FILES[2], "release_year",
                                   lenient=True)
    inter["time_scaled"] = _scaled(inter["timestamp"], source, "timestamp")
    frame = inter.merge(users, on="user_id", how="left").merge(items, on="item_id", how="left")
    unknown_items = frame["year_scaled"].isna() | frame["age_scaled"].isna()
    if unknown_items.any():
        row = int(np.flatnonzero(unknown_items)[0])
        raise DataError(f"{source}:{row + 2}: user {frame['user_id'][row]!r} or item "
                        f"{frame['item_id'][row]!r} is not in {FILES[1]} / {FILES[2]}")
    ratings = pd.to_numeric(frame["rating"], errors="coerce")
    if ratings.isna().any():
        line = int(np.flatnonzero(ratings.isna())[0]) + 2
        raise DataError(f"{source}:{line}: rating expected a number, got {frame['rating'][line - 2]!r}")
    stamps = pd.to_datetime(pd.to_numeric(frame["timestamp"], errors="coerce"), unit="s")
    frame["hour"] = stamps.dt.hour.astype(str)
    frame["weekday"] = stamps.dt.day_of_week.astype(str)
    frame["zip3"] = frame["zip_code"].str[:3]

    single = ["user_id", "item_id", "age", "gender", "occupation", "zip_code", "zip3",
              "release_year", "hour", "weekday"]
    features, columns = [], []
    for name in single:
        ids, size = _codes(frame[name])
        features.append(SparseFeature(name, size))
        columns.append(Jagged.single(torch.from_numpy(ids)))
    genres = frame["class"].str.split()
    lengths = genres.str.len().to_numpy(np.int64)
    flat = pd.Series([g for row in genres for g in row], dtype=str)
    genre_ids, genre_size = _codes(flat)
    features.append(SparseFeature("genres", genre_size, multi_hot=True))
    columns.append(Jagged.from_lengths(torch.tensor(genre_ids), torch.tensor(lengths)))

    dense = frame[["age_scaled", "year_scaled", "time_scaled"]].to_numpy(np.float32)
    schema = Schema(dense=("age", "release_year", "timestamp"), sparse=tuple(features))
    labels = torch.from_numpy((ratings.to_numpy() >= 4).astype(np.float32))
    data = TabularData(schema, torch.from_numpy(dense), tuple(columns), labels)
    return InMemoryDataset.from_table("movielens100k", data, seed)
