"""The one on-disk form of the sharding models (the cost model and the planner's policy): a
directory holding ``<name>.json`` (the format tag, sizes, metadata) and ``<name>.safetensors``
(the weights), read with errors that name the file at fault and the command that writes it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from torch import nn


def read_config(path: str | Path, config: str, weights: str, fmt: str, error: type[Exception],
                how_to_make: str) -> tuple[dict[str, Any], Path, Path]:
    """``(config dict, config path, weights path)`` of the saved model in directory ``path``.

    Raises ``error`` naming the missing file (and ``how_to_make`` it), the JSON line at fault, or
    a format tag other than ``fmt``.
    """
    path = Path(path)
    config_path, weights_path = path / config, path / weights
    for p in (config_path, weights_path):
        if not p.is_file():
            raise error(f"{p}: no such file; {how_to_make}")
    try:
        doc = json.loads(config_path.read_text())
    except json.JSONDecodeError as exc:
        raise error(f"{config_path}:{exc.lineno}: not valid JSON: {exc.msg}") from None
    if not isinstance(doc, dict) or doc.get("format") != fmt:
        raise error(f"{config_path}: format: expected {fmt!r}")
    return doc, config_path, weights_path


def load_weights(module: nn.Module, weights_path: Path, config_path: Path,
                 error: type[Exception]) -> None:
    """Load ``weights_path`` into ``module``; weights of other shapes or names raise ``error``."""
    from safetensors.torch import load_file

    try:
        module.load_state_dict(load_file(weights_path))
    except RuntimeError as exc:
        raise error(f"{weights_path}: does not fit {config_path}: {exc}") from None
