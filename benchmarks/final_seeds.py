"""The winners' final trainings again under other training seeds: how much of a tested AUC is the draw.

``oneshot_vs_tpe``'s report trains TPE's best-by-validation trial in full with the study's
training seed, the one it was selected on, and each one-shot winner once. On the ``scale``
workload one epoch of the same architecture ends 0.01-0.02 AUC apart under two training seeds
(BENCHMARKS.md), more than the searches' differences, and a best of many trials is partly the
best draw. This trains each winner's architecture on the final budget (``--final-epochs``
epochs, patience 2, every step of each epoch, no checkpoints kept) with each of
``--train-seeds``, and writes each test AUC and the mean over the recorded final and these, so
the two methods can be compared by a winner's expected AUC as well as by the recorded one::

    .venv/bin/python -m benchmarks.final_seeds --tag _k4f2 --seeds 0 --train-seeds 1,2 \\
        --json benchmarks/results/final_seeds_amd_k4f2.json

With ``--next-seeds N`` each winner trains instead under the N training seeds after its recorded
final's own (TPE's: the study's seed; a one-shot study's: its rung winner's), so no winner
repeats its recorded draw when the studies' finals ran under different seeds::

    .venv/bin/python -m benchmarks.final_seeds --tag _k8i --seeds 0,1,2 --tpe-stage tpe_shared \
        --next-seeds 2 --json benchmarks/results/final_seeds_intel_k8i.json

Each training is kept in its study's ``final_seeds`` user attribute as it ends, so a cut run
continues with the trainings not done yet. A study whose database is gone (a new machine's
``~/.cache``) is restored from its archive in ``--archive-dir`` (``oneshot_vs_tpe --stage archive``).
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
from optuna.trial import TrialState

from autorec.study import StudyConfig, TrialRunner, open_storage
from benchmarks.oneshot_reference import final_budget
from benchmarks.results_file import commit, machine
from benchmarks.study_archive import restore_if_gone

RESULTS = Path(__file__).resolve().parent / "results"


def winner(study: optuna.Study, kind: str, final_epochs: int = 3,
           here: str | None = None) -> tuple[dict[str, Any], float]:
    """(the architecture, its recorded final test AUC): a TPE study's final of ``final_epochs``
    epochs (the report's, :func:`~benchmarks.oneshot_vs_tpe.final_attr`), a one-shot study's
    complete ``final`` trial; exits naming the study when there is none, or when ``here`` is
    given and TPE's final was trained on another machine (or names none): the report trains it
    again there, and the figures of two CPUs are not compared."""
    if kind == "tpe":
        from benchmarks.oneshot_vs_tpe import final_attr

        attr = final_attr(final_epochs)
        final = study.user_attrs.get(attr)
        if final is None:
            raise SystemExit(f"{study.study_name}: no {attr!r} training recorded "
                             f"({final_epochs}-epoch final); run oneshot_vs_tpe's report with "
                             f"--final-epochs {final_epochs}")
        if here is not None and final.get("machine") != here:
            raise SystemExit(f"{study.study_name}: its {attr!r} training was recorded on "
                             f"{final.get('machine') or 'an unnamed machine'}, not on this one ({here}); "
                             f"run oneshot_vs_tpe's report here first")
        return study.trials[final["trial"]].user_attrs["arch"], final["test_auc"]
    finals = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
              if t.user_attrs.get("stage") == "final"]
    if not finals:
        raise SystemExit(f"{study.study_name}: no complete final training; run its one-shot stage")
    return finals[0].user_attrs["arch"], finals[0].user_attrs["metrics"]["test"]["auc"]


def recorded_seed(study: optuna.Study, kind: str, config: StudyConfig) -> int:
    """The training seed of the winner's recorded final: a TPE study's own seed (its report trains
    the winner with the study's settings), a one-shot study's rung winner's (its ``oneshot``
    record; the study's seed when the rung had one seed)."""
    if kind == "tpe":
        return config.seed
    return int(study.user_attrs.get("oneshot", {}).get("rung_winner_seed", config.seed))


def open_study(out: Path, name: str, archive_dir: Path) -> tuple[StudyConfig, optuna.Study]:
    """Study ``name`` under ``out``, restored first from ``archive_dir/<name>.jsonl`` when its
    SQLite database is gone; exits naming the study file when there is none."""
    path = out / name / "study.yaml"
    if not path.exists():
        raise SystemExit(f"{name}: no study file at {path}")
    config = StudyConfig.load(path)
    restore_if_gone(config, archive_dir / f"{name}.jsonl")
    return config, optuna.load_study(study_name=config.name, storage=open_storage(config.storage_url))


def seeded_finals(config: StudyConfig, study: optuna.Study, arch: dict[str, Any], seeds: list[int],
                  final_epochs: int, log: Any = print,
                  here: str | None = None) -> dict[str, dict[str, float]]:
    """Training seed (as a string) -> {"test_auc", "val_auc", "best_epoch", "seconds"} of ``arch``
    trained on the final budget with that seed. Each is cached in ``study``'s ``final_seeds``
    attribute under :func:`cache_key` (seed, epochs, machine), so another budget or another CPU
    trains again instead of reading this one's figure."""
    from autorec.arch import ArchSpec
    from autorec.train.trainer import Trainer

    here = here or machine()
    done: dict[str, dict[str, float]] = dict(study.user_attrs.get("final_seeds", {}))
    runner = TrialRunner(config)
    for seed in seeds:
        key = cache_key(seed, final_epochs, here)
        if key in done:
            continue
        cfg = dataclasses.replace(final_budget(runner.train_config(None), final_epochs),
                                  seed=seed, progress=False)
        start = time.perf_counter()
        result = Trainer(ArchSpec.from_dict(arch), runner.dataset, cfg).fit()
        done[key] = {"test_auc": result.test["auc"], "val_auc": result.val["auc"],
                     "best_epoch": result.best_epoch, "seconds": time.perf_counter() - start}
        study.set_user_attr("final_seeds", done)
        log(f"{study.study_name}: training seed {seed}: test AUC {result.test['auc']:.4f}")
    return {str(s): done[cache_key(s, final_epochs, here)] for s in seeds}


def cache_key(seed: int, epochs: int, here: str) -> str:
    """The ``final_seeds`` entry of one seeded final: its training seed, budget and machine.

    Example:
        >>> cache_key(2, 1, "Intel(R) Xeon(R) Processor, 2 cores")
        '2/1ep/Intel(R) Xeon(R) Processor, 2 cores'
    """
    return f"{seed}/{epochs}ep/{here}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path.home() / ".cache" / "autorec-bench" / "oneshot")
    parser.add_argument("--tag", default="", help="the one-shot studies oneshot<TAG>_seed<N>")
    parser.add_argument("--seeds", default="", help="their search seeds (none: TPE's winner only)")
    parser.add_argument("--tpe-stage", default="tpe", help="the TPE study whose winner is trained too")
    parser.add_argument("--train-seeds", default="1,2", help="training seeds besides the recorded final's")
    parser.add_argument("--next-seeds", type=int, default=0,
                        help="instead of --train-seeds: the N seeds after each winner's recorded one")
    parser.add_argument("--archive-dir", type=Path, default=RESULTS / "studies",
                        help="where a study whose database is gone is restored from")
    parser.add_argument("--final-epochs", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    try:
        train_seeds = [int(s) for s in args.train_seeds.split(",") if s]
        search_seeds = [int(s) for s in args.seeds.split(",") if s]
    except ValueError:
        raise SystemExit(f"--train-seeds {args.train_seeds!r} / --seeds {args.seeds!r}: expected "
                         "comma-separated integers") from None
    if args.next_seeds < 0:
        raise SystemExit(f"--next-seeds: expected >= 0, got {args.next_seeds}")
    warnings.filterwarnings("ignore")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    out = args.json or RESULTS / f"final_seeds{args.tag}.json"
    result: dict[str, Any] = json.loads(out.read_text()) if out.exists() else {}
    here = machine()
    result.update({"machine": here, "commit": commit(), "final_epochs": args.final_epochs})
    if args.next_seeds:
        result.pop("train_seeds", None)
        result["next_seeds"] = args.next_seeds
    else:
        result["train_seeds"] = train_seeds
    studies = [("tpe", args.tpe_stage, "tpe")] + [
        (f"oneshot_seed{s}", f"oneshot{args.tag}_seed{s}", "oneshot") for s in search_seeds]
    for key, name, kind in studies:
        config, study = open_study(args.out, name, args.archive_dir)
        arch, recorded = winner(study, kind, args.final_epochs, here)
        seed = recorded_seed(study, kind, config)
        seeds = list(range(seed + 1, seed + 1 + args.next_seeds)) if args.next_seeds else train_seeds
        runs = seeded_finals(config, study, arch, seeds, args.final_epochs, here=here)
        result[f"{key}_recorded_train_seed"] = seed
        aucs = [recorded, *(r["test_auc"] for r in runs.values())]
        result[f"{key}_test_auc_recorded"] = recorded
        for seed, r in runs.items():
            result[f"{key}_test_auc_train_seed{seed}"] = r["test_auc"]
            result[f"{key}_seconds_train_seed{seed}"] = r["seconds"]
            result[f"{key}_best_epoch_train_seed{seed}"] = r["best_epoch"]
        result[f"{key}_test_auc_mean"] = statistics.fmean(aucs)
        result[f"{key}_test_auc_spread"] = max(aucs) - min(aucs)
        out.write_text(json.dumps(result, indent=1) + "\n")
    shots = [result[f"oneshot_seed{s}_test_auc_mean"] for s in search_seeds]
    if shots:
        result["oneshot_test_auc_mean_min"] = min(shots)
        result["mean_gap_to_tpe"] = min(shots) - result["tpe_test_auc_mean"]
        out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
