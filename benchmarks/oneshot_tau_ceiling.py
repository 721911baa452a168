"""How high can Kendall's tau go on a set of architectures? Their trainings under a second seed.

Issue 20's tau compares the proxy with one stand-alone training per architecture on the trial
budget. When the architectures lie closer together than one training's seed noise, that one
training ranks them no better than a coin: no proxy can reach a high tau against it. This script
takes the architectures a one-shot study trained for its tau (the same pairs as
:func:`benchmarks.oneshot_cross_scores.calibration_pairs`), trains each once more on the same
trial budget and data under another training seed (``--train-seed``), and reports:

- ``retest_tau``: Kendall's tau between the two trainings' validation AUCs (the ceiling: how far a
  perfect ranker of the architectures' expected AUC would agree with one training);
- ``proxy_tau``: the study's own tau (its proxy against the first training), and
  ``proxy_tau_mean``: its proxy against the mean of the two trainings;
- the spread of the trained AUCs and the mean absolute difference between the two trainings;
- each tau again over the pairs of one first layer kind only (``..._within_kind``): the search
  reads its proxy within a kind (kind heads, a finalist per kind) and races kinds by training.

With ``--epochs N`` the second training is on the final's budget instead (N whole epochs, every
step, as the winner's final trains; by default under the first training's own seed, so only the
budget differs): the figures then say how far the trial budget ranks the architectures as full
trainings do (``retest_tau``) and how far the proxy does (``proxy_tau_second``), the question
when the trial budget is too short to separate them.

Each retraining is kept as it ends (``--out-dir``, default under ``~/.cache``; a full-budget one
is also checkpointed every 500 steps and resumes), so a killed run goes on where it stopped. Run
(after the study's tau trainings; about 100 s a training idle, 200-500 s an epoch):
``python -m benchmarks.oneshot_tau_ceiling --tag _k44t --seed 0`` (``--epochs 1``); flat figures
merged into ``benchmarks/results/oneshot_tau_ceiling.json`` under the prefix ``<tag>_seed<i>``
(``<tag>_seed<i>_epochs<N>`` with ``--epochs``).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import math
import statistics
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import TrialState
from scipy.stats import kendalltau

from benchmarks.oneshot_cross_scores import TAU_CACHE, tau_trainings, training_key
from benchmarks.oneshot_tpe_proxy import ROOT
from benchmarks.results_file import RESULTS, merge_results

CACHE = TAU_CACHE


def tau_trials(study: optuna.Study) -> list[tuple[optuna.trial.FrozenTrial, float]]:
    """(the tau training, the proxy score that ranked it) of every architecture ``study`` trained
    for its tau (:func:`~benchmarks.oneshot_cross_scores.tau_trainings`)."""
    rescored = study.user_attrs.get("oneshot", {}).get("rescored", {})
    trials = tau_trainings(study)
    by_number = {t.number: t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))}
    out = []
    for t in trials:
        proxy = t.user_attrs["proxy_trial"]
        scores = rescored.get(str(proxy)) or by_number[proxy].user_attrs["proxy"]
        out.append((t, scores["val_auc"]))
    return out


def within_tau(x: list[float], y: list[float], groups: list[str]) -> float | None:
    """Kendall's tau (tau-a) over the pairs that share a group only: (concordant - discordant) /
    such pairs, a pair tied in x or y counting as neither; None without such pairs. (scipy has no
    stratified tau; these few lines are its definition.) The one-shot search reads its proxy
    within a layer kind and races the kinds by training, so this is the part of tau it uses.

    Example:
        >>> within_tau([1, 2, 3, 4], [1, 2, 4, 3], ["a", "a", "b", "b"])  # a agrees, b does not
        0.0
        >>> within_tau([1, 2, 3], [3, 2, 1], ["a", "b", "c"]) is None
        True
    """
    score = pairs = 0
    for i, j in itertools.combinations(range(len(x)), 2):
        if groups[i] == groups[j]:
            pairs += 1
            score += int(math.copysign(1, x[i] - x[j]) * math.copysign(1, y[i] - y[j])) \
                if x[i] != x[j] and y[i] != y[j] else 0
    return score / pairs if pairs else None


def ceiling(first: list[float], second: list[float], proxy: list[float],
            groups: list[str] | None = None) -> dict[str, Any]:
    """The figures of the module docstring from the two trainings' and the proxy's AUCs; with
    ``groups`` (each architecture's first layer kind) also each tau within the groups
    (:func:`within_tau`, keys ``..._within_kind``).

    Example:
        >>> f = ceiling([0.60, 0.62, 0.64], [0.61, 0.60, 0.65], [0.50, 0.52, 0.51])
        >>> round(f["retest_tau"], 3), round(f["proxy_tau"], 3), round(f["mean_abs_retest_diff"], 3)
        (0.333, 0.333, 0.013)
    """
    mean = [(a + b) / 2 for a, b in zip(first, second, strict=True)]
    within = {} if groups is None else {
        "retest_tau_within_kind": within_tau(first, second, groups),
        "proxy_tau_within_kind": within_tau(proxy, first, groups),
        "proxy_tau_second_within_kind": within_tau(proxy, second, groups)}
    return {**within, "pairs": len(first), "retest_tau": float(kendalltau(first, second).statistic),
            "proxy_tau": float(kendalltau(proxy, first).statistic),
            "proxy_tau_second": float(kendalltau(proxy, second).statistic),
            "proxy_tau_mean": float(kendalltau(proxy, mean).statistic),
            "trained_auc_range": max(first) - min(first),
            "trained_auc_sd": statistics.stdev(first),
            "mean_abs_retest_diff": statistics.fmean(abs(a - b) for a, b in zip(first, second, strict=True))}


def retrain(tag: str, seed: int, train_seed: int | None, root: Path, out_dir: Path,
            epochs: int | None = None) -> dict[str, Any]:
    """Train every tau architecture of study ``oneshot<tag>_seed<seed>`` under ``train_seed``
    (each kept in ``out_dir`` as it ends; one kept is not trained again); the figures. With
    ``epochs``, each on ``epochs`` whole epochs (the final's budget; ``train_seed`` None: the
    first training's seed), checkpointed and resumed; without, on the trial budget under another
    seed (``train_seed`` None: 1)."""
    from autorec.arch import ArchSpec
    from autorec.study import StudyConfig, TrialRunner
    from autorec.train.trainer import Trainer

    name = f"oneshot{tag}_seed{seed}"
    db = root / name / name / "study.db"
    if not db.exists():
        raise SystemExit(f"{db}: no study (run the one-shot stage of {tag} seed {seed} first)")
    study = optuna.load_study(study_name=name, storage=f"sqlite:///{db}")
    pairs = tau_trials(study)
    if len(pairs) < 3:
        raise SystemExit(f"{name}: {len(pairs)} tau trainings; at least 3 are needed")
    if epochs is not None and epochs < 1:
        raise SystemExit(f"--epochs: expected a whole number of epochs >= 1, got {epochs}")
    runner = TrialRunner(StudyConfig.load(root / name / "study.yaml"))
    budget = "" if epochs is None else f"_epochs{epochs}"
    if train_seed is None:
        train_seed = 1 if epochs is None else pairs[0][0].user_attrs.get("train_seed", runner.config.seed)
    kept_path = out_dir / f"{name}_train_seed{train_seed}{budget}.json"
    kept: dict[str, float] = json.loads(kept_path.read_text()) if kept_path.exists() else {}
    for t, _ in pairs:
        if training_key(t) in kept:
            continue
        if epochs is None and t.user_attrs.get("train_seed") == train_seed:
            raise SystemExit(f"--train-seed {train_seed}: the study trained trial {t.number} under that seed")
        folder = out_dir / "checkpoints" / f"{name}{budget}" / str(t.number)
        config = dataclasses.replace(runner.train_config(folder), seed=train_seed)
        if epochs is not None:  # as the winner's final trains: every step of every epoch, resumable
            config = dataclasses.replace(config, epochs=epochs, max_steps_per_epoch=None, resume=True,
                                         checkpoint_every=500, patience=max(config.patience, 2))
        spec = ArchSpec.from_dict(t.user_attrs["arch"])
        result = Trainer(spec, runner.dataset, config).fit()
        kept[training_key(t)] = result.val["auc"]
        kept_path.parent.mkdir(parents=True, exist_ok=True)
        kept_path.write_text(json.dumps(kept, indent=1))
        print(f"trial {t.number}: val AUC {t.user_attrs['metrics']['val']['auc']:.4f} "
              f"(seed {t.user_attrs.get('train_seed')}), {result.val['auc']:.4f} (seed {train_seed})",
              flush=True)
    first = [t.user_attrs["metrics"]["val"]["auc"] for t, _ in pairs]
    second = [kept[training_key(t)] for t, _ in pairs]
    kinds = [t.user_attrs["arch"]["layers"][0]["kind"] for t, _ in pairs]
    return {**ceiling(first, second, [p for _, p in pairs], kinds), "train_seed": train_seed}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tag", required=True, help="the one-shot run (e.g. _k44t)")
    parser.add_argument("--seed", type=int, default=0, help="its search seed")
    parser.add_argument("--train-seed", type=int, default=None,
                        help="the second training's seed (default 1; with --epochs the first's own)")
    parser.add_argument("--epochs", type=int, default=None,
                        help="train the second time on this many whole epochs (the final's budget)")
    parser.add_argument("--root", type=Path, default=ROOT)
    parser.add_argument("--out-dir", type=Path, default=CACHE)
    parser.add_argument("--out", type=Path, default=RESULTS / "oneshot_tau_ceiling.json")
    args = parser.parse_args(argv)
    if not args.tag.startswith("_"):
        parser.error(f"--tag: expected a run's tag, which starts with '_' (as _k44t), got {args.tag!r}")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if args.epochs is not None and args.epochs < 1:
        parser.error(f"--epochs: expected a whole number of epochs >= 1, got {args.epochs}")
    figures = retrain(args.tag, args.seed, args.train_seed, args.root, args.out_dir, args.epochs)
    prefix = f"{args.tag[1:]}_seed{args.seed}" + ("" if args.epochs is None else f"_epochs{args.epochs}")
    for key, value in figures.items():
        shown = f"{value:.4f}" if isinstance(value, float) else value
        print(f"{prefix}_{key:30s} {shown}")
    merge_results(args.out, {f"{prefix}_{k}": v for k, v in figures.items()}, prefix=prefix)


if __name__ == "__main__":
    main()
