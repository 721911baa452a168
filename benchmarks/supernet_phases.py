"""Issue 20: what a one-shot supernet's restart and its search stages cost its training steps.

Two probes of the ``k58`` run (BENCHMARKS.md), each on the ``scale`` preset and the supernet of
``benchmarks/spaces/scale.yaml`` as ``k55`` trains it (batch 1024, own width columns and hash
rows, a fine phase from step 2000):

- ``skip``: reaching batch ``--start`` of the supernet's training stream, by making and dropping
  the batches before it (what a resumed supernet did) and by skipping them
  (:func:`autorec.supernet.search.forever` with ``start``), ``--rounds`` times, checking both
  give the same batch;
- ``stages``: 100 supernet steps (coarse, then fine) in one process before the kind heads, after
  them, and after ``--paths`` paths are scored on 32,768 validation samples in joined batches:
  whether those stages slow the steps that follow them.

    OMP_NUM_THREADS=2 .venv/bin/python -m benchmarks.supernet_phases skip     # about 1 minute
    OMP_NUM_THREADS=2 .venv/bin/python -m benchmarks.supernet_phases stages   # about 2 minutes

Prints ms per step (or seconds to the batch); nothing is written.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
import warnings

import torch

from autorec.data import load_dataset
from autorec.oneshot.heads import KindHeads
from autorec.oneshot.train import OneShotTrainConfig, SupernetTraining
from autorec.space import SearchSpace
from autorec.supernet.search import forever
from benchmarks.supernet_step import SPACE

BATCH = 1024


def skip(args: argparse.Namespace) -> None:
    data = load_dataset("synthetic", preset="scale", num_samples=args.samples)
    for _ in range(args.rounds):
        start = time.perf_counter()
        stream = forever(data, "train", BATCH, 0)
        for _ in range(args.start):
            next(stream)
        made = next(stream)
        dropped = time.perf_counter() - start
        start = time.perf_counter()
        skipped = next(forever(data, "train", BATCH, 0, start=args.start))
        seconds = time.perf_counter() - start
        if not torch.equal(made.labels, skipped.labels):
            raise SystemExit(f"batch {args.start}: the skipped stream gave another batch than the whole one")
        print(f"to batch {args.start}: made and dropped {dropped:.2f} s, skipped {seconds:.3f} s")


def stages(args: argparse.Namespace) -> None:
    data = load_dataset("synthetic", preset="scale", num_samples=BATCH * 220)
    config = OneShotTrainConfig(batch_size=BATCH, steps=3000, width_columns="own", hash_rows="own",
                                rescale=("dlrm",), shared_paths=0.5, shared_until=2000, fine_embedding_lr=0.3)
    training = SupernetTraining(SearchSpace.load(SPACE), data, config, tempfile.mkdtemp())
    batches = [b for _, b in zip(range(150), data.loader("train", BATCH, shuffle=False), strict=False)]

    def block(first: int, label: str) -> None:
        start = time.perf_counter()
        for i in range(100):
            training.step(batches[i % len(batches)], first + i)
        print(f"{label}: {(time.perf_counter() - start) * 10:.1f} ms/step", flush=True)

    block(0, "coarse")
    start = time.perf_counter()
    KindHeads(training, args.head_steps, tempfile.mkdtemp(), share=1.0).fit()
    print(f"kind heads: {time.perf_counter() - start:.1f} s")
    block(2000, "fine, after the heads")
    scored = training.search.selection_batches(32768)
    generator = torch.Generator().manual_seed(5)
    start = time.perf_counter()
    for _ in range(args.paths):
        path = training.uniform_path(generator)
        training.search.path_auc({c.name: c.values[path[c.name]] for c in training.choices}, scored)
    print(f"{args.paths} paths scored on 32768 samples: {time.perf_counter() - start:.1f} s")
    block(0, "coarse, after the scoring")
    block(2000, "fine, after the scoring")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("probe", choices=["skip", "stages"])
    parser.add_argument("--samples", type=int, default=2_000_000, help="skip: rows of the preset")
    parser.add_argument("--start", type=int, default=2000, help="skip: the batch to reach")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--head-steps", type=int, default=60, help="stages: steps per kind head")
    parser.add_argument("--paths", type=int, default=40, help="stages: paths scored")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    logging.getLogger().setLevel(logging.ERROR)
    (skip if args.probe == "skip" else stages)(args)


if __name__ == "__main__":
    main()
