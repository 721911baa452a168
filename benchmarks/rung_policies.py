"""Every rung policy of a one-shot run, read from its recorded rung: test AUC against search cost.

A one-shot study of ``benchmarks/oneshot_vs_tpe.py`` with ``final_candidates`` F and
``rung_winner_seeds`` M trains the final's first epoch of F finalists and M - 1 restarts of the
one that led; every rung training keeps its best checkpoint. With a one-epoch final budget
(``--final-epochs 1``) each rung training is a final, so a smaller policy (fewer finalists,
fewer restarts) would have trained a subset of the same trainings, in the same order, with the
same seeds: its winner (by validation AUC, as the rung picks) and its seconds follow from the
record. This tests every rung training's checkpoint once (cached in the study's ``rung_tests``
attribute; the only computation) and writes, per policy (k finalists, m seeds of the leader)
and search seed, the winner's test AUC, the search's seconds (supernet, screen, rescore,
re-rank and the rung's losers) and wall seconds, and their worst over seeds against TPE's
figures of the run's report::

    .venv/bin/python -m benchmarks.rung_policies --tag _k9 --seeds 0,1,2 \\
        --report benchmarks/results/oneshot_intel_k9.json \\
        --json benchmarks/results/rung_policies_intel_k9.json

A policy whose restarts would be of a finalist the run did not restart is left out.
Flat keys: ``k<K>_m<M>_seed<S>_<what>`` and ``k<K>_m<M>_<worst>``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import warnings
from pathlib import Path
from typing import Any

import optuna

from autorec.oneshot.ranking import rung_runs
from autorec.oneshot.run import rung_entry
from benchmarks.oneshot_vs_tpe import TOLERANCE
from benchmarks.results_file import RESULTS, commit, machine

RUNG = "final_rung"


def rung_entries(study: optuna.Study) -> dict[tuple[int, int], optuna.trial.FrozenTrial]:
    """(candidate trial number, training seed) -> its rung training."""
    return {(t.user_attrs["proxy_trial"], t.user_attrs["train_seed"]): t for t in study.trials
            if t.user_attrs.get("stage") == RUNG}


def policy(order: list[int], base_seed: int, val: dict[tuple[int, int], float], k: int,
           m: int) -> tuple[tuple[int, int], list[tuple[int, int]]] | None:
    """(the winning (candidate, seed), every training the policy runs) of ``k`` finalists (the
    first of ``order``, each under ``base_seed``) and ``m`` seeds of the one that led, chosen
    by validation AUC by the rung's own rule (:func:`autorec.oneshot.ranking.rung_runs`); None
    when a training it needs is not in ``val``.

    Example:
        >>> val = {(7, 0): 0.60, (3, 0): 0.62, (3, 1): 0.65}
        >>> policy([7, 3], 0, val, 2, 2)
        ((3, 1), [(7, 0), (3, 0), (3, 1)])
        >>> policy([7, 3], 0, val, 1, 1)
        ((7, 0), [(7, 0)])
        >>> policy([7, 3], 0, val, 1, 2) is None  # candidate 7 was never restarted
        True
    """
    chosen = rung_runs(order[:k], 1, m, lambda run: val.get((run[0], base_seed + run[1])))
    if chosen is None:
        return None
    (number, restart), runs = chosen
    return (number, base_seed + restart), [(n, base_seed + r) for n, r in runs]


def test_aucs(config: Any, study: optuna.Study, entries: dict[tuple[int, int], Any],
              log: Any = print) -> dict[str, float]:
    """"<candidate>-<seed>" -> the test AUC of that rung training's best checkpoint (cached in the
    study's ``rung_tests`` attribute)."""
    from autorec.arch import ArchSpec
    from autorec.study import TrialRunner
    from autorec.train.trainer import Trainer

    done: dict[str, float] = dict(study.user_attrs.get("rung_tests", {}))
    runner = None
    for (number, seed), t in sorted(entries.items()):
        key = f"{number}-{seed}"
        if key in done:
            continue
        runner = runner or TrialRunner(config)
        cfg = dataclasses.replace(runner.train_config(None), seed=seed, progress=False, checkpoint_dir=None)
        trainer = Trainer(ArchSpec.from_dict(t.user_attrs["arch"]), runner.dataset, cfg)
        trainer.load_checkpoint(t.user_attrs["checkpoint"], optimizer=False)
        done[key] = trainer.evaluate("test")["auc"]
        study.set_user_attr("rung_tests", done)
        log(f"{study.study_name}: rung training {key}: test AUC {done[key]:.4f}")
    return done


def main() -> None:
    from benchmarks.final_seeds import open_study

    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path.home() / ".cache" / "autorec-bench" / "oneshot")
    parser.add_argument("--tag", required=True, help="the one-shot studies oneshot<TAG>_seed<N>")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--report", type=Path, required=True,
                        help="the run's oneshot_vs_tpe report: TPE's test AUC and wall, the TE reference")
    parser.add_argument("--archive-dir", type=Path, default=RESULTS / "studies")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        report = json.loads(args.report.read_text())
        tpe_auc, tpe_wall = report["tpe_best_test_auc"], report["tpe_wall_s"]
        reference = report.get("reference_full_training_s") or report["reference_training_s"]
    except (OSError, ValueError, KeyError) as err:
        raise SystemExit(f"--report {args.report}: expected an oneshot_vs_tpe report with tpe_best_test_auc, "
                         f"tpe_wall_s and reference_training_s ({err!r})") from None
    out = args.json or RESULTS / f"rung_policies{args.tag}.json"
    result: dict[str, Any] = {"machine": machine(), "commit": commit(), "report": str(args.report),
                              "tpe_best_test_auc": tpe_auc, "tpe_wall_s": tpe_wall,
                              "reference_training_s": reference, "tolerance": TOLERANCE}
    rows: dict[tuple[int, int], list[dict[str, float]]] = {}
    for seed in [int(s) for s in args.seeds.split(",")]:
        config, study = open_study(args.out, f"oneshot{args.tag}_seed{seed}", args.archive_dir)
        record = study.user_attrs["oneshot"]
        entries = rung_entries(study)
        tests = test_aucs(config, study, entries)
        val = {key: t.user_attrs["metrics"]["val"]["auc"] for key, t in entries.items()}
        base_seed = min(s for _, s in entries)
        order = [n for n in record["final_order"] if (n, base_seed) in val]
        before = (record["supernet"]["seconds"] + record.get("search_seconds", 0.0)
                  + record.get("rescore_seconds", 0.0) + record.get("rerank_seconds", 0.0))
        final_extra = record["final_seconds"] - record["rung_seconds"][
            _name(record["rung_winner"], record["rung_winner_seed"], base_seed)]
        for k in range(1, len(order) + 1):
            for m in range(1, len(entries) + 1):
                chosen = policy(order, base_seed, val, k, m)
                if chosen is None:
                    continue
                winner, runs = chosen
                seconds = {r: record["rung_seconds"][_name(*r, base_seed)] for r in runs}
                search = before + sum(s for r, s in seconds.items() if r != winner)
                row = {"test_auc": tests[f"{winner[0]}-{winner[1]}"], "search_s": search,
                       "wall_s": search + seconds[winner] + final_extra,
                       "train_equivalents": search / reference}
                rows.setdefault((k, m), []).append(row)
                result.update({f"k{k}_m{m}_seed{seed}_{key}": v for key, v in row.items()})
    for (k, m), per_seed in sorted(rows.items()):
        worst = min(r["test_auc"] for r in per_seed)
        met = sum(r["test_auc"] >= tpe_auc - TOLERANCE for r in per_seed)
        result.update({f"k{k}_m{m}_seeds": len(per_seed), f"k{k}_m{m}_test_auc_min": worst,
                       f"k{k}_m{m}_seeds_auc_met": met,
                       f"k{k}_m{m}_wall_ratio_max": max(r["wall_s"] for r in per_seed) / tpe_wall,
                       f"k{k}_m{m}_train_equivalents_max": max(r["train_equivalents"] for r in per_seed)})
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if "_seed" not in k or k.endswith("seeds")}, indent=1))


def _name(number: int, seed: int, base_seed: int) -> str:
    """The rung's name of a training (its folder and ``rung_seconds`` key)."""
    return rung_entry(number, seed - base_seed, base_seed)


if __name__ == "__main__":
    main()
