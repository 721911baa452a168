"""The training's progress bar: one rich bar per epoch, with its samples/s, loss and val AUC.

Example:
    >>> with progress_bar(False) as bar:
    ...     bar is None
    True
"""

from __future__ import annotations

import contextlib
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


def progress_bar(enabled: bool) -> Any:
    """A rich :class:`Progress` for the epochs' bars, or a context that gives None (``enabled``
    False: another rank, or a caller that prints its own lines)."""
    if not enabled:
        return contextlib.nullcontext()
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), TextColumn("{task.fields[rate]}"))
