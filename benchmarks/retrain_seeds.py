"""How much of a gap between two architectures' test AUC is training noise: each architecture
trained with several training seeds (initialisation and batch order) on one fixed data split.

A study records one training per architecture, at the study's seed; when two studies' best
architectures differ by less than the spread of that one number, their order is a coin toss.
This trains each given architecture (a preset name, an ``arch.json``, or ``STUDY_DB:TRIAL`` for
the architecture a study trial recorded) with the study budget at each seed and prints the
test AUCs, their mean and standard deviation, the architecture's FLOPs per sample, and the
paired differences against the first with their standard error (sd of the differences / sqrt n):
a mean difference within about two standard errors is not told apart from noise by this many
seeds.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/retrain_seeds.py --seeds 0 1 2 3 4 \\
        --arch /tmp/tpe/study.db:3 --arch /tmp/dnas/study.db:0
"""

from __future__ import annotations

import argparse
import json
import statistics
import warnings
from pathlib import Path
from typing import Any

import optuna

from autorec.arch import ArchSpec
from autorec.cli import parse_options
from autorec.costs.analytic import arch_cost
from autorec.data import load_dataset
from autorec.presets import PRESETS, preset
from autorec.train.trainer import TrainConfig, Trainer


def load_arch(source: str, schema: Any, dim: int) -> ArchSpec:
    """A preset name, an ``arch.json`` path, or ``STUDY_DB:TRIAL`` (the trial's recorded arch)."""
    if source in PRESETS:
        return preset(source, schema, dim=dim)
    db, sep, number = source.rpartition(":")
    if sep and number.isdigit() and Path(db).is_file():
        storage = f"sqlite:///{Path(db).resolve()}"
        (name,) = optuna.get_all_study_names(storage)
        trial = optuna.load_study(study_name=name, storage=storage).trials[int(number)]
        if "arch" not in trial.user_attrs:
            raise SystemExit(f"{source}: trial {number} of study {name!r} recorded no architecture")
        return ArchSpec.from_dict(trial.user_attrs["arch"])
    path = Path(source)
    if not path.is_file():
        raise SystemExit(f"--arch {source!r}: expected a preset ({', '.join(PRESETS)}), an arch.json "
                         f"file or STUDY_DB:TRIAL")
    return ArchSpec.from_dict(json.loads(path.read_text()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arch", action="append", required=True,
                        help="repeatable; the first is the reference")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--data", default="movielens100k")
    parser.add_argument("--data-seed", type=int, default=0, help="the split stays at this seed")
    parser.add_argument("--data-opt", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--dim", type=int, default=16, help="D of preset architectures")
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--patience", type=int, default=2)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    dataset = load_dataset(args.data, seed=args.data_seed, **parse_options(args.data_opt))
    specs = {source: load_arch(source, dataset.schema, args.dim) for source in args.arch}
    aucs: dict[str, list[float]] = {source: [] for source in specs}
    for seed in args.seeds:
        for source, spec in specs.items():
            config = TrainConfig(epochs=args.epochs, batch_size=args.batch_size, seed=seed,
                                 patience=args.patience, progress=False)
            fit = Trainer(spec, dataset, config).fit()
            aucs[source].append(fit.test["auc"])
            print(f"seed {seed} {source}: test AUC {fit.test['auc']:.4f} (val {fit.val['auc']:.4f})",
                  flush=True)
    reference = args.arch[0]
    for source, values in aucs.items():
        layers = [layer.kind for layer in specs[source].layers]
        sd = statistics.stdev(values) if len(values) > 1 else 0.0
        flops = arch_cost(specs[source]).forward_flops
        line = (f"{source} ({'+'.join(layers)}, over-arch {list(specs[source].over_arch)}, "
                f"{flops / 1e6:.2f} MFLOPs): mean {statistics.mean(values):.4f} sd {sd:.4f} "
                f"over {len(values)} seeds")
        if source != reference:
            diffs = [a - b for a, b in zip(values, aucs[reference], strict=True)]
            wins = sum(d >= 0 for d in diffs)
            se = statistics.stdev(diffs) / len(diffs) ** 0.5 if len(diffs) > 1 else float("nan")
            line += (f"; minus the first: mean {statistics.mean(diffs):+.4f} (se {se:.4f}), "
                     f">= it at {wins} of {len(diffs)} seeds")
        print(line)
    print(json.dumps({"seeds": args.seeds, "test_auc": aucs}))


if __name__ == "__main__":
    main()
