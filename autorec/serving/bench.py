"""Latency percentiles, throughput and AUC of an exported model's forms.

Requests are real rows: consecutive batches of a dataset split (validation by default),
converted once into the program's tensors (``dense [B, n_dense]``, ``values [N]``,
``lengths [F, B]``) and replayed in turn. Each form serves them one at a time, single stream,
under ``torch.inference_mode``, after a warm-up; every call is timed on its own, so p50 and p99
are percentiles of single requests and throughput is ``batch_size / mean latency``. Threads
are torch's setting of the process (``torch.get_num_threads()``, recorded).

Quality: each form predicts the whole split and its AUC and logloss are reported with their
change against the eager form's (a quantised form's speed is never shown without its cost).

Example:
    >>> import torch
    >>> lat = measure(lambda x: x * 2, [(torch.ones(4),)], batch_size=4, repeats=20, warmup=2)
    >>> lat.batch_size, lat.p50_ms <= lat.p99_ms
    (4, True)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from autorec.data import RecDataset
from autorec.export import load_arch, program_inputs
from autorec.metrics import binary_metrics
from autorec.serving.forms import FORMS, load_forms

Inputs = tuple[torch.Tensor, ...]


@dataclass(frozen=True)
class Latency:
    """Single-request latency of one form at one batch size (milliseconds), and throughput."""

    batch_size: int
    p50_ms: float
    p99_ms: float
    mean_ms: float
    samples_per_s: float
    requests: int


def measure(fn: Callable[..., Any], inputs: Sequence[Inputs], batch_size: int, repeats: int = 200,
            warmup: int = 20) -> Latency:
    """Time ``repeats`` calls of ``fn`` on ``inputs`` in turn (after ``warmup`` untimed ones)."""
    if not inputs:
        raise ValueError("measure: no requests to replay")
    if repeats < 1 or warmup < 0:
        raise ValueError(f"measure: repeats must be >= 1 and warmup >= 0, got {repeats} and {warmup}")
    times = np.empty(repeats)
    with torch.inference_mode():
        for i in range(warmup):
            fn(*inputs[i % len(inputs)])
        for i in range(repeats):
            args = inputs[i % len(inputs)]
            start = time.perf_counter()
            fn(*args)
            times[i] = time.perf_counter() - start
    mean = float(times.mean())
    return Latency(batch_size, round(float(np.percentile(times, 50)) * 1e3, 4),
                   round(float(np.percentile(times, 99)) * 1e3, 4), round(mean * 1e3, 4),
                   round(batch_size / mean, 1), repeats)


def requests(out_dir: str | Path, dataset: RecDataset, batch_size: int, count: int = 32,
             split: str = "val") -> list[Inputs]:
    """Up to ``count`` consecutive full batches of ``split`` as the program's tensors."""
    spec = load_arch(out_dir)
    found: list[Inputs] = []
    for batch in dataset.batches(split, batch_size, shuffle=False):
        if batch.labels.numel() < batch_size:
            break
        found.append(program_inputs(spec, batch.dense_features, batch.sparse_features))
        if len(found) == count:
            break
    if not found:
        raise ValueError(f"split {split!r} of {dataset.name!r} has fewer than {batch_size} rows: "
                         "no full request of that batch size")
    return found


def split_quality(fn: Callable[..., torch.Tensor], out_dir: str | Path, dataset: RecDataset,
                  split: str = "val", batch_size: int = 8192) -> dict[str, float]:
    """AUC, logloss and the rest of :func:`~autorec.metrics.binary_metrics` of ``fn`` on ``split``."""
    spec = load_arch(out_dir)
    labels, probs = [], []
    with torch.inference_mode():
        for batch in dataset.batches(split, batch_size, shuffle=False):
            logits = fn(*program_inputs(spec, batch.dense_features, batch.sparse_features))
            probs.append(torch.sigmoid(logits.float()).numpy())
            labels.append(batch.labels.numpy())
    return binary_metrics(np.concatenate(labels), np.concatenate(probs))


def serve_bench(out_dir: str | Path, dataset: RecDataset, batch_sizes: Sequence[int] = (1, 64, 512),
                forms: tuple[str, ...] = FORMS, repeats: int = 200, warmup: int = 20,
                split: str = "val") -> dict[str, Any]:
    """Latency of every form at every batch size, and every form's quality on ``split``.

    Returns ``{"threads", "split", "latency": {form: {"batch_<B>": Latency fields}},
    "quality": {form: {"auc", "logloss", ..., "auc_change", "logloss_change"}}}``; changes are
    against the eager form (measured whenever any form is)."""
    loaded = load_forms(out_dir, tuple(dict.fromkeys(("eager", *forms))))
    replay = {b: requests(out_dir, dataset, b, split=split) for b in batch_sizes}
    latency = {name: {f"batch_{b}": asdict(measure(fn, replay[b], b, repeats, warmup)) for b in batch_sizes}
               for name, fn in loaded.items()}
    quality = {name: split_quality(fn, out_dir, dataset, split) for name, fn in loaded.items()}
    for row in quality.values():
        row["auc_change"] = row["auc"] - quality["eager"]["auc"]
        row["logloss_change"] = row["logloss"] - quality["eager"]["logloss"]
    return {"threads": torch.get_num_threads(), "split": split, "latency": latency, "quality": quality}
