"""Paired timing of training steps: several Trainers on the same batches, in alternating rounds.

Issue 25's A/B benchmarks (``dense_optimizer``, ``embedding_update``, ``fused_tables``) each
build one Trainer per variant of a preset and time their steps this way, so that a load that
comes and goes on the machine weighs on every variant alike: after warm-up steps, every round
runs ``steps`` steps of each variant on that round's batches (the same for every variant, new in
every round, as a training draws them), the variants' order rotating from one round to the
next. The figures are the medians over rounds.

Each round takes new batches because looping over the same few overfits them: measured on the
Intel Xeon, DCNv2's step went from 85 to 250-540 ms after 20 steps over 5 batches (subnormal
floats; 85 ms throughout with ``torch.set_flush_denormal(True)``, and 80-83 ms over 100 new
batches without it), which made the A/B figures of DCNv2 before 2026-12-01 unreliable.

Example:
    >>> from autorec.data import load_dataset
    >>> data = load_dataset("synthetic", preset="tiny", num_samples=1000)
    >>> runs = {v: Trainer(preset("dlrm", data.schema), data,
    ...                    TrainConfig(batch_size=64, progress=False)) for v in ("a", "b")}
    >>> times = alternating_rounds(runs, rounds=2, steps=2)
    >>> sorted(times), len(times["a"])
    (['a', 'b'], 2)
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import statistics
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from autorec.data import load_dataset
from autorec.presets import preset
from autorec.train.trainer import TrainConfig, Trainer
from benchmarks.results_file import RESULTS, commit, merge_results
from benchmarks.step_profile import figure_key

PRESETS = ("dlrm", "dcnv2", "wukong", "dhen")
WARMUP = 2


def ab_parser(doc: str | None) -> argparse.ArgumentParser:
    """The options every A/B benchmark takes: presets, batch size, rounds, steps, the JSON."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presets", default=",".join(PRESETS))
    parser.add_argument("--batch-size", type=int, default=4096)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--steps", type=int, default=5, help="steps per round and variant")
    parser.add_argument("--json", default=str(RESULTS / "throughput.json"))
    return parser


def scale_data(args: argparse.Namespace) -> Any:
    """The ``scale`` workload, just large enough for the warm-up and timed batches (the train
    split is 80% of it); warnings and log lines silenced for the benchmark's table."""
    warnings.filterwarnings("ignore")
    logging.getLogger().setLevel(logging.ERROR)
    samples = (args.rounds * args.steps + WARMUP + 1) * args.batch_size * 10 // 8
    return load_dataset("synthetic", preset="scale", num_samples=samples)


def preset_trainer(name: str, data: Any, batch_size: int) -> Trainer:
    """``name``'s Trainer at its defaults on ``data``."""
    return Trainer(preset(name, data.schema), data, TrainConfig(batch_size=batch_size, progress=False))


def alternating_rounds(runs: dict[str, Trainer], rounds: int, steps: int) -> dict[str, list[float]]:
    """Seconds per step of each run of ``runs``, one figure per round (see the module).

    The batches are the first run's loader's (shuffled, seed 0): ``WARMUP`` warm-up steps, then
    ``steps`` new batches in every round, the same for every run."""
    first = next(iter(runs.values()))
    needed = rounds * steps + WARMUP
    batches = list(first._batches("train", first.config.batch_size, True, 0))[:needed]
    if len(batches) < needed:
        raise ValueError(f"alternating_rounds: {needed} batches needed ({rounds} rounds x {steps} steps "
                         f"+ {WARMUP} warm-up), the data holds {len(batches)}")
    for run in runs.values():
        for batch in batches[:WARMUP]:
            run.train_step(batch)
    names = list(runs)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            start = time.perf_counter()
            for batch in batches[WARMUP + r * steps: WARMUP + (r + 1) * steps]:
                runs[name].train_step(batch)
            times[name].append((time.perf_counter() - start) / steps)
    return times


def paired_speedup(base: list[float], new: list[float]) -> float:
    """The median over rounds of ``base`` / ``new`` (each round's pair ran minutes apart at most)."""
    return statistics.median(b / n for b, n in zip(base, new, strict=True))


def before_after_figures(key: str, times: dict[str, list[float]]) -> dict[str, float | int]:
    """``<key>_{new,before}_step_ms`` (medians over rounds) and ``<key>_speedup`` (before over new,
    the median of the rounds' ratios, with ``_min`` and ``_max``) from ``times``' "new" and
    "before" seconds per step, and ``<key>_rounds``."""
    ratios = [b / n for b, n in zip(times["before"], times["new"], strict=True)]
    return {f"{key}_new_step_ms": 1e3 * statistics.median(times["new"]),
            f"{key}_before_step_ms": 1e3 * statistics.median(times["before"]),
            f"{key}_speedup": paired_speedup(times["before"], times["new"]),
            f"{key}_speedup_min": min(ratios), f"{key}_speedup_max": max(ratios),
            f"{key}_rounds": len(ratios)}


def before_after_main(doc: str | None, before: type[Trainer], prefix: str, presets: str,
                      autocast: str, alone: Callable[[int, str], dict[str, float]] | None = None,
                      new: type[Trainer] = Trainer) -> None:
    """A before/after benchmark's main: a ``new`` Trainer (the default one unless given) and a
    ``before`` one (the form before a change) of each preset on the scale workload, in
    alternating rounds; prints and
    merges :func:`before_after_figures` under ``<prefix>_<preset>[_dim<D>][_<autocast>]`` (with
    ``<that key>_commit``, the commit it was measured at). With
    ``alone``, first the changed part timed on its own (``alone(repeats, autocast)``'s figures, merged
    too; ``--repeats``, 0 to skip it), and ``--no-steps`` skips the steps."""
    parser = ab_parser(doc)
    parser.set_defaults(presets=presets, rounds=12)
    parser.add_argument("--autocast", choices=("off", "bf16"), default=autocast)
    parser.add_argument("--dim", type=int, default=None, help="the embedding width D (default: the preset's)")
    if alone is not None:
        parser.add_argument("--repeats", type=int, default=20,
                            help="timings of the part alone, each way (0: not timed, its figures kept)")
        parser.add_argument("--no-steps", action="store_true", help="only the part alone")
    args = parser.parse_args()
    timed_alone = alone is not None and args.repeats > 0
    figures: dict[str, Any] = alone(args.repeats, args.autocast) if timed_alone else {}
    if timed_alone:
        figures[f"{prefix}{'_bf16' if args.autocast == 'bf16' else ''}_alone_commit"] = commit()
    if not getattr(args, "no_steps", False):
        sizes = {} if args.dim is None else {"dim": args.dim}
        data = scale_data(args)
        for name in args.presets.split(","):
            config = TrainConfig(batch_size=args.batch_size, progress=False, autocast=args.autocast)
            runs = {"new": new(preset(name, data.schema, **sizes), data, config),
                    "before": before(preset(name, data.schema, **sizes), data, config)}
            key = figure_key(f"{prefix}_{name}", args.autocast, args.dim)
            figures |= before_after_figures(key, alternating_rounds(runs, args.rounds, args.steps))
            figures[f"{key}_commit"] = commit()  # its own: runs of other presets or precisions keep theirs
    figures[f"{prefix}_threads"] = torch.get_num_threads()
    for name, value in figures.items():
        print(f"{name:44s} {value:.3f}" if isinstance(value, float) else f"{name:44s} {value}")
    merge_results(Path(args.json), figures, prefix=prefix)


def native_against_torch(prefix: str, op: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor,
                         upstream: torch.Tensor, disabled: Callable[[], Any],
                         repeats: int, autocast: str = "off") -> dict[str, float]:
    """``op``'s forward and backward on ``x`` alone, on a compiled kernel ("native") and with it
    ``disabled`` ("torch"), in alternating repeats after 3 of warm-up: ``<prefix>[_bf16]_alone_
    <way>_{fwd,bwd}_ms`` (medians) and ``<prefix>[_bf16]_alone_speedup`` (torch's forward +
    backward over native's); with ``autocast`` bf16, both under CPU autocast (and ``_bf16`` in
    the keys)."""
    ways = {"native": contextlib.nullcontext, "torch": disabled}
    times: dict[str, list[tuple[float, float]]] = {way: [] for way in ways}
    if autocast == "bf16":
        prefix += "_bf16"
    for repeat in range(repeats + 3):
        for way, context in ways.items():
            leaf = x.clone().requires_grad_()
            with context(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast == "bf16"):
                start = time.perf_counter()
                out = op(leaf)
                mid = time.perf_counter()
                out.backward(upstream)
                end = time.perf_counter()
            if repeat >= 3:
                times[way].append((mid - start, end - mid))
    figures = {}
    for way, pairs in times.items():
        figures[f"{prefix}_alone_{way}_fwd_ms"] = 1e3 * statistics.median(p[0] for p in pairs)
        figures[f"{prefix}_alone_{way}_bwd_ms"] = 1e3 * statistics.median(p[1] for p in pairs)
    total = {way: figures[f"{prefix}_alone_{way}_fwd_ms"] + figures[f"{prefix}_alone_{way}_bwd_ms"]
             for way in ways}
    figures[f"{prefix}_alone_speedup"] = total["torch"] / total["native"]
    return figures
