"""Issue 20's benchmark: one-shot search (train once, search many) against TPE on the `scale` workload.

Every method searches on the synthetic ``scale`` preset (Criteo-like, planted per-table
importance, default 5M samples) with the same final-training budget:

- ``tpe``: TPE, ``--trials`` full trials on ``benchmarks/spaces/scale.yaml`` (per-feature dims,
  drops and hash sizes);
- ``tpe_shared``: TPE, ``--trials`` full trials on ``benchmarks/spaces/scale_shared.yaml`` (every
  feature kept, one shared width and hash size), so a larger space cannot make the baseline
  weaker. TPE's figure is the better of the two;
- ``oneshot``: ``strategy: oneshot`` on the scale space, one study per seed in ``--seeds``.

Each stage is an Optuna study in ``--out`` (default ``~/.cache/autorec-bench/oneshot``, outside
the work tree): a stage run again continues where the last run was cut (the trials recorded
stay; a one-shot supernet resumes from its checkpoint). ``report`` reads whatever has finished,
trains TPE's best-by-validation trial in full (``--final-epochs``, as the one-shot winner is),
and writes the flat JSON of the issue to ``benchmarks/results/oneshot.json`` with the machine
and commit. Run the stages in any order, across sessions:

    .venv/bin/python -m benchmarks.oneshot_vs_tpe --stage tpe
    .venv/bin/python -m benchmarks.oneshot_vs_tpe --stage tpe_shared
    .venv/bin/python -m benchmarks.oneshot_vs_tpe --stage oneshot --seeds 0,1,2
    .venv/bin/python -m benchmarks.oneshot_vs_tpe --stage report
    .venv/bin/python -m benchmarks.oneshot_vs_tpe --stage status   # where each stage stands, no training
    .venv/bin/python -m benchmarks.oneshot_vs_tpe --stage archive  # the studies' trials into the work tree
    .venv/bin/python -m benchmarks.oneshot_vs_tpe --stage unit --when after --seeds 0  # a seed's own unit

``--out`` may not outlive a session's machine. A TPE stage copies its study's trials to
``benchmarks/results/studies/<study>.jsonl`` (an Optuna journal, :mod:`benchmarks.study_archive`)
when it ends, and ``--stage archive`` does it for both TPE studies at any time, and keeps every
one-shot study's stand-alone trainings under ``benchmarks/results/studies/oneshot_trained/``
(run it before a session ends, and commit the files); a stage or report that finds no study in
``--out`` starts from its archive, so a TPE study cut by a session's end goes on from its last
archived trial on the next machine.

``--variant NAME`` runs a configuration recorded in BENCHMARKS.md again with every flag and
option it had (:mod:`benchmarks.oneshot_variants`: ``k8i`` ... ``k21``), e.g. ``--stage oneshot
--variant k16 --seeds 0,1,2``; flags given beside it override its own.

A machine that did not keep ``--out`` has lost the TPE studies (hours): ``report --tpe-record
benchmarks/results/<earlier report>.json`` takes TPE's figures from that report and names it as
their source, and measures the training-equivalent again on a one-shot study's draws from the
space (:mod:`benchmarks.oneshot_reference`).

The default is ``--variant k62`` (since the thirty-second session: the drops' recipe of ``k54``,
its pick on the coarse supernet and the finalists' drops read on a fine phase after it, on the
code that made its search cheap enough; every target met on all three seeds, tau by the bounded
predictor; ``studies/scale_oneshot.yaml`` is its study; before it, ``k51``, which met every
target but tau and one seed's AUC by 0.00002);
``--variant none`` takes the flags' own defaults,
the configuration measured before the variants (uniform paths, 3000 supernet steps checkpointed
every 500, 300 candidates on 5120 validation samples, 3 re-ranked by 150-step trainings, tau on
the trial budget; studies ``oneshot_s3k_seed<N>``). The earlier ones, each recorded in
BENCHMARKS.md: ``--tag _u3k --checkpoint-every 100 --selection-samples 10000 --rerank 4
--short-rerank 0`` (re-ranks on the trial budget); ``--tag _u2k --supernet-steps 2000
--selection-samples 6144 --rerank 3 --rerank-steps 250 --short-rerank 0``; and the first pilot,
strictly fair paths: ``--tag '' --supernet-steps 4000 --candidates 1000 --selection-samples 20000
--checkpoint-every 100 --short-rerank 0 --oneshot-options '{"sampling": "fair"}'``.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import time
import warnings
from pathlib import Path
from typing import Any

import optuna
import yaml
from optuna.trial import TrialState

from autorec.arch import ArchSpec
from autorec.study import StudyConfig, TrialRunner, open_storage, run_study
from benchmarks.adjacent_units import UNITS_FILE, WHEN, adjacent_keys, read_units, record_unit
from benchmarks.oneshot_reference import (
    RECORDED_TPE_KEYS,
    final_budget,
    sampled_reference,
    timed_training,
    tpe_record,
)
from benchmarks.oneshot_variants import VARIANTS, merged_options, variant_defaults
from benchmarks.pool_tau import pool_taus, read_tau_parts
from benchmarks.results_file import commit, machine, merge_results
from benchmarks.study_archive import archive, archive_trained, restore, restore_if_gone, trained_archive_path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_VARIANT = "k62"  # every target met on all three seeds (BENCHMARKS.md, issue 20, k62)
SPACES = {
    "tpe": ROOT / "benchmarks/spaces/scale.yaml",
    "tpe_shared": ROOT / "benchmarks/spaces/scale_shared.yaml",
    "oneshot": ROOT / "benchmarks/spaces/scale.yaml",
}
TOLERANCE = 0.0005  # the one-shot winner "reaches" TPE's best test AUC within this
TAU_ARCHITECTURES = 12  # trained stand-alone per seed (re-ranked + calibration): the pairs of tau
DIM64_BYTES = 64 * 4  # bytes per row of the reference: every table kept, dim 64, fp32, full hash


def study_file(args: argparse.Namespace, stage: str, seed: int = 0, write: bool = True) -> Path:
    """The stage's study file under ``--out``, written from the flags (``write``: always; else only
    when it is not there, so reading a study does not rewrite another run's flags)."""
    name = stage if stage != "oneshot" else f"oneshot{args.tag}_seed{seed}"
    data: dict[str, Any] = {
        "name": name,
        "data": {"name": "synthetic", "options": {"preset": "scale", "num_samples": args.samples}, "seed": 0},
        "space": str(SPACES[stage]),
        "objectives": ["val_auc"],
        "budget": {
            "trials": args.trials,
            "epochs": args.epochs,
            "batch_size": args.batch_size,
            "patience": 1,
            "monitor": "val_auc",  # as the studies measured before logloss became the default
        },
        "pruner": "median",
        "seed": seed,
        # the recipe TPE's recorded studies trained with (dense weight decay became 1e-4 later)
        "train": {"dense_weight_decay": 0.0},
    }
    if stage == "oneshot":
        options = {
            "steps": args.supernet_steps,
            "batch_size": 1024,
            "candidates": args.candidates,
            "selection_samples": args.selection_samples,
            "rerank": args.rerank,
            "calibrate": max(0, TAU_ARCHITECTURES - args.rerank),
            **({"rerank_steps": args.short_rerank} if args.short_rerank else {}),
            **({"rescore": args.rescore, "rescore_samples": args.rescore_samples} if args.rescore else {}),
            **({"rerank_val_samples": args.rerank_val_samples} if args.rerank_val_samples else {}),
            "final_epochs": args.final_epochs,
            "checkpoint_every": args.checkpoint_every,
            **json.loads(args.oneshot_options),
        }
        data["strategy"] = {"name": "oneshot", "options": options}
        data["pruner"] = "none"
        data["budget"]["max_steps_per_epoch"] = args.rerank_steps  # re-ranking: short trainings
    else:
        data["strategy"] = {"name": "tpe", "options": {"n_startup_trials": 8}}
    folder = args.out / name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "study.yaml"
    if write or not path.exists():
        path.write_text(yaml.safe_dump(data))
    return path


def adopt_supernet(args: argparse.Namespace, seed: int, config: StudyConfig) -> None:
    """Start ``config``'s one-shot study from the supernet checkpoints of the study tagged
    ``--supernet-from`` (same seed), when it has none of its own: the supernet's training does
    not depend on what follows it, so variants of the search after it share one. The resume
    refuses a checkpoint written with another supernet configuration; the seconds the adopted
    training took are in its checkpoint and count in the variant's time as they did there."""
    if args.supernet_from in (None, "none"):  # none: a variant's own supernet, where --out lost the source
        return
    source = args.out / f"oneshot{args.supernet_from}_seed{seed}"
    source = source / source.name / "oneshot" / "supernet"
    target = config.directory / "oneshot" / "supernet"
    if target.exists():
        return
    if not source.is_dir():
        raise SystemExit(f"--supernet-from {args.supernet_from}: no supernet at {source}")
    target.parent.mkdir(parents=True, exist_ok=True)
    staged = target.with_name("supernet.adopting")
    shutil.rmtree(staged, ignore_errors=True)
    shutil.copytree(source, staged, symlinks=True)
    staged.rename(target)  # whole or not at all: a kill mid-copy leaves no half supernet
    print(f"{config.name}: supernet adopted from {source}")


def run_stage(args: argparse.Namespace, stage: str) -> None:
    seeds = [int(s) for s in args.seeds.split(",")] if stage == "oneshot" else [0]
    for seed in seeds:
        config = StudyConfig.load(study_file(args, stage, seed))
        if restore(archive_path(args, config.name), config.name, config.storage_url):
            print(f"{config.name}: trials restored from {archive_path(args, config.name)}")
        if stage == "oneshot":
            adopt_supernet(args, seed, config)
        record = config.directory / "peak_rss_gib.json"

        def log(message: str, record: Path = record) -> None:
            """Print, and keep the peak resident memory of this process (data, supernet, search;
            the most of any run) on record at every line, so a run stopped part-way has it."""
            print(message)
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB -> GiB
            before = json.loads(record.read_text()) if record.exists() else 0.0
            if peak > before:
                record.write_text(json.dumps(peak))

        start = time.perf_counter()
        run_study(config, log=log)
        log(f"{config.name}: this run took {time.perf_counter() - start:.0f} s")
        if stage != "oneshot":  # (a one-shot study also needs its supernet folder to go on)
            count = archive(config.name, config.storage_url, archive_path(args, config.name))
            log(f"{config.name}: {count} trials archived to {archive_path(args, config.name)}")


def archive_path(args: argparse.Namespace, name: str) -> Path:
    """The journal file that keeps study ``name``'s trials in the work tree."""
    return args.archive_dir / f"{name}.jsonl"


def archive_stages(args: argparse.Namespace) -> None:
    """Copy the TPE studies found in ``--out`` to ``--archive-dir``: run before a session ends,
    so the next one, on whatever machine, continues them and reports from them. A one-shot
    study is not archived whole: it cannot go on without its supernet's folder, a seed is
    minutes to run again, its figures are in the report's JSON, and its trials (every screened
    candidate's scores) make megabytes; its stand-alone trainings are
    (:func:`benchmarks.study_archive.archive_trained`), since tau's take 10-15 minutes a seed and
    score any later supernet of the same seed (``oneshot_cross_scores --tau-from``)."""
    for folder in sorted(args.out.glob("oneshot*_seed*")):
        db = folder / folder.name / "study.db"
        if db.exists():
            path = trained_archive_path(args.archive_dir, folder.name)
            count = archive_trained(folder.name, f"sqlite:///{db}", path)
            print(f"{folder.name}: {count} trainings archived to {path}")
    for name in ("tpe", "tpe_shared"):
        path = args.out / name / "study.yaml"  # (as study_file writes it; absent: never run here)
        if not path.is_file():
            continue
        config = StudyConfig.load(path)
        if config.storage_url.startswith("sqlite:///") and not (config.directory / "study.db").exists():
            continue
        count = archive(config.name, config.storage_url, archive_path(args, config.name))
        print(f"{config.name}: {count} trials archived to {archive_path(args, config.name)}")


def _tagged(args: argparse.Namespace, tag: str) -> argparse.Namespace:
    """``args`` naming the one-shot studies of ``tag`` (another run's, read by the report)."""
    return argparse.Namespace(**{**vars(args), "tag": tag})


def _seconds(trial: optuna.trial.FrozenTrial) -> float:
    return trial.duration.total_seconds() if trial.duration else 0.0


def finished(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    """The trials that count toward a study's time: complete or pruned (a trial cut by a kill is
    left FAIL, or RUNNING, and is run again by the next run)."""
    counted = (TrialState.COMPLETE, TrialState.PRUNED)
    return [t for t in study.get_trials(deepcopy=False) if t.state in counted]


def _load(args: argparse.Namespace, stage: str, seed: int = 0) -> tuple[StudyConfig, optuna.Study] | None:
    path = study_file(args, stage, seed, write=False)
    config = StudyConfig.load(path)
    gone = config.storage_url.startswith("sqlite:///") and not (config.directory / "study.db").exists()
    if gone and not restore_if_gone(config, archive_path(args, config.name)):
        return None  # (opening it would leave an empty study.db behind)
    try:
        return config, optuna.load_study(study_name=config.name, storage=open_storage(config.storage_url))
    except KeyError:
        return None


def short_of_tau(figures: dict[str, Any]) -> bool:
    """Whether a one-shot seed's figures lack the issue's tau (none, or on fewer than
    ``TAU_ARCHITECTURES`` pairs: a variant that trained only its re-ranked candidates on the trial
    budget), so that the report takes its base run's (``--reference-tag``).

    Example:
        >>> [short_of_tau({"tau_pairs": n}) for n in (None, 4, 12)]
        [True, True, False]
    """
    return (figures["tau_pairs"] or 0) < TAU_ARCHITECTURES


def final_attr(epochs: int) -> str:
    """The TPE study's user attribute that caches its winner's final training of ``epochs`` epochs:
    ``final`` for the benchmark's first budget (3 epochs; its records predate the others),
    ``final_<N>ep`` for any other, so a report on another final budget keeps the first's record."""
    return "final" if epochs == 3 else f"final_{epochs}ep"


def tpe_figures(args: argparse.Namespace, stage: str) -> dict[str, Any] | None:
    """Best-by-validation trial trained in full; the study's wall time (trials + that training)."""
    loaded = _load(args, stage)
    if loaded is None:
        return None
    config, study = loaded
    done = finished(study)
    complete = [t for t in done if t.state == TrialState.COMPLETE and "metrics" in t.user_attrs]
    if not complete:
        return None
    best = max(complete, key=lambda t: t.user_attrs["metrics"]["val"]["auc"])
    attr = final_attr(args.final_epochs)
    final = study.user_attrs.get(attr)
    here = machine()
    if not final_holds(final, best.number, len(done), here):
        from autorec.train.trainer import Trainer

        runner = TrialRunner(config)
        cfg = runner.train_config(config.directory / "final")

        cfg = final_budget(cfg, args.final_epochs)
        t0 = time.perf_counter()
        result = Trainer(ArchSpec.from_dict(best.user_attrs["arch"]), runner.dataset, cfg).fit()
        final = {
            "trial": best.number,
            "epochs": args.final_epochs,
            "trials_seen": len(done),
            "seconds": time.perf_counter() - t0,
            "val_auc": result.val["auc"],
            "test_auc": result.test["auc"],
            "machine": here,
        }
        study.set_user_attr(attr, final)
    return {
        "stage": stage,
        "trials": len(done),
        "complete_trainings": len(complete),
        "search_s": sum(_seconds(t) for t in done),
        "final_s": final["seconds"],
        "wall_s": sum(_seconds(t) for t in done) + final["seconds"],
        "test_auc": final["test_auc"],
        "median_training_s": statistics.median(_seconds(t) for t in complete),
        "trained": [
            (t.user_attrs["metrics"]["test"]["auc"], t.user_attrs["costs"]["embedding_bytes"])
            for t in complete
        ],
    }


def final_holds(cached: dict[str, Any] | None, trial: int, trials_seen: int, here: str) -> bool:
    """Whether TPE's cached final training still answers this report: the same best trial, no
    trial since, and trained on this machine. Another CPU's float kernels move one training's
    AUC by about 0.001 (the AMD and Intel finals of one trial: 0.6715 and 0.6724), the size of
    the tolerance the AUC target reads, so each machine compares against its own final.

    Example:
        >>> cached = {"trial": 13, "trials_seen": 34, "test_auc": 0.6715, "machine": "AMD EPYC"}
        >>> final_holds(cached, 13, 34, "AMD EPYC"), final_holds(cached, 13, 34, "Intel")
        (True, False)
        >>> other = ((cached, 12, 34), (cached, 13, 35), (None, 13, 34))  # trial, a trial since, none
        >>> [final_holds(c, t, n, "AMD EPYC") for c, t, n in other]
        [False, False, False]
    """
    return (cached is not None and cached["trial"] == trial and trials_seen <= cached["trials_seen"]
            and cached.get("machine") == here)


def timing_holds(cached: dict[str, Any] | None, trial: int, epochs: int | None, here: str) -> bool:
    """Whether a cached reference training still times this report's: the same trial and budget,
    timed on this machine (a study restored from its archive on another CPU holds the first one's
    seconds, and a cache from before machines were recorded names none).

    Example:
        >>> cached = {"trial": 11, "epochs": None, "seconds": 124.3, "machine": "Intel"}
        >>> timing_holds(cached, 11, None, "Intel"), timing_holds(cached, 11, None, "AMD EPYC")
        (True, False)
        >>> timing_holds({"trial": 11, "epochs": None, "seconds": 124.3}, 11, None, "Intel")
        False
        >>> other = ((cached, 12, None), (cached, 11, 1), (None, 11, None))  # trial, budget, none
        >>> [timing_holds(c, t, e, "Intel") for c, t, e in other]
        [False, False, False]
    """
    return (cached is not None and cached["trial"] == trial and cached.get("epochs") == epochs
            and cached.get("machine") == here)


def tpe_median(args: argparse.Namespace) -> tuple[StudyConfig, optuna.Study, optuna.trial.FrozenTrial] | None:
    """The ``tpe`` study and its complete trial of median duration (None: no such study or trial)."""
    loaded = _load(args, "tpe")
    if loaded is None:
        return None
    config, study = loaded
    complete = sorted((t for t in study.get_trials(deepcopy=False)
                       if t.state == TrialState.COMPLETE and "metrics" in t.user_attrs), key=_seconds)
    return (config, study, complete[len(complete) // 2]) if complete else None


def time_units(args: argparse.Namespace) -> None:
    """``--stage unit``: the reference training (:func:`reference_training`'s, on the trial
    budget) timed now and kept in each seed's folder as its unit ``--when`` (before or after its
    run; :mod:`benchmarks.adjacent_units`)."""
    found = tpe_median(args)
    if found is None:
        raise SystemExit(f"--stage unit: no complete trial in the tpe study under {args.out} to time")
    config, _, median = found
    for seed in (int(s) for s in args.seeds.split(",")):
        # (write=False: a unit never rewrites the study file its seed's run wrote)
        directory = StudyConfig.load(study_file(args, "oneshot", seed, write=False)).directory
        seconds = timed_training(config, median.user_attrs["arch"])
        units = record_unit(directory, args.when, seconds, median.number, machine())
        print(f"oneshot{args.tag}_seed{seed}: unit {args.when} {seconds:.1f} s "
              f"({len(units)} in {directory / UNITS_FILE})")


def reference_training(args: argparse.Namespace, full: bool = False) -> dict[str, Any] | None:
    """One training of the median architecture, timed now: the TPE study's complete trial of
    median duration, retrained on its trial budget (cached in the study's ``reference`` attribute;
    ``full``: on the final training's budget, ``reference_full``; benchmarks/oneshot_reference.py).
    Its seconds are the training-equivalent of the one-shot searches, measured on this machine as
    it is now rather than read from trials that may have shared the cores."""
    found = tpe_median(args)
    if found is None:
        return None
    config, study, median = found
    epochs = args.final_epochs if full else None
    attr = "reference_full" if full else "reference"
    cached = study.user_attrs.get(attr)
    here = machine()
    if args.fresh_reference or not timing_holds(cached, median.number, epochs, here):
        timed = {"trial": median.number, "epochs": epochs,
                 "seconds": timed_training(config, median.user_attrs["arch"], epochs),
                 "trial_seconds": _seconds(median), "machine": here}
        if args.fresh_reference:  # this report's unit only: the cache keeps the earlier one
            return {**timed, "fresh": True}
        cached = timed
        study.set_user_attr(attr, cached)
    return cached


def stage_seconds(record: dict[str, Any]) -> dict[str, float]:
    """Where a one-shot study's search time went, from its ``oneshot`` record: the supernet's
    coarse steps, the kind heads, the layer grid, the fine phase (``fine_after_pick``), the rest of
    the search (screen, crossings), the rescore with the finalists' drop reads, the re-rank and the
    rung's losers; their sum is the report's ``search_s``.

    Example:
        >>> figures = stage_seconds({"supernet": {"seconds": 90.0}, "search_seconds": 140.0,
        ...     "heads": {"seconds": 40.0}, "layer_grid": {"seconds": 30.0},
        ...     "fine_phase": {"seconds": 60.0}, "rescore_seconds": 20.0, "rung_loser_seconds": 70.0})
        >>> figures["other_search_s"], sum(figures.values())
        (10.0, 320.0)
    """
    parts = {"supernet_s": record["supernet"]["seconds"],
             "heads_s": record.get("heads", {}).get("seconds", 0.0),
             "grid_s": record.get("layer_grid", {}).get("seconds", 0.0),
             "fine_phase_s": record.get("fine_phase", {}).get("seconds", 0.0)}
    parts["other_search_s"] = record.get("search_seconds", 0.0) - parts["heads_s"] - parts["grid_s"] \
        - parts["fine_phase_s"]
    parts["rescore_s"] = record.get("rescore_seconds", 0.0)
    parts["rerank_s"] = record.get("rerank_seconds", 0.0)
    parts["rung_losers_s"] = record.get("rung_loser_seconds", 0.0)
    return parts


def oneshot_figures(args: argparse.Namespace, seed: int) -> dict[str, Any] | None:
    loaded = _load(args, "oneshot", seed)
    if loaded is None:
        return None
    config, study = loaded
    record = study.user_attrs.get("oneshot", {})
    peak = config.directory / "peak_rss_gib.json"
    final = [
        t
        for t in study.get_trials(deepcopy=False)
        if t.user_attrs.get("stage") == "final" and t.state == TrialState.COMPLETE
    ]
    if not final:
        return None
    trained = [t for t in study.get_trials(deepcopy=False) if "metrics" in t.user_attrs]
    stages = stage_seconds(record)  # the final_candidates that did not go on are search
    search_s = sum(stages.values())
    return {
        "seed": seed,
        "search_s": search_s,
        "stages": stages,
        "final_tables": len(final[0].user_attrs["arch"]["tables"]),
        "final_s": record.get("final_seconds", 0.0),
        "wall_s": search_s + record.get("final_seconds", 0.0),
        "test_auc": final[0].user_attrs["metrics"]["test"]["auc"],
        "kendall_tau": record.get("kendall_tau"),
        "tau_pairs": record.get("tau_pairs"),
        "peak_rss_gib": json.loads(peak.read_text()) if peak.exists() else None,
        "units": read_units(config.directory),
        "trained": [  # (a short re-rank has no test pass)
            (t.user_attrs["metrics"]["test"]["auc"], t.user_attrs["costs"]["embedding_bytes"])
            for t in trained if "auc" in t.user_attrs["metrics"]["test"]
        ],
    }


def seed_keys(figures: dict[str, Any], prefix: str) -> dict[str, Any]:
    """A seed's :func:`oneshot_figures` as flat keys ``<prefix><key>``: its AUC, seconds, tau and
    final tables, and where its search time went (:func:`stage_seconds`)."""
    keys = ("test_auc", "search_s", "final_s", "wall_s", "kendall_tau", "final_tables")
    return {f"{prefix}{k}": v for k, v in [*((k, figures[k]) for k in keys), *figures["stages"].items()]}


def stage_figures(args: argparse.Namespace) -> dict[str, Any]:
    """``--stage stages``: each seed's search time by stage and its figures (:func:`seed_keys`),
    as flat keys ``<variant>_seed<N>_<key>``; nothing trains.
    A seed whose study has no final is named and left out."""
    figures: dict[str, Any] = {}
    name = args.tag.lstrip("_")
    for seed in (int(s) for s in args.seeds.split(",")):
        f = oneshot_figures(args, seed)
        if f is None:
            print(f"oneshot{args.tag}_seed{seed}: no study with a final under {args.out}; left out")
            continue
        figures |= seed_keys(f, f"{name}_seed{seed}_")
    return figures


def reranked_archs(study: optuna.Study) -> list[str]:
    """The architectures ``study`` re-ranked (stage ``rerank``), as sorted JSON, names dropped."""
    from autorec.arch import ArchSpec

    return sorted(ArchSpec.from_dict(t.user_attrs["arch"]).replace(name="x").to_json()
                  for t in study.get_trials(deepcopy=False) if t.user_attrs.get("stage") == "rerank")


def status(args: argparse.Namespace) -> dict[str, Any]:
    """Where each stage stands, without training anything: trials done, the best trial by
    validation AUC so far (its AUCs are from the trial's own short training), trial seconds."""
    from autorec.data.synthetic import load_synthetic

    out: dict[str, Any] = {"machine": machine(), "commit": commit(), "samples": args.samples}
    # The workload's ceiling, as report gives it: the Bayes-optimal test AUC (on up to 1M samples).
    out["bayes_auc"] = load_synthetic(preset="scale", num_samples=min(args.samples, 1_000_000)).bayes_auc(
        "test"
    )
    stages = [("tpe", 0), ("tpe_shared", 0), *(("oneshot", int(s)) for s in args.seeds.split(","))]
    for stage, seed in stages:
        loaded = _load(args, stage, seed)
        if loaded is None:
            continue
        _, study = loaded
        trained = [
            t
            for t in study.get_trials(deepcopy=False)
            if t.state == TrialState.COMPLETE and "metrics" in t.user_attrs
        ]
        name = stage if stage != "oneshot" else f"oneshot{args.tag}_seed{seed}"
        row: dict[str, Any] = {"trials": len(study.trials), "trained": len(trained)}
        if trained:
            best = max(trained, key=lambda t: t.user_attrs["metrics"]["val"]["auc"])
            row.update(
                best_trial=best.number,
                best_val_auc=best.user_attrs["metrics"]["val"]["auc"],
                best_test_auc=best.user_attrs["metrics"]["test"].get("auc"),
                median_trial_s=statistics.median(_seconds(t) for t in trained),
                total_trial_s=sum(_seconds(t) for t in finished(study)),
                failed_trials=sum(t.state == TrialState.FAIL for t in study.trials),
            )
        if stage == "oneshot":
            row["oneshot"] = study.user_attrs.get("oneshot")
        out[name] = row
    return out


def wall_in_trainings(tpe: dict[str, Any], oneshot_wall_s: float, reference_s: float) -> dict[str, float]:
    """The wall target read across machines: TPE's wall in its study's median trial seconds (timed
    where and while its trials ran) and the one-shot wall in the median architecture's training
    timed here now, so a TPE study archived on one CPU and one-shot runs on another compare in
    trainings rather than in seconds of two machines. On one machine the ratio is the plain one
    up to the median trial's own timing noise.

    Example:
        >>> units = wall_in_trainings({"wall_s": 4000.0, "median_training_s": 100.0}, 600.0, 150.0)
        >>> units["tpe_wall_trainings"], units["oneshot_wall_trainings_max"]
        (40.0, 4.0)
        >>> units["oneshot_wall_ratio_in_trainings_max"]
        0.1
    """
    tpe_units = tpe["wall_s"] / tpe["median_training_s"]
    oneshot_units = oneshot_wall_s / reference_s
    return {"tpe_wall_trainings": tpe_units, "oneshot_wall_trainings_max": oneshot_units,
            "oneshot_wall_ratio_in_trainings_max": oneshot_units / tpe_units}


def report(args: argparse.Namespace) -> dict[str, Any]:
    from autorec.data.synthetic import SyntheticConfig, load_synthetic

    stages = [s for s in args.tpe_stages.split(",") if s]
    tpe = [f for f in (tpe_figures(args, s) for s in stages) if f is not None]
    shots = [f for f in (oneshot_figures(args, int(s)) for s in args.seeds.split(",")) if f is not None]
    schema = SyntheticConfig.from_options(preset="scale").schema()
    reference_bytes = sum(f.num_embeddings for f in schema.sparse) * DIM64_BYTES
    out: dict[str, Any] = {
        "machine": machine(),
        "commit": commit(),
        "samples": args.samples,
        "tpe_stages_done": [f["stage"] for f in tpe],
        "oneshot_seeds_done": [f["seed"] for f in shots],
    }
    recorded = tpe_record(args.tpe_record) if not tpe else None
    if tpe:
        best = max(tpe, key=lambda f: f["test_auc"])
        out.update(
            tpe_best_test_auc=best["test_auc"],
            tpe_wall_s=best["wall_s"],
            tpe_stage=best["stage"],
            median_training_s=statistics.median(f["median_training_s"] for f in tpe),
        )
        for f in tpe:  # each study's own figures, the better of which is TPE's
            out |= {f"stage_{f['stage']}_test_auc": f["test_auc"], f"stage_{f['stage']}_wall_s": f["wall_s"]}
    elif recorded is not None:
        out.update({key: recorded[key] for key in RECORDED_TPE_KEYS})
        out["tpe_source"] = f"{args.tpe_record} (commit {recorded['commit']}, {recorded['machine']})"
    for f in shots:  # a variant without tau's 12 trainings: its tau is its supernet's, from its base run
        if short_of_tau(f) and args.reference_tag:
            base = _load(_tagged(args, args.reference_tag), "oneshot", f["seed"])
            if base is not None and base[1].user_attrs.get("oneshot", {}).get("kendall_tau") is not None:
                if f["kendall_tau"] is not None:  # its own, on fewer pairs (the re-ranked only), kept apart
                    out[f"oneshot_seed{f['seed']}_kendall_tau_own"] = f["kendall_tau"]
                    out[f"oneshot_seed{f['seed']}_tau_pairs_own"] = f["tau_pairs"]
                f["kendall_tau"] = base[1].user_attrs["oneshot"]["kendall_tau"]
                out[f"oneshot_seed{f['seed']}_kendall_tau_from"] = base[1].study_name
                # tau's pairs are the re-ranked candidates and the draws: the same pairs when the
                # variant re-ranked the same architectures on the same supernet
                own = _load(args, "oneshot", f["seed"])
                out[f"oneshot_seed{f['seed']}_kendall_tau_same_reranked"] = (
                    own is not None and reranked_archs(own[1]) == reranked_archs(base[1]))
    if shots:
        out.update(
            oneshot_peak_rss_gib=max((f["peak_rss_gib"] or 0.0) for f in shots),
            oneshot_test_auc_min=min(f["test_auc"] for f in shots),
            oneshot_wall_s_max=max(f["wall_s"] for f in shots),
            kendall_tau_min=min(
                (f["kendall_tau"] for f in shots if f["kendall_tau"] is not None), default=None
            ),
        )
        for f in shots:  # each seed's figures beside the worst-of-seeds ones
            out |= seed_keys(f, f"oneshot_seed{f['seed']}_")
        if args.tau_parts is not None:  # tau over the pool that earlier runs trained, on these supernets
            out |= pool_taus(read_tau_parts(args.tau_parts), args.tag, [f["seed"] for f in shots],
                             str(args.tau_parts), own_min=out["kendall_tau_min"])
        # the training-equivalent on the trial budget, and (--full-reference) on the final's
        for suffix, full in (("", False), ("_full", True))[:1 + args.full_reference]:
            reference = reference_training(args, full)
            if reference is None and recorded is not None:  # TPE's median trial went with its study
                first = int(args.seeds.split(",")[0])
                tpe_config = StudyConfig.load(study_file(args, "tpe"))
                drawn = _tagged(args, args.reference_tag or args.tag)
                reference = sampled_reference(_load(drawn, "oneshot", first), tpe_config,
                                              args.final_epochs if full else None)
                out["reference_study"] = f"oneshot{drawn.tag}_seed{first}"
                out["reference_architecture"] = reference["architecture"]
                recorded_s = recorded.get(f"reference{suffix}_training_s")
                out[f"tpe_record_reference{suffix}_training_s"] = recorded_s
            if reference is not None:
                seconds = reference["seconds"]
                out[f"reference{suffix}_training_s"] = seconds
                out[f"reference{suffix}_timed_fresh"] = bool(reference.get("fresh"))
                out[f"oneshot_train_equivalents{suffix}_max"] = max(f["search_s"] for f in shots) / seconds
                for f in shots:
                    out[f"oneshot_seed{f['seed']}_train_equivalents{suffix}"] = f["search_s"] / seconds
                if not full and tpe:  # the wall ratio in each machine's own unit (see wall_in_trainings)
                    out |= wall_in_trainings(best, max(f["wall_s"] for f in shots), seconds)
        out |= adjacent_keys(shots)  # each seed in the units timed beside it (--stage unit)
        if tpe or recorded is not None:
            out["tolerance"] = TOLERANCE
    trained = [pair for f in [*tpe, *shots] for pair in f["trained"]]
    if trained:
        # "The best found" includes TPE's, also when only its recorded figure is left.
        top = max([auc for auc, _ in trained] + ([recorded["tpe_best_test_auc"]] if recorded else []))
        near = [b for auc, b in trained if auc >= top - 0.001]
        if near:  # (none when every training here is more than 0.001 below a recorded TPE figure)
            smallest = min(near)
            out.update(
                compressed_bytes_ratio=smallest / reference_bytes,
                compressed_auc_drop=top - max(auc for auc, b in trained if b == smallest),
            )
    out["bayes_auc"] = load_synthetic(preset="scale", num_samples=min(args.samples, 1_000_000)).bayes_auc(
        "test"
    )
    return out


def arguments() -> argparse.ArgumentParser:
    """The benchmark's command line (also read by ``benchmarks.te_reference``)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--stage", choices=["tpe", "tpe_shared", "oneshot", "report", "status", "archive", "stages", "unit"],
        required=True, help="stages: each seed's search seconds by stage, merged into --json; unit: the "
                            "reference training timed now, kept as each seed's unit --when"
    )
    parser.add_argument("--when", choices=WHEN, default="after",
                        help="unit: whether this timing is before or after the seeds' runs")
    parser.add_argument("--out", type=Path, default=Path.home() / ".cache" / "autorec-bench" / "oneshot")
    parser.add_argument("--samples", type=int, default=5_000_000)
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--epochs", type=int, default=1, help="epochs of one TPE trial")
    parser.add_argument("--batch-size", type=int, default=2048)
    parser.add_argument("--final-epochs", type=int, default=3, help="the winner's training, either method")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--supernet-steps", type=int, default=3000)
    parser.add_argument("--candidates", type=int, default=300)
    parser.add_argument("--rerank", type=int, default=3, help="candidates re-ranked by a short training")
    parser.add_argument("--rerank-steps", type=int, default=400,
                        help="steps of a training on the trial budget (re-ranks, calibration)")
    parser.add_argument("--short-rerank", type=int, default=150,
                        help="re-rank by trainings of this many steps (no test pass); tau stays on the "
                             "trial budget (0: re-rank on the trial budget)")
    parser.add_argument("--checkpoint-every", type=int, default=500, help="supernet steps per checkpoint")
    parser.add_argument("--selection-samples", type=int, default=5120,
                        help="validation samples each candidate is scored on")
    parser.add_argument("--rescore", type=int, default=0,
                        help="the screen's best candidates scored again on --rescore-samples (0: none)")
    parser.add_argument("--rescore-samples", type=int, default=40960)
    parser.add_argument("--rerank-val-samples", type=int, default=0,
                        help="a short re-rank validates on this many samples (0: the whole split)")
    parser.add_argument("--supernet-from", default=None,
                        help="a tag whose supernet checkpoints (same seed) this variant starts from "
                             "('none': the variant trains its own, as where --out lost the source's)")
    parser.add_argument("--tag", default="_s3k",
                        help="one-shot studies are oneshot<TAG>_seed<N>: each variant its own (the default "
                             "configuration's: _s3k; earlier ones: _u3k, _u2k, the fair pilot's '')")
    parser.add_argument("--oneshot-options", default="{}", help="JSON: more strategy options")
    parser.add_argument("--variant", default=DEFAULT_VARIANT, choices=[*sorted(VARIANTS), "none"],
                        help="a named configuration of BENCHMARKS.md (benchmarks/oneshot_variants.py): its "
                             "flags and options as defaults, its tag _NAME")
    parser.add_argument("--tpe-stages", default="tpe,tpe_shared",
                        help="report: the TPE studies to read (one whose trials are still running would "
                             "have its best trained in full now, and again when it has more)")
    parser.add_argument("--tpe-record", type=Path, default=None,
                        help="report: TPE's figures from this earlier report when no TPE study is in "
                             "--out (the new report names it, its machine and commit, as their source)")
    parser.add_argument("--reference-tag", default=None,
                        help="report: the one-shot studies whose draws from the space give the TE reference "
                             "with --tpe-record (default --tag), and whose tau stands for a seed that has "
                             "none: a variant without tau's trainings (calibrate 0) reads those of the run "
                             "whose supernet it adopted")
    parser.add_argument("--full-reference", action="store_true",
                        help="report: also the training-equivalent of one training on the final's budget "
                             "(--final-epochs epochs, patience 2) of the median architecture, timed now "
                             "(the *_full keys)")
    parser.add_argument("--fresh-reference", action="store_true",
                        help="report: time the reference training(s) now, in this report only (the cached "
                             "one, kept for other reports, may date from another day of this machine)")
    parser.add_argument("--tau-parts", type=Path, default=None,
                        help="report: a benchmarks.oneshot_tau_parts results file that scored these seeds' "
                             "supernets over the pool of trained architectures: each seed's tau over it "
                             "(and the bounded predictor's, where fitted), kendall_tau_min where the "
                             "seeds trained no draws of their own")
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "oneshot.json")
    parser.add_argument("--archive-dir", type=Path, default=ROOT / "benchmarks" / "results" / "studies",
                        help="archive: where each study's trials are copied (a journal file per study, "
                             "kept in git); a stage whose study is not in --out starts from its archive")
    return parser


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, with ``--variant``'s flags as defaults that the given flags override
    (:mod:`benchmarks.oneshot_variants`; its options merged under ``--oneshot-options``)."""
    parser = arguments()
    args = parser.parse_args(argv)
    if args.variant == "none":  # the flags' own defaults (the s3k configuration)
        return args
    parser.set_defaults(**variant_defaults(args.variant))
    args = parser.parse_args(argv)
    args.oneshot_options = json.dumps(merged_options(args.variant, args.oneshot_options))
    return args


def main() -> None:
    parser = arguments()
    args = parse()
    tpe_stages = [stage for stage in SPACES if stage != "oneshot"]
    unknown = [s for s in args.tpe_stages.split(",") if s and s not in tpe_stages]
    if unknown:
        parser.error(f"--tpe-stages: {unknown} are not TPE stages ({', '.join(tpe_stages)})")
    warnings.filterwarnings("ignore")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if args.stage == "status":
        print(json.dumps(status(args), indent=1))
        return
    if args.stage == "archive":
        archive_stages(args)
        return
    if args.stage == "stages":
        figures = stage_figures(args)
        print(json.dumps(merge_results(args.json, figures, prefix=args.tag.lstrip("_")), indent=1))
        return
    if args.stage == "unit":
        time_units(args)
        return
    if args.stage != "report":
        run_stage(args, args.stage)
        return
    result = report(args)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
