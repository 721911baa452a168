"""What the epochs after the first buy on the ``scale`` workload, with the tables trained or frozen.

Every final training of issue 20's benchmark kept its first epoch (best epoch 0 in all nine
retrainings, BENCHMARKS.md): the later epochs were paid for and thrown away. This trains given
trials' architectures of a study for ``--epochs`` epochs (every step of each, no early stop),
scoring validation and test after each epoch, and with ``--table-lr-after F`` multiplies every
table's learning rate by F from the second epoch on (0: frozen tables while the dense parts go
on), so one can read whether a later epoch loses by the tables' memorising or the dense parts'::

    .venv/bin/python -m benchmarks.later_epochs --study tpe_shared --trials 13 --table-lr-after 0 \\
        --json benchmarks/results/later_epochs_intel.json

The study's training settings and seed (``--train-seed`` for another); the first epoch is the
same training whatever ``F`` is. Flat keys: ``<study>_trial<N>_seed<S>_tables<F>_epoch<E>_<what>``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
import warnings
from pathlib import Path
from typing import Any

import optuna

from benchmarks.oneshot_reference import final_budget
from benchmarks.oneshot_studies import add_candidate_arguments, open_record


def later_epochs(runner: Any, arch: dict[str, Any], epochs: int, table_lr_after: float, seed: int | None,
                 log: Any = print) -> list[dict[str, float]]:
    """Per epoch: val and test AUC, val logloss, mean training loss, seconds of ``arch`` trained
    for ``epochs`` epochs of every step, the tables' rate times ``table_lr_after`` after the first."""
    from autorec.arch import ArchSpec
    from autorec.train.trainer import Trainer

    cfg = final_budget(runner.train_config(None), epochs)
    cfg = dataclasses.replace(cfg, patience=epochs, track_test=True, progress=False,
                              seed=cfg.seed if seed is None else seed)
    rows: list[dict[str, float]] = []

    def on_epoch(record: Any) -> None:
        rows.append({"val_auc": record.val["auc"], "val_logloss": record.val["logloss"],
                     "test_auc": record.test["auc"], "train_loss": record.train_loss,
                     "seconds": record.seconds})
        log(f"epoch {record.epoch}: {json.dumps(rows[-1])}")
        if record.epoch == 0:
            trainer.scale_table_lr(table_lr_after)

    trainer = Trainer(ArchSpec.from_dict(arch), runner.dataset, cfg, on_epoch=on_epoch)
    trainer.fit()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_candidate_arguments(parser)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--table-lr-after", type=float, default=1.0,
                        help="the tables' learning rate times this after the first epoch (0: frozen)")
    parser.add_argument("--train-seed", type=int, default=None, help="default: the study's")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    if args.epochs < 2 or args.table_lr_after < 0:
        parser.error(f"--epochs {args.epochs} / --table-lr-after {args.table_lr_after}: expected >= 2 "
                     "epochs and a factor >= 0")
    warnings.filterwarnings("ignore")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study, runner, numbers, out, result = open_record(args, "later_epochs")
    seed = runner.config.seed if args.train_seed is None else args.train_seed
    for number in numbers:
        start = time.perf_counter()
        rows = later_epochs(runner, study.trials[number].user_attrs["arch"], args.epochs,
                            args.table_lr_after, seed)
        stem = f"{study.study_name}_trial{number}_seed{seed}_tables{args.table_lr_after:g}"
        for epoch, row in enumerate(rows):
            result.update({f"{stem}_epoch{epoch}_{k}": v for k, v in row.items()})
        result[f"{stem}_seconds"] = time.perf_counter() - start
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
