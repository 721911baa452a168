"""Issue 20 (and 25): does saving or loading a checkpoint slow the training steps that follow it?

A supernet trained in the one-shot benchmark took 115-122 s for 2000 steps checkpointed every 500
where the same steps took 78 s without checkpoints: after the first ``dcp.save`` through the
one-process gloo group every later step ran about a fifth slower, for the rest of the process.
This benchmark measures it for both trainings that checkpoint, each in a fresh process per mode
(the effect lasts as long as the process):

- ``trainer``: a preset's ``Trainer.train_step`` on the ``scale`` workload (the rung's and the
  final's trainings), its model and optimizer states saved once;
- ``supernet``: the one-shot supernet of ``benchmarks/spaces/scale.yaml`` on one uniformly drawn
  path a step (``SupernetTraining.step``), its states saved once;

and four modes: two of the save, ``group`` (``dcp.save`` through the process group, as both saved
before) and ``no_dist`` (:func:`autorec.train.checkpoints.save_states` in one process, as both
save now), and two of the load that a resumed training makes (the one-shot fine phase resumes
from the supernet's checkpoint), ``load_group`` (``dcp.load`` through the process group, as
:func:`autorec.train.checkpoint_reader.load_state` loaded before) and ``load_no_dist``
(``load_state`` now, without the group in one process); a load mode saves its states without
the group after the warm-up and loads them back between the segments. Each run times
``--segments`` segments of ``--steps`` steps before the save (or load) and as many after it
(after ``--warmup`` steps): the median segment's ms a step, after over before. The modes run
``--repeats`` times, alternating (processes of one configuration differ by up to a third in
their step time before any save, so one run of each says little). Flat keys
``<what>_<mode>_after_over_before`` (the median over repeats; ``..._min``, ``..._max``),
``..._before_ms``, ``..._after_ms`` and ``..._save_s`` (the save's or the load's seconds;
medians) in ``benchmarks/results/checkpoint_slowdown.json``.

    OMP_NUM_THREADS=2 .venv/bin/python -m benchmarks.checkpoint_slowdown [--what trainer,supernet]
    OMP_NUM_THREADS=2 .venv/bin/python -m benchmarks.checkpoint_slowdown --modes load_group,load_no_dist

The save modes' figures are stamped ``checkpoint_slowdown_machine`` / ``_commit``, the load
modes' ``checkpoint_load_machine`` / ``_commit`` (each family's own run).
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch.distributed.checkpoint as dcp

from autorec.data import load_dataset
from autorec.train.checkpoint_reader import SafePlanner, SafeReader, load_state
from autorec.train.checkpoints import save_states
from benchmarks.results_file import RESULTS, merge_results

SPACE = Path(__file__).parent / "spaces" / "scale.yaml"
WHATS, MODES = ("trainer", "supernet"), ("group", "no_dist", "load_group", "load_no_dist")


def _save(states: dict[str, Any], folder: Path, mode: str) -> None:
    """Save ``states`` into ``folder`` through the process group or without it."""
    if mode == "group":
        dcp.save(states, storage_writer=dcp.FileSystemWriter(str(folder), overwrite=True))
    else:
        save_states(states, folder, folder, rank=0, world_size=1)


def _load(states: dict[str, Any], folder: Path, mode: str) -> None:
    """Load ``states`` back from ``folder`` through the process group (``load_group``) or as
    :func:`load_state` does (``load_no_dist``). A weight no step has reached yet has no
    optimizer state in the checkpoint, as when a supernet resumes."""
    if mode == "load_group":
        dcp.load(states, storage_reader=SafeReader(str(folder)), planner=SafePlanner(allow_partial_load=True))
    else:
        load_state(states, folder, allow_partial_load=True)


def _steps(what: str, batch_size: int, samples: int, preset_name: str
           ) -> tuple[Callable[[], None], Callable[[], dict[str, Any]]]:
    """One training step of ``what`` and its states to save."""
    data = load_dataset("synthetic", preset="scale", num_samples=samples)
    if what == "trainer":
        from autorec.presets import preset
        from autorec.train.trainer import TrainConfig, Trainer

        trainer = Trainer(preset(preset_name, data.schema), data,
                          TrainConfig(batch_size=batch_size, progress=False, prefetch=0))
        batches = iter(data.loader("train", batch_size, shuffle=False))
        return (lambda: trainer.train_step(next(batches)),
                lambda: {"model": trainer.model.state_dict(), "optim": trainer.optimizer.state_dict()})
    from autorec.oneshot.train import OneShotTrainConfig, SupernetTraining, TrainState
    from autorec.space import SearchSpace

    training = SupernetTraining(SearchSpace.load(SPACE), data, OneShotTrainConfig(batch_size=batch_size),
                                tempfile.mkdtemp(prefix="checkpoint-slowdown-"))
    train, _ = training.search.batches()
    state = TrainState()

    def step() -> None:
        training.step(next(train), state.step)
        state.step += 1

    return step, lambda: {"model": training.search.model.state_dict(),
                          "optim": training.search.weight_optimizer.state_dict()}


def measure(what: str, mode: str, args: argparse.Namespace) -> dict[str, float]:
    """ms a step before and after one save (or load) of ``what``'s states in ``mode``, in this process."""
    batch_size = args.batch_size if what == "trainer" else args.supernet_batch_size
    needed = (args.warmup + 2 * args.segments * args.steps + 2) * batch_size
    step, states = _steps(what, batch_size, needed * 10 // 8 + batch_size, args.preset)

    def segments() -> list[float]:
        times = []
        for _ in range(args.segments):
            start = time.perf_counter()
            for _ in range(args.steps):
                step()
            times.append((time.perf_counter() - start) / args.steps * 1e3)
        return times

    for _ in range(args.warmup):
        step()
    folder = Path(tempfile.mkdtemp(prefix="checkpoint-slowdown-")) / "ckpt"
    if mode.startswith("load_"):
        _save(states(), folder, "no_dist")  # (a save without the group leaves the steps as they were)
    before = segments()
    start = time.perf_counter()
    if mode.startswith("load_"):
        _load(states(), folder, mode)
    else:
        _save(states(), folder, mode)
    save_s = time.perf_counter() - start
    after = segments()
    b, a = statistics.median(before), statistics.median(after)
    return {"before_ms": b, "after_ms": a, "after_over_before": a / b, "save_s": save_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--what", default=",".join(WHATS), help="trainer, supernet or both")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--preset", default="dhen", help="the trainer's architecture (a preset)")
    parser.add_argument("--batch-size", type=int, default=2048, help="the trainer's (the trial budget's)")
    parser.add_argument("--supernet-batch-size", type=int, default=1024, help="the supernet's")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--segments", type=int, default=6)
    parser.add_argument("--steps", type=int, default=20, help="steps a segment")
    parser.add_argument("--json", default=str(RESULTS / "checkpoint_slowdown.json"))
    parser.add_argument("--one", nargs=2, metavar=("WHAT", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    logging.getLogger().setLevel(logging.ERROR)
    if args.one:  # a child: one measurement in a fresh process
        print(json.dumps(measure(*args.one, args)))
        return
    for name, values, known in (("--what", args.what, WHATS), ("--modes", args.modes, MODES)):
        bad = [v for v in values.split(",") if v not in known]
        if bad:
            raise SystemExit(f"{name}: unknown {bad}; expected some of {', '.join(known)}")
    figures: dict[str, Any] = {"batch_size": args.batch_size, "supernet_batch_size": args.supernet_batch_size,
                               "trainer_preset": args.preset, "repeats": args.repeats}
    print("| training | save | repeat | ms/step before | after | after / before | save, s |\n"
          "|---|---|---|---|---|---|---|")
    for what in args.what.split(","):
        rows: dict[str, list[dict[str, float]]] = {mode: [] for mode in args.modes.split(",")}
        for repeat in range(args.repeats):
            for mode in rows:
                child = [sys.executable, "-m", "benchmarks.checkpoint_slowdown", "--one", what, mode,
                         *(f"--{k.replace('_', '-')}={v}" for k, v in vars(args).items()
                           if k in ("preset", "batch_size", "supernet_batch_size", "warmup", "segments",
                                    "steps"))]
                out = subprocess.run(child, check=True, capture_output=True, text=True).stdout
                row = json.loads(out.strip().splitlines()[-1])
                rows[mode].append(row)
                print(f"| {what} | {mode} | {repeat} | {row['before_ms']:.1f} | {row['after_ms']:.1f} | "
                      f"{row['after_over_before']:.2f} | {row['save_s']:.1f} |", flush=True)
        for mode, runs in rows.items():
            figures.update({f"{what}_{mode}_{k}": statistics.median(r[k] for r in runs) for k in runs[0]})
            ratios = [r["after_over_before"] for r in runs]
            figures.update({f"{what}_{mode}_after_over_before_min": min(ratios),
                            f"{what}_{mode}_after_over_before_max": max(ratios)})
            print(f"{what} {mode}: after / before {figures[f'{what}_{mode}_after_over_before']:.2f} "
                  f"(median of {len(runs)})")
    modes = args.modes.split(",")
    if any(not m.startswith("load_") for m in modes):
        merge_results(Path(args.json), figures, prefix="checkpoint_slowdown")
    if any(m.startswith("load_") for m in modes):
        merge_results(Path(args.json), figures, prefix="checkpoint_load")


if __name__ == "__main__":
    main()
