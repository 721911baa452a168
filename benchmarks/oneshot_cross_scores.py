"""Do the supernets of different search seeds agree on the winners? Each seed's winner scored on
every seed's supernet.

Issue 20's one-shot seeds end on different models, and their finals differ by more than the
target's tolerance. This script takes the winner (the ``final`` trial) of each seed's study of
one run (``--winners``, e.g. ``_k9``) and scores it with inherited weights on the supernet of
each seed of another, or the same, run (``--tag``), on the rescore's ``--samples`` validation
samples; beside each score, its rank among that study's rescored candidates (the screen's best,
on the same samples) and the winner's stand-alone validation AUCs (its rung and final trainings,
every training seed the run gave it). A proxy that scores the model that trains best below the
others on every supernet is biased, not unlucky; one that disagrees between supernets is noisy.
With ``--tau-from``, each supernet's Kendall's tau over the architectures another run (same
seed) trained for its own tau: a new supernet's tau without training them again.

With ``--full-hash``, each winner is also scored with every hash size at 1: the share of its
score that its hashed tables cost it on that supernet.

Run (after the one-shot stages; a minute per supernet: the dataset, then a forward pass per
winner): ``python -m benchmarks.oneshot_cross_scores --tag _k8i --winners _k9 --seeds 0,1,2
[--tau-from _k8i] [--full-hash]``;
figures merged into ``benchmarks/results/oneshot_cross_scores.json``.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState
from scipy.stats import kendalltau

from benchmarks.oneshot_tpe_proxy import ROOT, LoadedSupernet, load_supernet, use_kind_heads
from benchmarks.results_file import RESULTS, merge_results
from benchmarks.study_archive import open_oneshot

Loader = Callable[[str, int, int, Path], LoadedSupernet]  # (tag, seed, samples, root) -> its supernet
TAU_CACHE = Path.home() / ".cache" / "autorec-bench" / "tau_ceiling"  # oneshot_tau_ceiling's trainings
ARCHIVE = RESULTS / "studies"  # where ``oneshot_vs_tpe --stage archive`` keeps the studies' trials


def winners(tag: str, seeds: list[int], root: Path,
            archive_dir: Path = ARCHIVE) -> dict[int, dict[str, Any]]:
    """Seed -> its study's winner: ``params`` (the final trial's), ``trial`` (the candidate's
    number) and ``val_aucs`` (every stand-alone training of that candidate on the final's budget:
    the rung's and the final's, one per training seed)."""
    out = {}
    for seed in seeds:
        study = open_oneshot(root, f"oneshot{tag}_seed{seed}", archive_dir)
        done = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        final = [t for t in done if t.user_attrs.get("stage") == "final"]
        if not final:
            raise SystemExit(f"oneshot{tag}_seed{seed}: no final training yet (seed {seed} of {tag})")
        number = final[-1].user_attrs["proxy_trial"]
        by_seed = {t.user_attrs.get("train_seed"): t.user_attrs["metrics"]["val"]["auc"] for t in done
                   if t.user_attrs.get("stage") in ("final_rung", "final")
                   and t.user_attrs.get("proxy_trial") == number}
        out[seed] = {"params": dict(final[-1].params), "trial": number, "val_aucs": list(by_seed.values())}
    return out


def full_hash(params: dict[str, str], names: dict[str, list[str]]) -> dict[str, str]:
    """``params`` (choice name -> value name) with every hash choice at its value ``1`` (every row).

    Example:
        >>> names = {"emb.a": ["4", "8"], "emb.a.hash": ["1", "0.05"]}
        >>> full_hash({"emb.a": "8", "emb.a.hash": "0.05"}, names)
        {'emb.a': '8', 'emb.a.hash': '1'}
    """
    return {n: "1" if n.endswith(".hash") and "1" in names[n] else v for n, v in params.items()}


def cross_scores(tag: str, winners_tag: str, seeds: list[int], samples: int, root: Path,
                 with_full_hash: bool = False, supernets: list[int] | None = None,
                 load: Loader = load_supernet) -> dict[str, Any]:
    """Flat figures: ``<winners>_seed<j>_val_auc_mean`` / ``_draws`` / ``_trial``, and for every
    supernet seed i and winner seed j ``<tag>_seed<i>_scores<winners>_seed<j>`` (the proxy) and
    ``..._rank`` (1 + the rescored candidates of seed i's study that score higher); with
    ``with_full_hash`` also ``..._full_hash``, the winner's proxy with every table's rows kept.
    ``supernets``: the seeds i whose supernets score (default ``seeds``), loaded by ``load``."""
    won = winners(winners_tag, seeds, root)
    out: dict[str, Any] = {"samples": samples}
    for j, w in won.items():
        out[f"{winners_tag[1:]}_seed{j}_trial"] = w["trial"]
        out[f"{winners_tag[1:]}_seed{j}_val_auc_mean"] = statistics.fmean(w["val_aucs"])
        out[f"{winners_tag[1:]}_seed{j}_draws"] = len(w["val_aucs"])
    for i in seeds if supernets is None else supernets:
        loaded = load(tag, i, samples, root)
        record = loaded.oneshot.user_attrs.get("oneshot", {})
        rescored = [v["val_auc"] for v in record.get("rescored", {}).values()]
        prefix = f"{tag[1:]}_seed{i}"
        out[f"{prefix}_rescored_best"] = max(rescored, default=float("nan"))
        for j, w in won.items():
            params = {n: str(w["params"][n]) for n in loaded.search.names}
            score = loaded.search.rescore(loaded.search.values_of(params), samples)["val_auc"]
            out[f"{prefix}_scores{winners_tag}_seed{j}"] = score
            if with_full_hash:
                kept = loaded.search.values_of(full_hash(params, loaded.search.names))
                key = f"{prefix}_scores{winners_tag}_seed{j}_full_hash"
                out[key] = loaded.search.rescore(kept, samples)["val_auc"]
            out[f"{prefix}_scores{winners_tag}_seed{j}_rank"] = 1 + sum(v > score for v in rescored)
    return out


def one_at_a_time(load: Loader = load_supernet) -> Loader:
    """``load`` that keeps the last supernet it loaded and gives it again for the same
    arguments, and frees it before it loads another: a seed's supernet is read once for the
    cross scores and the tau, and two are never held at once (each holds its dataset and
    tables: three seeds' kept alive took 18.7 GiB)."""
    held: dict[tuple[Any, ...], LoadedSupernet] = {}

    def get(tag: str, seed: int, samples: int, root: Path) -> LoadedSupernet:
        key = (tag, seed, samples, str(root))
        if key not in held:
            held.clear()
            gc.collect()
            held[key] = load(tag, seed, samples, root)
        return held[key]
    return get


def training_key(trial: FrozenTrial) -> str:
    """The key of a tau training in :mod:`benchmarks.oneshot_tau_ceiling`'s files: the candidate it
    trained (``candidate<N>``, its ``proxy_trial``), which an archived study keeps, where the
    training's own trial number is renumbered when the archive is replayed (the archive holds
    the trainings alone, not the screen's trials before them)."""
    return f"candidate{trial.user_attrs['proxy_trial']}"


def full_budget_aucs(name: str, epochs: int, out_dir: Path = TAU_CACHE) -> dict[str, float]:
    """Candidate (:func:`training_key`) -> validation AUC of the tau architectures of study
    ``name`` trained again on ``epochs`` whole epochs (``benchmarks.oneshot_tau_ceiling
    --epochs``, kept in ``out_dir``); SystemExit naming the file and the command when there is none."""
    found = sorted(out_dir.glob(f"{name}_train_seed*_epochs{epochs}.json"))
    if not found:
        raise SystemExit(f"{out_dir / f'{name}_train_seed<N>_epochs{epochs}.json'}: no full-budget trainings "
                         f"(run python -m benchmarks.oneshot_tau_ceiling --epochs {epochs} on {name})")
    if len(found) > 1:
        names = ", ".join(p.name for p in found)
        raise SystemExit(f"{name}: full-budget trainings under several seeds ({names}); keep one")
    return json.loads(found[0].read_text())


def calibration_pairs(tag: str, seed: int, root: Path, archive_dir: Path = ARCHIVE, epochs: int | None = None,
                      out_dir: Path = TAU_CACHE) -> list[tuple[dict[str, Any], float]]:
    """(params, trained validation AUC) of every architecture study ``oneshot<tag>_seed<seed>``
    trained for its Kendall's tau (its ``calibrate`` trainings on the trial budget: the re-ranked
    candidates and the draws from the space; where re-ranks train on the trial budget themselves,
    the draws' ``rerank`` trainings), from its database or, on a machine without it, from the
    archive of its trainings (``oneshot_vs_tpe --stage archive``). With ``epochs``, the AUCs of
    their trainings on that many whole epochs instead (:func:`full_budget_aucs`; those trained so
    far)."""
    name = f"oneshot{tag}_seed{seed}"
    study = open_oneshot(root, name, archive_dir)
    if epochs is None:
        return [(dict(t.params), t.user_attrs["metrics"]["val"]["auc"]) for t in tau_trainings(study)]
    kept = full_budget_aucs(name, epochs, out_dir)
    return [(dict(t.params), kept[training_key(t)]) for t in tau_trainings(study) if training_key(t) in kept]


def tau_trainings(study: optuna.Study) -> list[FrozenTrial]:
    """The trainings ``study`` made for its tau: trials of stage ``calibrate`` (re-ranks shorter
    than the trial budget), or else the draws' ``rerank`` trainings (``calibration_numbers``)."""
    drawn = set(study.user_attrs.get("oneshot", {}).get("calibration_numbers", []))
    return [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
            if t.user_attrs.get("stage") == "calibrate"
            or (t.user_attrs.get("stage") == "rerank" and t.user_attrs.get("proxy_trial") in drawn)]


def pooled_pairs(pairs_tags: list[str], seeds: list[int], root: Path, archive_dir: Path = ARCHIVE,
                 epochs: int | None = None, out_dir: Path = TAU_CACHE) -> list[tuple[dict[str, Any], float]]:
    """Every architecture the runs ``pairs_tags`` trained for their taus, over ``seeds`` (each
    once: a repeat keeps its first training). Their stand-alone validation AUCs depend on neither
    the supernet nor the seed that drew them, so one pool serves every supernet."""
    out: dict[str, tuple[dict[str, Any], float]] = {}
    for pairs_tag in pairs_tags:
        for seed in seeds:
            for params, auc in calibration_pairs(pairs_tag, seed, root, archive_dir, epochs, out_dir):
                out.setdefault(json.dumps(params, sort_keys=True), (params, auc))
    return list(out.values())


def borrowed_tau(tag: str, pairs_tags: list[str], seeds: list[int], samples: int, root: Path,
                 pool: bool = False, heads: bool = False, pool_seeds: list[int] | None = None,
                 load: Loader = load_supernet, epochs: int | None = None,
                 out_dir: Path = TAU_CACHE) -> dict[str, Any]:
    """Kendall's tau of each seed's supernet of run ``tag`` over the architectures the runs
    ``pairs_tags`` trained for their own taus (same seed; with ``pool``, every seed's, or
    ``pool_seeds``, through :func:`pooled_pairs`): their stand-alone validation AUCs do not
    depend on the supernet, so a new supernet's proxy is measured without training them again.
    With ``heads``, each path is scored with the over-arch of its last layer kind that the study
    trained (``kind_heads``, as its search scored). With ``epochs``, against their trainings on
    that many whole epochs (:func:`full_budget_aucs`). Flat figures
    ``<tag>_seed<i>_kendall_tau_on<tags>`` (``_pooled``, ``_heads``, ``_epochs<N>`` appended as
    set) and ``..._pairs``; ``_pooled`` is the pool of the benchmark's seeds 0, 1 and 2, any other
    pool names its seeds (``_pooled01``), so a figure's key says which trainings it ranks."""
    pooled_seeds = sorted(pool_seeds or seeds)
    pool_name = "_pooled" + ("" if pooled_seeds == [0, 1, 2] else "".join(map(str, pooled_seeds)))
    out: dict[str, Any] = {}
    def pairs_of(of_seeds: list[int]) -> list[tuple[dict[str, Any], float]]:
        return pooled_pairs(pairs_tags, of_seeds, root, epochs=epochs, out_dir=out_dir)
    pooled = pairs_of(pool_seeds or seeds) if pool else None
    for i in seeds:
        pairs = pooled if pooled is not None else pairs_of([i])
        if len(pairs) < 3:
            raise SystemExit(f"{', '.join(pairs_tags)} seed {i}: {len(pairs)} calibration trainings; "
                             f"at least 3 are needed for a tau")
        loaded = load(tag, i, samples, root)
        if heads and not use_kind_heads(loaded):
            raise SystemExit(f"{loaded.name}: its search trained no kind heads (kind_heads off)")
        proxy = [loaded.search.rescore(loaded.search.values_of({n: str(p[n]) for n in loaded.search.names}),
                                       samples)["val_auc"] for p, _ in pairs]
        key = (f"{tag[1:]}_seed{i}_kendall_tau_on{''.join(pairs_tags)}"
               f"{pool_name if pool else ''}{'_heads' if heads else ''}"
               f"{'' if epochs is None else f'_epochs{epochs}'}")
        out[key] = float(kendalltau(proxy, [v for _, v in pairs]).statistic)
        out[f"{key}_pairs"] = len(pairs)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tag", required=True, help="the run whose supernets score (e.g. _k8i)")
    parser.add_argument("--winners", required=True, help="the run whose winners are scored (e.g. _k9)")
    parser.add_argument("--tau-from", default=None,
                        help="also Kendall's tau of --tag's supernets over these runs' calibration "
                             "trainings (e.g. _k8i: the 12 architectures it trained for its tau; "
                             "several separated by commas)")
    parser.add_argument("--tau-pool", action="store_true",
                        help="tau over every seed's calibration trainings, not the supernet's own seed's")
    parser.add_argument("--tau-pool-seeds", default=None,
                        help="with --tau-pool: the seeds whose trainings are pooled (default --seeds)")
    parser.add_argument("--tau-heads", action="store_true",
                        help="tau with the study's kind heads (its search's proxy with kind_heads)")
    parser.add_argument("--tau-epochs", type=int, default=None,
                        help="tau against the architectures' trainings on this many whole epochs "
                             "(benchmarks.oneshot_tau_ceiling --epochs), not the trial budget's")
    parser.add_argument("--tau-dir", type=Path, default=TAU_CACHE,
                        help="with --tau-epochs: where those trainings are kept (oneshot_tau_ceiling's "
                             "--out-dir; benchmarks/results/tau_ceiling holds a copy)")
    parser.add_argument("--full-hash", action="store_true",
                        help="also score each winner with every table's rows kept (what hashing costs it)")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--samples", type=int, default=32768, help="validation samples per score")
    parser.add_argument("--root", type=Path, default=ROOT)
    parser.add_argument("--out", type=Path, default=RESULTS / "oneshot_cross_scores.json")
    args = parser.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        seeds = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        parser.error(f"--seeds: expected integers separated by commas, got {args.seeds!r}")
    for name in ("tag", "winners", "tau_from"):
        given = getattr(args, name)
        if given is not None and not all(t.startswith("_") for t in given.split(",")):
            parser.error(f"--{name.replace('_', '-')}: expected a run's tag, which starts with '_' (as _k9), "
                         f"got {given!r}")
    pool_seeds = seeds
    if args.tau_pool_seeds is not None:
        try:
            pool_seeds = [int(s) for s in args.tau_pool_seeds.split(",")]
        except ValueError:
            parser.error(f"--tau-pool-seeds: expected integers separated by commas, "
                         f"got {args.tau_pool_seeds!r}")
    load, figures = one_at_a_time(load_supernet), {}
    for i in seeds:  # supernet by supernet, each loaded once and freed before the next
        figures.update(cross_scores(args.tag, args.winners, seeds, args.samples, args.root, args.full_hash,
                                    supernets=[i], load=load))
        if args.tau_from:
            figures.update(borrowed_tau(args.tag, args.tau_from.split(","), [i], args.samples, args.root,
                                        args.tau_pool, args.tau_heads, pool_seeds, load=load,
                                        epochs=args.tau_epochs, out_dir=args.tau_dir))
    for key, value in figures.items():
        print(f"{key:40s} {value:.4f}" if isinstance(value, float) else f"{key:40s} {value}")
    merge_results(args.out, figures, prefix=f"{args.tag[1:]}_by{args.winners}")


if __name__ == "__main__":
    main()
