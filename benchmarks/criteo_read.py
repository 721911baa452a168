"""Criteo TSV reading throughput and memory: ``load_criteo(...).loader("train", 4096, ...)``.

Writes a Criteo-layout TSV of the requested size (realistic: Kaggle's per-feature cardinalities
and empty-field rates, skewed id frequencies, heavy-tailed counts; about 240 bytes a line) under
``--dir`` (default benchmarks/out/criteo, ignored by git; reused when it is already there), then
streams the train split once and reports rows/s, MB/s of file scanned, and the resident memory of
the process and its DataLoader workers ("mem": PSS summed, sampled every 20 ms) and the main
process's peak RSS (VmHWM, exact): their peaks over the first 10% of the rows against their peaks
over the whole run show whether memory stays flat.

    .venv/bin/python benchmarks/criteo_read.py --size 200MB
    .venv/bin/python benchmarks/criteo_read.py --size 1GB --workers 2

Prints a Markdown table row for BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shlex
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autorec.data.criteo import load_criteo
from benchmarks.results_file import machine

# Criteo Kaggle: distinct values per categorical feature and share of empty fields per column.
CARDINALITIES = [1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683, 8351593, 3194,
                 27, 14992, 5461306, 10, 5652, 2173, 4, 7046547, 18, 15, 286181, 105, 142572]
CAT_EMPTY = [0, 0, 0.034, 0.034, 0, 0.12, 0, 0, 0, 0, 0, 0.034, 0, 0, 0, 0.034, 0, 0, 0.44, 0.44,
             0.034, 0.76, 0, 0.034, 0.44, 0.44]
INT_EMPTY = [0.45, 0, 0.21, 0.22, 0.03, 0.22, 0.04, 0.0005, 0.04, 0.45, 0.04, 0.77, 0.22]
CTR = 0.256
ROWS_PER_CHUNK = 100_000
_MAX_INT = 10**6
_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


def _mix32(x: np.ndarray, salt: int) -> np.ndarray:
    x = (x.astype(np.uint64) + np.uint64(salt * 0x9E3779B97F4A7C15 % 2**64))
    with np.errstate(over="ignore"):
        x ^= x >> np.uint64(33)
        x *= np.uint64(0xFF51AFD7ED558CCD)
        x ^= x >> np.uint64(33)
    return (x & np.uint64(0xFFFFFFFF)).astype(np.uint32)


def _hex8(ids: np.ndarray) -> np.ndarray:
    """uint32 [n] -> 8-digit lower-case hex as S8 [n]."""
    shifts = np.arange(28, -4, -4, dtype=np.uint32)
    digits = _HEX[(ids[:, None] >> shifts) & np.uint32(15)]
    return np.ascontiguousarray(digits).view("S8").reshape(-1)


def _chunk(rng: np.random.Generator, n: int, int_text: np.ndarray) -> bytes:
    """``n`` Criteo lines, built as fixed-width fields whose padding is then dropped."""
    fields = np.empty((n, 80), dtype="S8")
    fields[:, 1::2] = b"\t"
    fields[:, 79] = b"\n"
    fields[:, 0] = np.where(rng.random(n) < CTR, b"1", b"0")
    for c in range(13):
        counts = np.floor(rng.lognormal(1.2, 1.6, n)).astype(np.int64) - (c == 1) * rng.integers(0, 3, n)
        text = int_text[np.clip(counts, -3, _MAX_INT - 1) + 3]
        fields[:, 2 + 2 * c] = np.where(rng.random(n) < INT_EMPTY[c], b"", text)
    for c, size in enumerate(CARDINALITIES):
        index = np.floor(size * rng.random(n) ** 4).astype(np.int64)  # a few values dominate
        text = _hex8(_mix32(index, c + 1))
        fields[:, 28 + 2 * c] = np.where(rng.random(n) < CAT_EMPTY[c], b"", text)
    return fields.tobytes().replace(b"\x00", b"")


def generate(path: Path, size: int, seed: int = 0) -> dict[str, int]:
    """Write at least ``size`` bytes of Criteo lines to ``path`` (kept and reused); returns its stats."""
    meta_path = path.with_suffix(".json")
    if path.exists() and meta_path.exists():
        meta = json.loads(meta_path.read_text())
        if (meta.get("requested"), meta.get("seed"), meta.get("bytes")) == (size, seed, path.stat().st_size):
            return meta
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    int_text = np.array([str(v).encode() for v in range(-3, _MAX_INT)], dtype="S7")
    written = lines = 0
    with open(path, "wb") as f:
        while written < size:
            n = min(ROWS_PER_CHUNK, max(1000, (size - written) // 200))
            data = _chunk(rng, n, int_text)
            f.write(data)
            written += len(data)
            lines += n
    meta = {"requested": size, "seed": seed, "bytes": written, "lines": lines}
    meta_path.write_text(json.dumps(meta))
    return meta


def _memory_bytes(pid: int) -> int:
    """Proportional set size (shared pages split among their users, so sums over processes are
    right: forked DataLoader workers share most of the parent's pages); RSS where PSS is unknown."""
    for name, key in ((f"/proc/{pid}/smaps_rollup", "Pss:"), (f"/proc/{pid}/status", "VmRSS:")):
        try:
            with open(name) as f:
                for line in f:
                    if line.startswith(key):
                        return int(line.split()[1]) * 1024
        except OSError:
            continue
    return 0


def _peak_rss_bytes() -> int:
    """This process's peak RSS as the kernel counts it (VmHWM): exact, not sampled."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                children = Path(f"/proc/{p}/task/{task}/children").read_text().split()
            except OSError:
                continue
            out.extend(int(c) for c in children)
            todo.extend(int(c) for c in children)
    return out


class MemorySampler(threading.Thread):
    """Samples the memory of this process and its children (PSS, summed); ``peak`` is the largest."""

    def __init__(self, every_s: float = 0.02) -> None:
        super().__init__(daemon=True)
        self.every_s, self.peak, self.done = every_s, 0, threading.Event()

    def current(self) -> int:
        pid = os.getpid()
        return sum(_memory_bytes(p) for p in [pid, *_descendants(pid)])

    def sample(self) -> int:
        """Take a sample now; returns the peak so far."""
        self.peak = max(self.peak, self.current())
        return self.peak

    def run(self) -> None:
        while not self.done.is_set():
            self.sample()
            time.sleep(self.every_s)


def parse_size(text: str) -> int:
    match = re.fullmatch(r"\s*([\d.]+)\s*([KMG]?)B?\s*", text.upper())
    if not match:
        raise argparse.ArgumentTypeError(f"size like 200MB or 1GB, got {text!r}")
    return int(float(match.group(1)) * {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}[match.group(2)])


def measure(path: Path, lines: int, args: argparse.Namespace) -> dict[str, float]:
    ds = load_criteo(path=str(path), seed=0, hash_size=args.hash_size, block_bytes=args.block_bytes)
    expected_train = 0.8 * lines
    sampler = MemorySampler()
    start_mem = sampler.current()
    sampler.start()
    rows, at_10 = 0, None  # peaks over the first 10% of the expected rows
    start = time.perf_counter()
    for batch in ds.loader("train", args.batch_size, shuffle=False, num_workers=args.workers):
        rows += batch.labels.numel()
        if at_10 is None and rows >= 0.1 * expected_train:
            at_10 = (sampler.sample(), _peak_rss_bytes())
    seconds = time.perf_counter() - start
    sampler.done.set()
    sampler.join()
    at_100 = (sampler.sample(), _peak_rss_bytes())
    at_10 = at_10 or at_100
    return {"seconds": seconds, "rows": rows, "start": start_mem, "peak_10": at_10[0], "peak_100": at_100[0],
            "rss_10": at_10[1], "rss_100": at_100[1]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=parse_size, default=parse_size("1GB"), help="e.g. 200MB, 1GB")
    parser.add_argument("--dir", type=Path, default=Path(__file__).resolve().parent / "out" / "criteo")
    parser.add_argument("--workers", type=int, default=1, help="DataLoader workers (0: in-process)")
    parser.add_argument("--batch-size", type=int, default=4096)
    parser.add_argument("--hash-size", type=int, default=1 << 20)
    parser.add_argument("--block-bytes", type=int, default=1 << 20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    path = args.dir / f"criteo_{args.size >> 20}MB_seed{args.seed}.tsv"
    t0 = time.perf_counter()
    meta = generate(path, args.size, args.seed)
    print(f"data: {path} ({meta['bytes'] / 2**20:.0f} MiB, {meta['lines']} lines; "
          f"ready in {time.perf_counter() - t0:.1f} s)", file=sys.stderr)
    r = measure(path, meta["lines"], args)
    mib = meta["bytes"] / 2**20
    command = "python " + " ".join(shlex.quote(a) for a in sys.argv)
    print("| date | machine | file | workers | train rows | s | rows/s | MiB/s scanned | mem start | "
          "peak mem @10% | peak mem @100% | main peak RSS @10% | main peak RSS @100% | command |")
    print("|---" * 14 + "|")
    memory = " | ".join(f"{r[k] / 2**20:.0f} MiB"
                        for k in ("start", "peak_10", "peak_100", "rss_10", "rss_100"))
    print(f"| {datetime.date.today()} | {machine()} | {mib:.0f} MiB, {meta['lines']} lines | "
          f"{args.workers} | {r['rows']} | {r['seconds']:.1f} | {r['rows'] / r['seconds']:,.0f} | "
          f"{mib / r['seconds']:.1f} | {memory} | `{command}` |")


if __name__ == "__main__":
    main()
