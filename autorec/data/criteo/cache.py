"""A binary column cache of Criteo TSV files: parse once, then train from memory-mapped columns.

Streaming parses every line on every epoch of every trial (about 140k lines/s on one core, a
third of a core at 50k samples/s of training). With ``load_criteo(..., cache=DIR)`` the first
open parses the files once, encodes them exactly as the stream does (the same ids, dense
transform and split of each line) and writes each split's columns as raw little-endian arrays;
every later open, in this process or another trial's, maps them and batches by gathers, as the
in-memory datasets do (what torchrec's Criteo preprocessing does with its ``.npy`` files).

Layout of one entry, ``DIR/<key>/``: ``meta.json`` (format version, the source, row counts, the
id dtype and the schema's table sizes) and per split ``<split>.labels`` (float32 [n]),
``<split>.dense`` (float32 [n, 13]) and ``<split>.ids`` (int32, or int64 past 2^31 ids; [n, 26]).
The key hashes what decides the content: each file's absolute path, size and modification time,
the cut at ``max_rows``, the split rule and seed, and the id mapping (hash size or the
vocabularies), so a changed file or option makes a new entry and never reads a stale one.

An entry is built in a private temporary folder and renamed into place when complete, so a
killed build leaves no half entry, and two
processes building the same key at once both end up reading the one that was renamed first; the
folder a killed build left is removed by the next build of that entry once its process is gone.
When a build finishes, the entries built from files that have since changed or gone are removed
(:func:`prune_stale`): their keys can never be asked for again. Entries of unchanged files
under other options stay until the folder is deleted.

Example:
    >>> from autorec.data.criteo import load_criteo  # doctest: +SKIP
    >>> ds = load_criteo(path="train.txt", cache="~/.cache/autorec/criteo")  # doctest: +SKIP
    >>> batch = next(iter(ds.batches("train", 4096, shuffle=True)))  # doctest: +SKIP
    >>> ds.num_rows("train"), batch.labels.shape  # doctest: +SKIP
    (36672493, torch.Size([4096]))
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import torch
from torchrec.datasets.utils import Batch

from autorec.data.base import SPLITS, RecDataset, check_batches
from autorec.data.criteo.blocks import DataFile
from autorec.data.criteo.parse import DENSE_NAMES, N_DENSE, N_SPARSE, SPARSE_NAMES
from autorec.data.criteo.stream import Reader, to_batch
from autorec.data.schema import DataError, Schema, SparseFeature

FORMAT = 1
COLUMNS = ("labels", "dense", "ids")


def _stats(paths: list[Path]) -> list[list[Any]]:
    """[absolute path, size, modification time in ns] of each file."""
    out = []
    for path in paths:
        stat = path.stat()
        out.append([str(path.resolve()), stat.st_size, stat.st_mtime_ns])
    return out


def cache_key(files: list[DataFile], options: dict[str, Any]) -> str:
    """The hex digest naming an entry: each file's absolute path, size and modification time,
    and the ``options`` that decide the content (split rule, seed, id mapping, ``max_rows``)."""
    stats = _stats([f.path for f in files])
    text = json.dumps({"format": FORMAT, "files": stats, "options": options}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _id_dtype(reader: Reader) -> np.dtype:
    largest = reader.hash_size if reader.vocabs is None else max(len(v) for v in reader.vocabs) + 2
    return np.dtype(np.int32 if largest < 2**31 else np.int64)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _clear_dead_builds(entry: Path) -> None:
    """Remove the temporary folders of this entry's builds whose process no longer runs (a
    killed build) and this process's own."""
    for tmp in entry.parent.glob(f"{entry.name}.tmp-*"):
        pid = tmp.name.rsplit("-", 1)[-1]
        if pid.isdigit() and (int(pid) == os.getpid() or not _alive(int(pid))):
            shutil.rmtree(tmp, ignore_errors=True)


def build(reader: Reader, entry: Path) -> None:
    """Parse and encode every line once into ``entry`` (written aside, then renamed into place)."""
    tmp = entry.with_name(f"{entry.name}.tmp-{os.getpid()}")
    if entry.parent.is_dir():
        _clear_dead_builds(entry)
    try:
        tmp.mkdir(parents=True)
    except OSError as err:
        raise DataError(f"criteo cache: cannot create {tmp}: {err.strerror}; expected a writable "
                        "folder for cache=") from None
    ids_dtype = _id_dtype(reader)
    rows = dict.fromkeys(SPLITS, 0)
    outs: dict[tuple[str, str], BinaryIO] = {}
    try:
        for split in SPLITS:
            for column in COLUMNS:
                outs[split, column] = open(tmp / f"{split}.{column}", "wb")
        for i, offset, data in reader.blocks(0, 1, None):
            parsed = reader.parse(i, offset, data)
            of_lines = reader.assign.of_lines(parsed.offsets, i)
            for s, split in enumerate(SPLITS):
                keep = of_lines == s
                if not keep.any():
                    continue
                labels, dense, ids = reader.encode(parsed.take(keep))
                outs[split, "labels"].write(np.ascontiguousarray(labels, dtype=np.float32).tobytes())
                outs[split, "dense"].write(np.ascontiguousarray(dense, dtype=np.float32).tobytes())
                outs[split, "ids"].write(np.ascontiguousarray(ids, dtype=ids_dtype).tobytes())
                rows[split] += int(keep.sum())
        for out in outs.values():
            out.close()
        sizes = ([reader.hash_size] * N_SPARSE if reader.vocabs is None
                 else [2 + len(v) for v in reader.vocabs])
        meta = {"format": FORMAT, "rows": rows, "ids_dtype": ids_dtype.name, "table_sizes": sizes,
                "files": [str(f.path) for f in reader.files], "gzip": [f.gzip for f in reader.files],
                "sources": _stats([f.path for f in reader.files]),
                "split": reader.assign.describe()}
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
        try:
            tmp.rename(entry)
        except OSError:
            if not (entry / "meta.json").exists():  # not another process's finished entry
                raise
            shutil.rmtree(tmp, ignore_errors=True)  # another process finished first: use its entry
    except BaseException:
        for out in outs.values():
            out.close()
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _stale(entry: Path) -> bool:
    """Whether ``entry`` was built from a file that has since changed or gone: its key can no
    longer be asked for (keys hold each file's size and time), so nothing will read it again."""
    try:
        sources = json.loads((entry / "meta.json").read_text()).get("sources")
    except (OSError, ValueError):
        return False  # not an entry, or one being replaced: left alone
    if not sources:
        return False
    for path, size, mtime_ns in sources:
        try:
            stat = os.stat(path)
        except FileNotFoundError:
            return True
        if (stat.st_size, stat.st_mtime_ns) != (size, mtime_ns):
            return True
    return False


def prune_stale(root: Path) -> list[Path]:
    """Remove the entries of ``root`` whose source files changed or were removed (see
    :func:`_stale`); returns them. A process still reading one keeps its mapped pages (the
    files go when it unmaps them). Entries of unchanged files under other options stay."""
    removed = []
    for entry in root.iterdir():
        if entry.is_dir() and ".tmp-" not in entry.name and _stale(entry):
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


class CachedColumns(torch.utils.data.IterableDataset):
    """Batches of one split gathered from the mapped columns; shuffled by ``seed + epoch``.

    Under W DataLoader workers, worker k makes batches k, k + W, ... of the same order.
    """

    def __init__(self, columns: dict[str, np.ndarray], batch_size: int, *, shuffle: bool,
                 seed: int) -> None:
        super().__init__()
        self.columns, self.batch_size, self.shuffle, self.seed = columns, batch_size, shuffle, seed
        self.epoch = 0

    def __len__(self) -> int:
        return -(-len(self.columns["labels"]) // self.batch_size)

    def __iter__(self) -> Iterator[Batch]:
        n = len(self.columns["labels"])
        order = (np.random.default_rng(self.seed + self.epoch).permutation(n) if self.shuffle
                 else np.arange(n))
        info = torch.utils.data.get_worker_info()
        first, step = (info.id, info.num_workers) if info else (0, 1)
        labels, dense, ids = (self.columns[c] for c in COLUMNS)
        for b in range(first, len(self), step):
            idx = order[b * self.batch_size:(b + 1) * self.batch_size]
            if not self.shuffle:  # a contiguous slice reads the mapped pages in order
                idx = slice(int(idx[0]), int(idx[-1]) + 1)
            yield to_batch(labels[idx], dense[idx], ids[idx].astype(np.int64))


class CachedCriteo(RecDataset):
    """Criteo files served from the column cache entry ``root/key`` (module doc).

    Args:
        root: the cache folder (``~`` expanded; created when missing).
        key: the entry's name (:func:`cache_key`).
        make_reader: builds the reader (files checked, split counted, vocabularies made); called
            only when the entry is missing, to build it.
        min_count: the vocabulary's ``min_count`` (for :meth:`describe`), or None for hashed ids.
    """

    def __init__(self, root: str | Path, key: str, make_reader: Callable[[], Reader], *,
                 name: str = "criteo", min_count: int | None = None) -> None:
        self.name, self.min_count = name, min_count
        root = Path(root).expanduser()
        if root.exists() and not root.is_dir():
            raise DataError(f"criteo cache: {root} is a file; expected a folder for cache=")
        self.entry = root / key
        if not (self.entry / "meta.json").exists():
            build(make_reader(), self.entry)
            prune_stale(root)  # entries of this source's earlier versions are never read again
        self.meta = self._meta()
        self.columns = {s: self._columns(s) for s in SPLITS}
        self.schema = Schema(DENSE_NAMES, tuple(SparseFeature(n, int(size)) for n, size in
                                                zip(SPARSE_NAMES, self.meta["table_sizes"], strict=True)))

    def _meta(self) -> dict[str, Any]:
        path = self.entry / "meta.json"
        try:
            meta = json.loads(path.read_text())
        except (OSError, ValueError) as err:
            raise DataError(f"{path}: unreadable cache entry ({err}); "
                            "delete the folder to rebuild it") from None
        if meta.get("format") != FORMAT or set(meta.get("rows", {})) != set(SPLITS):
            raise DataError(f"{path}: cache format {meta.get('format')!r}, expected {FORMAT}; "
                            "delete the folder to rebuild it")
        return meta

    def _columns(self, split: str) -> dict[str, np.ndarray]:
        n = int(self.meta["rows"][split])
        shapes = {"labels": ((n,), np.float32), "dense": ((n, N_DENSE), np.float32),
                  "ids": ((n, N_SPARSE), np.dtype(self.meta["ids_dtype"]))}
        out = {}
        for column, (shape, dtype) in shapes.items():
            path = self.entry / f"{split}.{column}"
            expected = int(np.prod(shape)) * np.dtype(dtype).itemsize
            size = path.stat().st_size if path.exists() else -1
            if size != expected:
                raise DataError(f"{path}: {size} bytes, expected {expected} ({n} rows of {column}); "
                                "the cache entry is damaged: delete the folder to rebuild it")
            out[column] = (np.memmap(path, dtype=dtype, mode="r", shape=shape) if n
                           else np.zeros(shape, dtype=dtype))
        return out

    def batches(self, split: str, batch_size: int, *, shuffle: bool, seed: int = 0,
                epoch: int = 0) -> CachedColumns:
        check_batches(split, batch_size)
        stream = CachedColumns(self.columns[split], batch_size, shuffle=shuffle, seed=seed)
        stream.epoch = epoch
        return stream

    def num_rows(self, split: str) -> int:
        return int(self.meta["rows"][split])

    def describe(self) -> dict[str, Any]:
        out = super().describe()
        out.update(files=self.meta["files"], gzip=self.meta["gzip"],
                   ids="hashed" if self.min_count is None else f"vocabulary (min_count={self.min_count})",
                   split=self.meta["split"], cache=str(self.entry))
        return out
