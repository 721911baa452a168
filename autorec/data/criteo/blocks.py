"""Criteo files read by blocks of whole lines, so DataLoader workers can share them.

Block j of a file holds the lines that start in bytes [j*B, (j+1)*B). Plain files are read only
at the blocks asked for (:func:`plain_blocks`); a gzip stream cannot seek, so it is decompressed
in order and cut into the same blocks (:func:`stream_blocks`). Line numbers are counted only
when an error needs one (:func:`line_number`); :func:`cut_at_rows` ends the files after their
first n lines (``max_rows``); :func:`line_count` counts a file's lines (a sequential split).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from autorec.data.files import is_gzip, open_binary
from autorec.data.schema import DataError


@dataclass(frozen=True)
class DataFile:
    path: Path
    gzip: bool
    end: int | None = None  # decompressed bytes to read (a max_rows cut); None: to the end

    def size(self) -> int:
        """Bytes to read; only for plain files."""
        return self.path.stat().st_size if self.end is None else self.end


def _natural_key(path: Path) -> list[Any]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", path.name)]


def list_files(path: str | Path | None) -> list[DataFile]:
    if path is None:
        raise DataError("criteo needs path=: a Criteo TSV file (plain or gzip) or a directory of them")
    root = Path(path)
    if root.is_dir():
        paths = sorted((p for p in root.iterdir() if p.is_file() and not p.name.startswith(".")),
                       key=_natural_key)
        if not paths:
            raise DataError(f"{root}: directory holds no files")
    elif root.is_file():
        paths = [root]
    else:
        raise DataError(f"{root}: no such file or directory")
    return [DataFile(p, is_gzip(p)) for p in paths]


def gzip_error(file: DataFile, offset: int, err: Exception) -> DataError:
    return DataError(f"{file.path}: truncated or corrupt gzip stream after {offset} decompressed bytes "
                     f"({type(err).__name__}: {err})")


def line_number(file: DataFile, offset: int) -> int:
    """1-based number of the line starting at byte ``offset`` (counted on demand: errors only)."""
    newlines, done = 0, 0
    with open_binary(file.path) as f:
        while done < offset:
            piece = f.read(min(1 << 20, offset - done))
            if not piece:
                break
            newlines += piece.count(b"\n")
            done += len(piece)
    return newlines + 1


def _next_line_start(f: BinaryIO, start: int) -> int:
    """Offset of the first line starting at or after ``start`` (> 0) in a seekable file."""
    f.seek(start - 1)
    pos = start - 1
    while piece := f.read(1 << 16):
        i = piece.find(b"\n")
        if i >= 0:
            return pos + i + 1
        pos += len(piece)
    return pos


def _rest_of_line(f: BinaryIO) -> bytes:
    """Bytes from the current position through the next newline (or the end of the file)."""
    parts = []
    while piece := f.read(1 << 16):
        i = piece.find(b"\n")
        if i >= 0:
            parts.append(piece[:i + 1])
            break
        parts.append(piece)
    return b"".join(parts)


def plain_blocks(file: DataFile, block_bytes: int, order: Sequence[int]) -> Iterator[tuple[int, bytes]]:
    """(offset, lines) of blocks ``order``: block j holds the lines starting in [j*B, (j+1)*B)."""
    end = file.size()
    with open(file.path, "rb") as f:
        for j in order:
            start, stop = j * block_bytes, min((j + 1) * block_bytes, end)
            first = 0 if j == 0 else _next_line_start(f, start)
            if first >= stop:
                continue
            f.seek(first)
            data = f.read(stop - first)
            if not data.endswith(b"\n"):
                data += _rest_of_line(f)
            yield first, data


def stream_blocks(file: DataFile, block_bytes: int) -> Iterator[tuple[int, int, bytes]]:
    """(block index, offset, lines) of every block of a stream, in order (same blocks as above)."""
    pending, base = bytearray(), 0  # pending starts at a line start, at offset base
    with open_binary(file.path) as f:
        eof = False
        while not eof:
            try:
                piece = f.read(block_bytes)
            except (EOFError, OSError, zlib.error) as err:
                raise gzip_error(file, base + len(pending), err) from None
            pending += piece
            eof = not piece
            if file.end is not None and base + len(pending) >= file.end:
                del pending[file.end - base:]
                eof = True
            while pending:
                j = base // block_bytes
                # The block's last line is the one holding byte (j+1)*B - 1.
                cut = pending.find(b"\n", max((j + 1) * block_bytes - 1 - base, 0)) + 1
                if cut == 0:
                    if not eof:
                        break
                    cut = len(pending)
                yield j, base, bytes(pending[:cut])
                del pending[:cut]
                base += cut


# --------------------------------------------------------------------------------------------


def offset_after_lines(file: DataFile, n: int) -> tuple[int | None, int]:
    """(byte offset just past line ``n``, n) of ``file``, or (None, its line count) if it is shorter."""
    lines, done, last = 0, 0, b"\n"
    with open_binary(file.path) as f:
        while True:
            try:
                piece = f.read(1 << 20)
            except (EOFError, OSError, zlib.error) as err:
                raise gzip_error(file, done, err) from None
            if not piece:
                return None, lines + (last != b"\n")  # an unterminated last line counts too
            newlines = piece.count(b"\n")
            if lines + newlines >= n:
                cut = -1
                for _ in range(n - lines):
                    cut = piece.index(b"\n", cut + 1)
                return done + cut + 1, n
            lines, done, last = lines + newlines, done + len(piece), piece[-1:]


def cut_at_rows(files: list[DataFile], max_rows: int) -> list[DataFile]:
    """The files cut after their first ``max_rows`` lines in all."""
    out, left = [], max_rows
    for file in files:
        end, lines = offset_after_lines(file, left)
        out.append(file if end is None else DataFile(file.path, file.gzip, end))
        left -= lines
        if left <= 0:
            break
    return out


def line_count(file: DataFile) -> int:
    """Lines of ``file`` (up to its ``end``, a max_rows cut), an unterminated last one included."""
    lines, done, last = 0, 0, b"\n"
    with open_binary(file.path) as f:
        while file.end is None or done < file.end:
            size = 1 << 20 if file.end is None else min(1 << 20, file.end - done)
            try:
                piece = f.read(size)
            except (EOFError, OSError, zlib.error) as err:
                raise gzip_error(file, done, err) from None
            if not piece:
                break
            lines, done, last = lines + piece.count(b"\n"), done + len(piece), piece[-1:]
    return lines + (last != b"\n")
