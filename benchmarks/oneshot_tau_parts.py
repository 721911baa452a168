"""Which part of the one-shot proxy ranks tau's architectures: their layers or their embeddings?

Issue 20's tau is taken over architectures drawn from the whole space, which differ in their
layers (kinds, depth, options, over-arch) and in every feature's width and hash size at once.
This script splits one supernet's proxy of those architectures (the pool that
:func:`benchmarks.oneshot_cross_scores.pooled_pairs` reads: their stand-alone validation AUCs on
the trial budget) into the two, each scored with inherited weights on ``--samples`` validation
samples (with the study's kind heads where it trained them, as its search scores):

- ``joint``: the path as drawn (the proxy whose tau the benchmark reports);
- ``layers``: its layers with every feature at the reference embedding setting (the widest
  width, every row): the layers' share alone;
- ``features``: the sum over features of each one's setting scored alone against the reference
  (a per-feature delta: the reference path, the study's winner's layers at the reference
  embedding, with that one feature at that width and hash size): the embeddings' share alone,
  read additively, the way a per-feature choice is read off a supernet;
- ``additive``: ``layers + features``;
- ``own_features``: ``joint - layers`` (the embeddings' share at the architecture's own layers).

For each, Kendall's tau against the trained AUCs and the standard deviation of the scores (the
trained AUCs' beside them): a part whose spread is wide and whose tau is near 0 is what drags
the joint proxy's tau down.

Run (after a one-shot seed; 3-4 minutes a supernet on the scale workload: 72 architectures
scored twice, 26 features times 9 settings): ``python -m benchmarks.oneshot_tau_parts --tag _k48
--seeds 0,1,2 --tau-from _k16,_k18``; figures merged into
``benchmarks/results/oneshot_tau_parts.json`` (keys ``<tag>_seed<i>_tau_<part>``,
``..._sd_<part>``, ``..._sd_trained``, ``..._pairs``).
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import optuna
from scipy.stats import kendalltau

from benchmarks.oneshot_cross_scores import ARCHIVE, Loader, one_at_a_time, pooled_pairs, winners
from benchmarks.oneshot_tpe_proxy import ROOT, LoadedSupernet, load_supernet
from benchmarks.results_file import RESULTS, merge_results

PARTS = ("joint", "layers", "features", "additive", "own_features")


def reference_setting(names: Mapping[str, list[str]]) -> dict[str, str]:
    """Every embedding choice (``emb.*``) at its largest value: the widest width, every row.

    Example:
        >>> reference_setting({"emb.a": ["0", "4", "16"], "emb.a.hash": ["1", "0.05"], "over_arch": ["8"]})
        {'emb.a': '16', 'emb.a.hash': '1'}
    """
    return {n: max(values, key=float) for n, values in names.items() if n.startswith("emb.")}


def feature_settings(names: Mapping[str, list[str]]) -> list[tuple[str, str, str | None]]:
    """Each width choice's settings other than the reference, as (width choice, width, hash or
    None): a dropped feature (width 0) once, whatever its hash; the others with each hash size.

    Example:
        >>> feature_settings({"emb.a": ["0", "4", "8"], "emb.a.hash": ["1", "0.5"]})
        [('emb.a', '0', None), ('emb.a', '4', '1'), ('emb.a', '4', '0.5'), ('emb.a', '8', '0.5')]
    """
    out: list[tuple[str, str, str | None]] = []
    reference = reference_setting(names)
    for name, widths in names.items():
        if not name.startswith("emb.") or name.endswith(".hash"):
            continue
        hashes = names.get(f"{name}.hash", [None])
        for width in widths:
            for size in [None] if float(width) == 0 else hashes:
                if (width, size) != (reference[name], reference.get(f"{name}.hash")):
                    out.append((name, width, size))
    return out


def with_setting(params: Mapping[str, str], name: str, width: str, size: str | None) -> dict[str, str]:
    """``params`` with width choice ``name`` at ``width`` and its hash choice at ``size``."""
    out = {**params, name: width}
    if size is not None:
        out[f"{name}.hash"] = size
    return out


def setting_of(params: Mapping[str, str], name: str, reference: Mapping[str, str]) -> tuple[str, str | None]:
    """(width, hash or None) of width choice ``name`` in ``params`` (a dropped feature's hash None)."""
    width = params[name]
    hashed = f"{name}.hash"
    size = None if float(width) == 0 else params.get(hashed, reference.get(hashed))
    return width, size


def proxy_parts(loaded: LoadedSupernet, pairs: list[tuple[dict[str, Any], float]],
                reference_layers: Mapping[str, str], samples: int) -> dict[str, list[float]]:
    """Each part's score (module docstring) for every architecture of ``pairs``, in order."""
    search = loaded.search
    names = search.names

    def score(params: Mapping[str, str]) -> float:
        return search.rescore(search.values_of({n: str(params[n]) for n in names}), samples)["val_auc"]

    reference = reference_setting(names)
    base = {**{n: str(v) for n, v in reference_layers.items()}, **reference}
    base_score = score(base)
    delta = {(n, w, h): score(with_setting(base, n, w, h)) - base_score
             for n, w, h in feature_settings(names)}
    width_names = [n for n in names if n.startswith("emb.") and not n.endswith(".hash")]
    parts: dict[str, list[float]] = {part: [] for part in PARTS}
    for params, _ in pairs:
        joint, layers = score(params), score({**params, **reference})
        features = sum(delta.get((n, *setting_of(params, n, reference)), 0.0) for n in width_names)
        values = (joint, layers, features, layers + features, joint - layers)
        for part, value in zip(PARTS, values, strict=True):
            parts[part].append(value)
    return parts


def tau_parts(tag: str, pairs_tags: list[str], seeds: list[int], samples: int, root: Path,
              pool_seeds: list[int], load: Loader = load_supernet,
              archive_dir: Path = ARCHIVE) -> dict[str, Any]:
    """Flat figures for each seed's supernet of run ``tag`` over the pool of the tau trainings
    of ``pairs_tags``'s ``pool_seeds`` (one pool for every supernet), the reference path's
    layers its own study's winner's."""
    from autorec.oneshot.heads import KindHeads

    pairs = pooled_pairs(pairs_tags, pool_seeds, root, archive_dir)
    if len(pairs) < 3:
        raise SystemExit(f"{', '.join(pairs_tags)}: {len(pairs)} calibration trainings; "
                         f"at least 3 are needed")
    trained = [v for _, v in pairs]
    out: dict[str, Any] = {}
    for seed in seeds:
        won = winners(tag, [seed], root, archive_dir)[seed]["params"]
        loaded = load(tag, seed, samples, root)
        record = loaded.oneshot.user_attrs.get("oneshot", {}).get("heads", {})
        if record.get("steps"):  # score as the search did: through its kind heads
            folder = loaded.training.directory.parent / "heads"
            loaded.search.heads = KindHeads(loaded.training, record["steps"], folder, record.get("share"))
            loaded.search.heads.fit()
        layers = {n: v for n, v in won.items() if not n.startswith("emb.")}
        parts = proxy_parts(loaded, pairs, layers, samples)
        prefix = f"{tag[1:]}_seed{seed}"
        for part, scores in parts.items():
            out[f"{prefix}_tau_{part}"] = float(kendalltau(scores, trained).statistic)
            out[f"{prefix}_sd_{part}"] = statistics.pstdev(scores)
        out[f"{prefix}_sd_trained"] = statistics.pstdev(trained)
        out[f"{prefix}_pairs"] = len(pairs)
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
                                 pool_seeds, load=load))
    for key, value in figures.items():
        print(f"{key:40s} {value:.4f}" if isinstance(value, float) else f"{key:40s} {value}")
    merge_results(args.out, figures, prefix=args.tag[1:])


if __name__ == "__main__":
    main()
