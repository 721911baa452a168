"""Which part of the one-shot proxy ranks tau's architectures: their layers or their embeddings?

Issue 20's tau is taken over architectures drawn from the whole space, which differ in their
layers (kinds, depth, options, over-arch) and in every feature's width and hash size at once.
This script splits one supernet's proxy of those architectures (the pool that
:func:`benchmarks.oneshot_cross_scores.pooled_pairs` reads: their stand-alone validation AUCs on
the trial budget) into the parts of :mod:`autorec.oneshot.parts` (``joint``, the proxy as drawn;
``layers``; ``features``, read on the study's own winner's path; ``additive``; ``own_features``),
each scored with inherited weights on ``--samples`` validation samples (with the study's kind
heads where it trained them, as its search scores), and gives each part's Kendall's tau against
the trained AUCs and the spread of its scores (the trained AUCs' beside them): a part whose
spread is wide and whose tau is near 0 is what drags the joint proxy's tau down.

Run (after a one-shot seed; 3-4 minutes a supernet on the scale workload: 72 architectures
scored twice, 26 features times 9 settings): ``python -m benchmarks.oneshot_tau_parts --tag _k48
--seeds 0,1,2 --tau-from _k16,_k18``; figures merged into
``benchmarks/results/oneshot_tau_parts.json`` (keys ``<tag>_seed<i>_tau_<part>``,
``..._sd_<part>``, ``..._sd_trained``, ``..._pairs``, and per first layer kind
``..._layers_mean_<kind>`` and ``..._trained_mean_<kind>``; with ``--no-heads``, scored through
the supernet's one over-arch, the scores' keys end in ``_shared``).

With ``--fit-on tpe,tpe_shared`` the issue's "learned accuracy predictor over the inherited-weight
scores" (:mod:`autorec.oneshot.predictor`): the archived TPE studies' complete trials (trained
stand-alone on the same trial budget, none of them in the pool) are scored into the same parts,
a least-squares fit of their validation AUCs on the layers and features parts learns how much
each is worth, and the fitted predictor ranks the pool (keys ``..._tau_predicted``,
``..._predictor_weight_<part>``, ``..._predictor_pairs``, ``..._predictor_fit_tau``).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

import optuna

from autorec.oneshot.labels import trained_pairs
from autorec.oneshot.parts import part_figures, parts_apart
from autorec.oneshot.predictor import predictor_figures
from benchmarks.oneshot_cross_scores import ARCHIVE, Loader, one_at_a_time, pooled_pairs, winners
from benchmarks.oneshot_tpe_proxy import ROOT, load_supernet, use_kind_heads
from benchmarks.results_file import RESULTS, commit, machine, merge_results
from benchmarks.study_archive import read_study


def study_pairs(stages: list[str], search: Any,
                archive_dir: Path = ARCHIVE) -> list[tuple[dict[str, str], float]]:
    """The complete trials (with their metrics) of the multi-trial studies ``stages`` archived
    under ``archive_dir`` (``<stage>.jsonl``, as ``oneshot_vs_tpe --stage archive`` keeps TPE's),
    each as (the supernet's choice values, its stand-alone validation AUC)
    (:func:`~autorec.oneshot.labels.trained_pairs`)."""
    return [pair for stage in stages
            for pair in trained_pairs(read_study(archive_dir / f"{stage}.jsonl", stage), search,
                                      str(archive_dir / f"{stage}.jsonl"))]


def tau_parts(tag: str, pairs_tags: list[str], seeds: list[int], samples: int, root: Path,
              pool_seeds: list[int], load: Loader = load_supernet,
              archive_dir: Path = ARCHIVE, heads: bool = True,
              fit_on: list[str] | None = None, scores_out: Path | None = None) -> dict[str, Any]:
    """Flat figures for each seed's supernet of run ``tag`` over the pool of the tau trainings
    of ``pairs_tags``'s ``pool_seeds`` (one pool for every supernet), the reference path's
    layers its own study's winner's; with ``heads`` false, every path through the supernet's
    one over-arch (the keys then end in ``_shared``). Beside them, per first layer kind, the
    mean layers part and the mean trained AUC of the architectures with it first
    (``..._layers_mean_<kind>``, ``..._trained_mean_<kind>``). With ``fit_on`` (archived
    multi-trial studies, as ``tpe``), a predictor over the layers and features parts
    (:func:`~autorec.oneshot.predictor.fit_predictor`) is fitted on their trials, scored the same
    way, and ranks the pool, which it never saw: ``..._tau_predicted``, its weights
    (``..._predictor_weight_<part>``), the trials it learned from (``..._predictor_pairs``)
    and its tau over them (``..._predictor_fit_tau``). With ``scores_out``, every architecture's
    part scores and trained AUC are written there too (a list of rows per supernet, merged with
    what the file holds, the machine and commit of the last write beside), to fit other
    predictors on without scoring again."""
    pairs = pooled_pairs(pairs_tags, pool_seeds, root, archive_dir)
    if len(pairs) < 3:
        raise SystemExit(f"{', '.join(pairs_tags)}: {len(pairs)} calibration trainings; "
                         f"at least 3 are needed")
    trained = [v for _, v in pairs]
    out: dict[str, Any] = {}
    for seed in seeds:
        won = winners(tag, [seed], root, archive_dir)[seed]["params"]
        loaded = load(tag, seed, samples, root)
        if heads:  # score as the search did: through its kind heads, where it trained them
            use_kind_heads(loaded)
        layers = {n: v for n, v in won.items() if not n.startswith("emb.")}
        fit = study_pairs(fit_on, loaded.search, archive_dir) if fit_on else []
        parts, theirs = parts_apart(loaded.search, [p for p, _ in pairs], [p for p, _ in fit], layers,
                                    samples)
        prefix, end = f"{tag[1:]}_seed{seed}", "" if heads else "_shared"
        out.update({f"{prefix}_{key}{end}": value for key, value in part_figures(parts, trained).items()})
        out[f"{prefix}_pairs"] = len(pairs)
        if fit_on:
            figures = predictor_figures(theirs, [v for _, v in fit], parts, trained)
            out.update({f"{prefix}_{key}{'' if key == 'predictor_pairs' else end}": value
                        for key, value in figures.items()})
        if scores_out is not None:
            rows = [{"set": name, "trained": v, **{p: scores[p][i] for p in scores}}
                    for name, scores, these in (("pool", parts, pairs), ("fit", theirs, fit))
                    for i, (_, v) in enumerate(these)]
            kept = json.loads(scores_out.read_text()) if scores_out.exists() else {}
            kept |= {f"{prefix}{end}": rows, "machine": machine(), "commit": commit()}
            scores_out.write_text(json.dumps(kept, indent=1, sort_keys=True) + "\n")
        kinds = [str(p.get("layer0.kind")) for p, _ in pairs]
        for kind in sorted(set(kinds)):  # where the layers part comes from
            rows = [i for i, k in enumerate(kinds) if k == kind]
            out[f"{prefix}_layers_mean_{kind}{end}"] = statistics.fmean(parts["layers"][i] for i in rows)
            out[f"{prefix}_trained_mean_{kind}"] = statistics.fmean(trained[i] for i in rows)
    return out


def seed_list(parser: argparse.ArgumentParser, flag: str, given: str) -> list[int]:
    """``given`` (integers separated by commas) as a list; a parser error naming ``--flag``."""
    try:
        return [int(s) for s in given.split(",")]
    except ValueError:
        parser.error(f"--{flag}: expected integers separated by commas, got {given!r}")
        raise  # parser.error exits


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tag", required=True, help="the run whose supernets score (e.g. _k48)")
    parser.add_argument("--tau-from", required=True,
                        help="the runs whose tau trainings are ranked, separated by commas (e.g. _k16,_k18)")
    parser.add_argument("--seeds", default="0,1,2", help="the supernets that score")
    parser.add_argument("--pool-seeds", default="0,1,2",
                        help="the seeds of --tau-from whose trainings are pooled")
    parser.add_argument("--samples", type=int, default=16384, help="validation samples per score")
    parser.add_argument("--no-heads", action="store_true",
                        help="score through the supernet's one over-arch, not its kind heads "
                             "(keys end in _shared)")
    parser.add_argument("--fit-on", default=None,
                        help="archived multi-trial studies whose trials a predictor over the parts is "
                             "fitted on, separated by commas (e.g. tpe,tpe_shared)")
    parser.add_argument("--scores-out", type=Path, default=None,
                        help="a JSON file for every architecture's part scores and trained AUC")
    parser.add_argument("--root", type=Path, default=ROOT)
    parser.add_argument("--out", type=Path, default=RESULTS / "oneshot_tau_parts.json")
    args = parser.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    seeds, pool_seeds = (seed_list(parser, flag, getattr(args, flag.replace("-", "_")))
                         for flag in ("seeds", "pool-seeds"))
    for name in ("tag", "tau_from"):
        if not all(t.startswith("_") for t in getattr(args, name).split(",")):
            parser.error(f"--{name.replace('_', '-')}: expected a run's tag, which starts with '_' "
                         f"(as _k48), "
                         f"got {getattr(args, name)!r}")
    if args.samples < 1:
        parser.error(f"--samples: expected a positive number of validation samples, got {args.samples}")
    load, figures = one_at_a_time(load_supernet), {f"{args.tag[1:]}_samples": args.samples}
    for seed in seeds:  # one supernet held at a time
        figures.update(tau_parts(args.tag, args.tau_from.split(","), [seed], args.samples, args.root,
                                 pool_seeds, load=load, heads=not args.no_heads,
                                 fit_on=args.fit_on.split(",") if args.fit_on else None,
                                 scores_out=args.scores_out))
    for key, value in figures.items():
        print(f"{key:40s} {value:.4f}" if isinstance(value, float) else f"{key:40s} {value}")
    merge_results(args.out, figures, prefix=args.tag[1:])


if __name__ == "__main__":
    main()
