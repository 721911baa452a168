"""Datasets: every source yields torchrec Batches (dense [B, n_dense], sparse KJT, labels [B]).

We reuse torchrec's own ``Batch`` rather than defining another, so torchrec's train pipelines
(TrainPipelineSparseDist) take our loaders as they are.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from torchrec.datasets.utils import Batch

from autorec.data.base import SPLITS, InMemoryDataset, RecDataset
from autorec.data.schema import DataError, Schema, SparseFeature
from autorec.data.tabular import Jagged, TabularData

# name -> "module:factory"; factories take (path, seed, **options) and return a RecDataset.
DATASETS: dict[str, str] = {
    "movielens100k": "autorec.data.movielens:load_movielens100k",
    "synthetic": "autorec.data.synthetic:load_synthetic",
    "criteo": "autorec.data.criteo:load_criteo",
    "libfm": "autorec.data.libfm:load_libfm",
    "csv": "autorec.data.table:load_csv",
    "parquet": "autorec.data.table:load_parquet",
}


def load_dataset(name: str, path: str | None = None, seed: int = 0, **options: Any) -> RecDataset:
    """Open dataset ``name`` (see ``DATASETS``); ``path`` for file-based ones.

    Example:
        >>> ds = load_dataset("movielens100k", seed=0)
        >>> next(iter(ds.batches("train", 4, shuffle=False))).labels.shape
        torch.Size([4])
    """
    if name not in DATASETS:
        raise DataError(f"unknown dataset {name!r}; expected one of {', '.join(DATASETS)}")
    module, attr = DATASETS[name].split(":")
    factory = getattr(importlib.import_module(module), attr)
    _check_options(name, factory, options)
    return factory(path=path, seed=seed, **options)


def _check_options(name: str, factory: Any, options: dict[str, Any]) -> None:
    """An option the factory does not take is refused by name, with the ones it does take."""
    params = inspect.signature(factory).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return  # the factory checks its own options
    taken = [n for n in params if n not in ("path", "seed")]
    unknown = sorted(set(options) - set(taken))
    if unknown:
        raise DataError(f"dataset {name!r}: unknown option {unknown[0]!r}; expected one of "
                        f"{', '.join(taken)}")


__all__ = ["DATASETS", "SPLITS", "Batch", "DataError", "InMemoryDataset", "Jagged", "RecDataset",
           "Schema", "SparseFeature", "TabularData", "load_dataset"]
