"""A Trainer setting that is on by default and a flag away from off, checked the same way for each
(``keep_freed_memory``, ``huge_pages``)."""

from __future__ import annotations

import pytest

from autorec.config.train import TrainSettings
from autorec.train.records import TrainConfig


def check_switch_on_by_default(field: str) -> None:
    """``field`` is True in ``TrainConfig`` and ``TrainSettings``, False where the setting says so,
    a value that is not a bool refused naming it, and ``autorec train --no-<field>`` turns it off
    (so the flag is no store_true that can never be turned off)."""
    from autorec.cli.main import build_parser

    assert getattr(TrainConfig(), field) is True
    assert TrainSettings().to_kwargs()[field] is True
    assert TrainSettings(**{field: False}).to_kwargs()[field] is False
    with pytest.raises(ValueError, match=field):
        TrainSettings(**{field: "sometimes"})
    flag = "--no-" + field.replace("_", "-")
    assert getattr(build_parser().parse_args(["train", flag]), field) is False
    assert getattr(build_parser().parse_args(["train"]), field) is True
