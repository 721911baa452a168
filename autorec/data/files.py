"""Opening data files whatever their compression: gzip is told apart by its magic bytes, not its suffix.

Example:
    >>> import gzip, tempfile
    >>> with tempfile.NamedTemporaryFile(suffix=".txt") as f:
    ...     _ = f.write(gzip.compress(b"1,2")); f.flush()
    ...     is_gzip(f.name), open_binary(f.name).read()
    (True, b'1,2')
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import BinaryIO

GZIP_MAGIC = b"\x1f\x8b"


def is_gzip(path: str | Path) -> bool:
    """Whether ``path`` starts with the gzip magic bytes (whatever its suffix)."""
    with open(path, "rb") as f:
        return f.read(2) == GZIP_MAGIC


def open_binary(path: str | Path) -> BinaryIO:
    """``path`` opened for reading bytes, decompressed when it is gzip."""
    return gzip.open(path, "rb") if is_gzip(path) else open(path, "rb")
