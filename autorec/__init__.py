"""autorec: AutoML for large recommendation models (Wukong, DHEN, DLRM, DCNv2 on torchrec).

The public names below are kept stable and few; everything else is reached through its module.
They are imported lazily, so ``import autorec`` stays cheap and the search extras (optuna) are
needed only by the names that use them.

Example:
    >>> import autorec
    >>> ds = autorec.load_dataset("movielens100k")                       # doctest: +SKIP
    >>> result = autorec.train(autorec.preset("wukong", ds.schema), ds)  # doctest: +SKIP
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_PUBLIC = {
    "ArchSpec": "autorec.arch",
    "TableSpec": "autorec.arch",
    "build_model": "autorec.models",
    "preset": "autorec.presets",
    "load_dataset": "autorec.data",
    "Trainer": "autorec.train.trainer",
    "TrainConfig": "autorec.train.trainer",
    "train": "autorec.train.trainer",
    "SearchSpace": "autorec.space",
    "StudyConfig": "autorec.study",
    "run_study": "autorec.study",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'autorec' has no attribute {name!r}")
