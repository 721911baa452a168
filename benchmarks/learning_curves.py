"""Learning curves of a one-shot study's candidates over one epoch: where the families part.

Trains the architectures of the given trials of a one-shot study (``oneshot_vs_tpe``'s ``--stage
oneshot`` runs) stand-alone for one epoch of the study's trial batch (the final training's first
epoch, the one every final on the ``scale`` workload keeps), and every ``--every`` steps scores the
first ``--val-samples`` validation samples, so a re-rank horizon's order can be read against the
epoch's end, and a rule over the curve's early part (its slope, say) tested against it.
Used for issue 20 (BENCHMARKS.md, "One-shot search against TPE at scale")::

    .venv/bin/python -m benchmarks.learning_curves --tag _o3t --seed 1 --trials 144,164

``--warm`` starts each candidate from the study's trained supernet: its tables take the rows and
columns the candidate's path read there, its projections and dense arch theirs
(:func:`autorec.supernet.warm.warm_embeddings`); the interaction layers and over-arch start fresh.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import time
import warnings
from pathlib import Path
from typing import Any

import optuna

from autorec.arch import ArchSpec
from autorec.train.trainer import TrainConfig, Trainer
from benchmarks.oneshot_studies import add_candidate_arguments, open_record


class CurveTrainer(Trainer):
    """A :class:`Trainer` that scores the validation prefix every ``every`` steps:
    ``points`` holds (step, val AUC, val logloss, mean training loss of those steps, seconds of
    training so far, the scoring's seconds excluded)."""

    def __init__(self, *args: Any, every: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.every, self.steps, self.points, self._losses = every, 0, [], []
        self._train_s, self._since = 0.0, time.perf_counter()

    def train_step(self, batch: Any) -> tuple[float, int]:
        out = super().train_step(batch)
        self.steps += 1
        self._losses.append(out[0])
        if self.steps % self.every == 0:
            self.score()
        return out

    def score(self) -> None:
        """Add the point of the steps trained so far (none if it is there already)."""
        if self.points and self.points[-1]["step"] == self.steps:
            return
        self._train_s += time.perf_counter() - self._since
        val = self.evaluate("val")
        self.points.append({"step": self.steps, "val_auc": val["auc"], "val_logloss": val["logloss"],
                            "train_loss": statistics.fmean(self._losses) if self._losses else float("nan"),
                            "seconds": self._train_s})
        self._losses = []
        self._since = time.perf_counter()


def without(arch: dict[str, Any], features: list[str]) -> dict[str, Any]:
    """``arch`` (an ArchSpec's dict) with ``features`` dropped: taken out of their tables (a table
    left empty goes) and listed in ``dropped``; a name the architecture does not read is refused
    (SystemExit naming ``--drop``).

    Example:
        >>> arch = {"tables": [{"name": "t_a", "features": ["a"]}, {"name": "t_b", "features": ["b"]}]}
        >>> without(arch, ["b"])
        {'tables': [{'name': 't_a', 'features': ['a']}], 'dropped': ['b']}
    """
    read = {f for table in arch["tables"] for f in table["features"]}
    unknown = [f for f in features if f not in read]
    if unknown:
        raise SystemExit(f"--drop: {unknown} are not features the architecture reads ({sorted(read)})")
    tables = [{**t, "features": [f for f in t["features"] if f not in features]} for t in arch["tables"]]
    return {**arch, "tables": [t for t in tables if t["features"]],
            "dropped": [*arch.get("dropped", []), *features]}


def reshaped(arch: dict[str, Any], width: int | None = None, full_hash: bool = False) -> dict[str, Any]:
    """``arch`` (an ArchSpec's dict) with every table at ``width`` (None: as it is) and, with
    ``full_hash``, every hashed table given back all its rows (its ``hash_from`` ids).

    Example:
        >>> arch = {"tables": [{"features": ["a"], "dim": 4, "num_embeddings": 5, "hash_from": 20}]}
        >>> reshaped(arch, width=16, full_hash=True)["tables"]
        [{'features': ['a'], 'dim': 16, 'num_embeddings': 20, 'hash_from': None}]
    """
    tables = []
    for table in arch["tables"]:
        table = {**table, **({"dim": width} if width is not None else {})}
        if full_hash and table.get("hash_from") is not None:
            table.update(num_embeddings=table["hash_from"], hash_from=None)
        tables.append(table)
    return {**arch, "tables": tables}


def candidate(arch: dict[str, Any], base: TrainConfig, *, layers: list[dict[str, Any]] | None = None,
              drop: list[str] | None = None, steps: int | None = None, val_samples: int = 100_000,
              dense_lr: float | None = None, embedding_lr: float | None = None, train_seed: int | None = None,
              width: int | None = None, full_hash: bool = False) -> tuple[ArchSpec, TrainConfig]:
    """A trial's architecture (its interaction ``layers`` replaced, ``drop``'s features dropped,
    every table at ``width`` and with every row under ``full_hash``, where given) and the study's
    training settings for one epoch of it, with the changed rates and seed; a ``layers`` list that
    is no valid ArchSpec's is refused with the reason (SystemExit naming ``--layers``)."""
    if width is not None and width < 1:
        raise SystemExit(f"--width {width}: expected a positive embedding width")
    if layers is not None:
        arch = {**arch, "layers": layers}
    if drop:
        arch = without(arch, drop)
    arch = reshaped(arch, width, full_hash)
    try:
        spec = ArchSpec.from_dict(arch)
    except (KeyError, TypeError, ValueError) as err:
        raise SystemExit(f"--layers {json.dumps(layers)}: not an ArchSpec's layers: {err}") from err
    changes: dict[str, Any] = {"epochs": 1, "max_steps_per_epoch": steps, "evaluate_test": False,
                               "val_samples": val_samples, "progress": False}
    for key, value in (("dense_lr", dense_lr), ("embedding_lr", embedding_lr), ("seed", train_seed)):
        if value is not None:
            changes[key] = value
    return spec, dataclasses.replace(base, **changes)


def trained_supernet(runner: Any) -> Any:
    """The study's supernet training, loaded at its last checkpoint (nothing trains); exits naming
    the folder when the study has not trained it to its steps."""
    from autorec.oneshot.train import OneShotTrainConfig, SupernetTraining

    folder = runner.config.directory / "oneshot" / "supernet"
    training = SupernetTraining(runner.space, runner.dataset,
                                OneShotTrainConfig(**runner.strategy.train_options), folder)
    state = training.resume()
    if state.step < training.config.steps:
        raise SystemExit(f"--warm: the supernet in {folder} is at step {state.step} of "
                         f"{training.config.steps}; run the study's one-shot stage first")
    return training


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_candidate_arguments(parser)
    parser.add_argument("--every", type=int, default=150, help="steps between validation scores")
    parser.add_argument("--val-samples", type=int, default=100_000)
    parser.add_argument("--steps", type=int, help="stop after this many steps (default: an epoch)")
    parser.add_argument("--dense-lr", type=float, default=None, help="the recipe's dense rate, changed")
    parser.add_argument("--embedding-lr", type=float, default=None, help="the embedding rate, changed")
    parser.add_argument("--train-seed", type=int, default=None,
                        help="the training seed (initial weights and batch order), changed")
    parser.add_argument("--layers", type=json.loads, default=None,
                        help='the candidates\' interaction layers replaced by these (a JSON list of an '
                             'ArchSpec\'s layers, e.g. \'[{"kind": "dcnv2", "num_layers": 1, "rank": 0}]\')')
    parser.add_argument("--drop", default="",
                        help="comma-separated features the candidates do not read (e.g. cat_19,cat_20)")
    parser.add_argument("--width", type=int, default=None, help="every table of the candidates at this width")
    parser.add_argument("--full-hash", action="store_true", help="every hashed table given back all its rows")
    parser.add_argument("--warm", action="store_true",
                        help="start each candidate's embeddings from the study's trained supernet")
    parser.add_argument("--key", default="", help="a suffix of this run's keys (e.g. _lr3x)")
    parser.add_argument("--json", type=Path, default=None,
                        help="default benchmarks/results/learning_curves<TAG>_seed<N>.json")
    args = parser.parse_args()
    if args.every < 1:
        raise SystemExit(f"--every {args.every}: expected a positive number of steps")
    warnings.filterwarnings("ignore")
    optuna.logging.set_verbosity(optuna.logging.WARNING)

    study, runner, numbers, out, result = open_record(args, "learning_curves")
    result.update({"every": args.every, "val_samples": args.val_samples})
    warm = trained_supernet(runner) if args.warm else None
    for number in numbers:
        spec, cfg = candidate(study.trials[number].user_attrs["arch"], runner.train_config(None),
                              layers=args.layers, drop=[f for f in args.drop.split(",") if f],
                              steps=args.steps, val_samples=args.val_samples,
                              dense_lr=args.dense_lr, embedding_lr=args.embedding_lr,
                              train_seed=args.train_seed, width=args.width, full_hash=args.full_hash)
        trainer = CurveTrainer(spec, runner.dataset, cfg, every=args.every)
        if warm is not None:
            from autorec.supernet.warm import warm_embeddings

            result[f"trial{number}{args.key}_warm_tensors"] = len(
                warm_embeddings(warm.search.supernet, warm.search.model, trainer.model))
        trainer.fit()
        trainer.score()  # the epoch's end, if it is not on the grid
        kinds = "+".join(layer.kind for layer in spec.layers)
        result[f"trial{number}{args.key}_family"] = kinds
        if args.drop:
            result[f"trial{number}{args.key}_dropped"] = args.drop
        if args.width is not None or args.full_hash:
            result[f"trial{number}{args.key}_width"] = args.width
            result[f"trial{number}{args.key}_full_hash"] = args.full_hash
        if args.layers is None and not args.drop and args.width is None and not args.full_hash:
            result[f"trial{number}_flops"] = study.trials[number].user_attrs["costs"]["flops"]
        result[f"trial{number}{args.key}_dense_lr"] = cfg.dense_lr
        result[f"trial{number}{args.key}_embedding_lr"] = cfg.embedding_lr
        result[f"trial{number}{args.key}_train_seed"] = cfg.seed
        for p in trainer.points:
            for key in ("val_auc", "val_logloss", "train_loss", "seconds"):
                result[f"trial{number}{args.key}_step{p['step']}_{key}"] = p[key]
        print(f"trial {number} ({kinds}): " + ", ".join(
            f"{p['step']}: {p['val_auc']:.4f}" for p in trainer.points), flush=True)
        out.write_text(json.dumps(result, indent=1) + "\n")  # each candidate kept as it finishes


if __name__ == "__main__":
    main()
