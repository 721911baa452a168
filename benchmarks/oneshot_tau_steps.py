"""Kendall's tau along a supernet's training: its proxy at several steps, against trained AUCs.

Issue 20 asks for tau >= 0.6 between the inherited-weight score and stand-alone trainings. A
run's supernet keeps only its last checkpoint, so whether tau is still rising when the training
stops, or settles, or is the noise of the last paths drawn, cannot be read from it. This script
trains the supernet of a one-shot study (``--tag``, ``--seed``: its ``study.yaml``, the training
options overridden by ``--options``) into a folder of its own, keeps a copy of the checkpoint at
each ``--keep`` step, then scores the architectures that the runs ``--tau-from`` trained for their
taus (pooled over ``--pool-seeds``, :func:`benchmarks.oneshot_cross_scores.pooled_pairs`) on each
kept checkpoint with the shared over-arch, and reports:

- ``<name>_seed<s>_step<N>_tau``: tau of the proxy at step N against the trained AUCs;
- ``..._step<N>_vs_step<M>_tau``: tau between the proxies of two kept steps (how far the proxy
  moves between them);
- ``..._ensemble_tau``: tau of the mean of the kept steps' proxies.

``--start NAME:STEP`` starts from another run's kept checkpoint (``NAME`` under the same
``--out-dir`` and seed) instead of step 0: recipes that share their first steps (``shared_until``)
branch from one. Everything is resumable: the training from its last checkpoint, each step's
scores kept as they are computed.

Run (after the studies named; the dataset is generated and cached on first use, then about 0.05 s
a supernet step and a minute per kept step's scores on 2 cores)::

    python -m benchmarks.oneshot_tau_steps --tag _k47 --seed 1 --name k47 --keep 2000,2500,3000
    python -m benchmarks.oneshot_tau_steps --tag _k47 --seed 1 --name dec --start k47:2000 \\
        --options '{"dense_lr_decay": 1000}' --keep 2500,3000

Figures are merged into ``benchmarks/results/oneshot_tau_steps.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import shutil
import statistics
from pathlib import Path
from typing import Any

import optuna
from scipy.stats import kendalltau

from benchmarks.oneshot_cross_scores import pooled_pairs
from benchmarks.oneshot_tpe_proxy import ROOT
from benchmarks.results_file import RESULTS, merge_results

OUT = Path.home() / ".cache" / "autorec-bench" / "tau_steps"


def step_name(step: int) -> str:
    """The folder of the checkpoint at ``step`` (as :class:`~autorec.oneshot.train.SupernetTraining`
    names it)."""
    return f"step-{step:09d}"


def training_of(tag: str, seed: int, options: dict[str, Any], folder: Path, root: Path = ROOT) -> Any:
    """The supernet training of study ``oneshot<tag>_seed<seed>`` with ``options`` overriding its
    training options, checkpointed in ``folder``; SystemExit naming a bad option."""
    from autorec.oneshot.train import OneShotTrainConfig, SupernetTraining
    from autorec.study import StudyConfig, TrialRunner

    path = root / f"oneshot{tag}_seed{seed}" / "study.yaml"
    if not path.exists():
        raise SystemExit(f"{path}: no study (run the one-shot stage of {tag} seed {seed} first)")
    runner = TrialRunner(StudyConfig.load(path))
    unknown = sorted(set(options) - {f.name for f in dataclasses.fields(OneShotTrainConfig)})
    if unknown:
        raise SystemExit(f"--options: {unknown[0]!r} is not a supernet training option")
    try:
        config = OneShotTrainConfig(**{**runner.strategy.train_options, **options})
    except (TypeError, ValueError) as exc:
        raise SystemExit(f"--options: {exc}") from None
    return SupernetTraining(runner.space, runner.dataset, config, folder)


def branch(source: Path, run_dir: Path, config: Any) -> None:
    """Start ``run_dir`` from the kept checkpoint ``source`` (unless it has checkpoints of its own),
    its recorded configuration replaced by ``config`` (the branch's: the steps so far are the
    same, what follows differs)."""
    from autorec.train.checkpoints import LATEST, META

    if (run_dir / LATEST).exists():
        return
    if not source.is_dir():
        raise SystemExit(f"--start: no kept checkpoint at {source}")
    run_dir.mkdir(parents=True, exist_ok=True)
    shutil.copytree(source, run_dir / source.name, dirs_exist_ok=True)
    meta = json.loads((source / META).read_text())
    meta["config"] = json.loads(json.dumps(dataclasses.asdict(config)))
    (run_dir / source.name / META).write_text(json.dumps(meta))
    (run_dir / LATEST).write_text(source.name + "\n")


def train_keeping(training: Any, keep: list[int], kept_dir: Path) -> None:
    """Train to the end, copying the checkpoint of every step in ``keep`` into ``kept_dir``."""
    save = training.save

    def save_and_keep(state: Any) -> None:
        save(state)
        if state.step in keep:
            shutil.copytree(training.directory / step_name(state.step), kept_dir / step_name(state.step),
                            dirs_exist_ok=True)
    training.save = save_and_keep
    training.fit(log=print)


def proxy_at(training: Any, checkpoint: Path, pairs: list[tuple[dict[str, Any], float]],
             samples: int) -> list[float]:
    """Each pair's inherited-weight validation AUC on the supernet loaded from ``checkpoint``."""
    from autorec.oneshot.search import CandidateSearch

    training.resume(checkpoint)
    search = CandidateSearch(training, samples, ["val_auc"])
    return [search.rescore(search.values_of({n: str(p[n]) for n in search.names}), samples)["val_auc"]
            for p, _ in pairs]


def figures_of(name: str, proxies: dict[int, list[float]], trained: list[float]) -> dict[str, float]:
    """The module docstring's figures from each kept step's proxies and the trained AUCs.

    Example:
        >>> f = figures_of("r_seed0", {10: [0.1, 0.2, 0.3], 20: [0.1, 0.3, 0.2]}, [1.0, 2.0, 3.0])
        >>> [(k, round(v, 3)) for k, v in f.items()]  # doctest: +NORMALIZE_WHITESPACE
        [('r_seed0_step10_tau', 1.0), ('r_seed0_step20_tau', 0.333),
         ('r_seed0_step10_vs_step20_tau', 0.333), ('r_seed0_ensemble_tau', 1.0)]
    """
    out = {f"{name}_step{s}_tau": float(kendalltau(p, trained).statistic) for s, p in proxies.items()}
    for a, b in itertools.combinations(sorted(proxies), 2):
        out[f"{name}_step{a}_vs_step{b}_tau"] = float(kendalltau(proxies[a], proxies[b]).statistic)
    if len(proxies) > 1:
        mean = [statistics.fmean(v) for v in zip(*proxies.values(), strict=True)]
        out[f"{name}_ensemble_tau"] = float(kendalltau(mean, trained).statistic)
    return out


def run(tag: str, seed: int, name: str, options: dict[str, Any], keep: list[int], tau_from: list[str],
        pool_seeds: list[int], samples: int, out_dir: Path, start: str | None = None,
        root: Path = ROOT) -> dict[str, Any]:
    """Train (or resume) the recipe ``name`` and score every kept step; the flat figures."""
    folder = out_dir / f"{name}_seed{seed}"
    training = training_of(tag, seed, options, folder / "run", root)
    late = [s for s in keep if not 1 <= s <= training.config.steps]
    if late:
        raise SystemExit(f"--keep: step {late[0]} is outside the training's 1..{training.config.steps}")
    if start is not None:
        source, _, at = start.partition(":")
        if not at.isdigit():
            raise SystemExit(f"--start: expected NAME:STEP (as k47:2000), got {start!r}")
        origin = out_dir / f"{source}_seed{seed}" / "kept" / step_name(int(at))
        branch(origin, folder / "run", training.config)
    pairs = pooled_pairs(tau_from, pool_seeds, root)
    if len(pairs) < 3:
        raise SystemExit(f"{', '.join(tau_from)}: {len(pairs)} tau trainings; at least 3 are needed")
    train_keeping(training, keep, folder / "kept")
    scores_path = folder / f"scores_{samples}.json"
    kept: dict[str, list[float]] = json.loads(scores_path.read_text()) if scores_path.exists() else {}
    key = ",".join(tau_from) + "|" + ",".join(map(str, pool_seeds))
    proxies = {}
    for step in keep:
        checkpoint = folder / "kept" / step_name(step)
        if not checkpoint.is_dir():  # a step before the one this branch started from
            raise SystemExit(f"--keep: no checkpoint kept at step {step} in {folder / 'kept'}")
        label = f"{key}|{step}"
        if label not in kept:
            kept[label] = proxy_at(training, checkpoint, pairs, samples)
            scores_path.write_text(json.dumps(kept))
        proxies[step] = kept[label]
    figures = figures_of(f"{name}_seed{seed}", proxies, [auc for _, auc in pairs])
    return {**figures, f"{name}_seed{seed}_pairs": len(pairs)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tag", required=True, help="the run whose study the supernet is of (e.g. _k47)")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--name", required=True, help="this recipe's name (its folder and figures)")
    parser.add_argument("--options", default="{}", help="JSON: supernet training options overridden")
    parser.add_argument("--keep", required=True, help="steps kept and scored (2500,3000)")
    parser.add_argument("--start", default=None, help="NAME:STEP: start from that recipe's kept checkpoint")
    parser.add_argument("--tau-from", default="_k16,_k18", help="the runs whose tau trainings are ranked")
    parser.add_argument("--pool-seeds", default="0,1,2")
    parser.add_argument("--samples", type=int, default=32768, help="validation samples per score")
    parser.add_argument("--root", type=Path, default=ROOT)
    parser.add_argument("--out-dir", type=Path, default=OUT)
    parser.add_argument("--out", type=Path, default=RESULTS / "oneshot_tau_steps.json")
    args = parser.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        options = json.loads(args.options)
    except json.JSONDecodeError as exc:
        parser.error(f"--options: not JSON ({exc})")
    if not isinstance(options, dict):
        parser.error(f"--options: expected a JSON object, got {args.options!r}")
    try:
        keep = sorted({int(s) for s in args.keep.split(",")})
        pool_seeds = [int(s) for s in args.pool_seeds.split(",")]
    except ValueError:
        parser.error(f"--keep / --pool-seeds: expected integers separated by commas, got "
                     f"{args.keep!r} / {args.pool_seeds!r}")
    figures = run(args.tag, args.seed, args.name, options, keep, args.tau_from.split(","), pool_seeds,
                  args.samples, args.out_dir, args.start, args.root)
    for key, value in figures.items():
        print(f"{key:40s} {value:.4f}" if isinstance(value, float) else f"{key:40s} {value}")
    merge_results(args.out, figures, prefix=f"{args.name}_seed{args.seed}")


if __name__ == "__main__":
    main()
