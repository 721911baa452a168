"""Does the one-shot proxy favour a layer kind? Every layer setting of the space scored on one
supernet at one all-alike embedding width, with the shared over-arch and with one per last kind.

Issue 20's search on the ``scale`` workload sent DHEN to the rung on every seed while one-epoch
trainings (TPE's studies) put DCNv2-first models 0.015 above DHEN. This script loads a one-shot
study's trained supernet (its last checkpoint; nothing of the supernet trains) and scores, on
``--samples`` validation samples, every layer setting of the space (each layer's kind with each
of its own options, the over-arch choices) with every feature at ``--width`` and all its rows:

- ``shared``: with the supernet's one over-arch, as the search scores;
- ``heads``: with an over-arch per last layer kind (:class:`autorec.oneshot.heads.KindHeads`,
  ``--heads`` steps each, trained here into a scratch folder), as ``kind_heads`` scores;
- ``--probe-steps N``: a few named settings each scored after N steps of the over-arch alone on
  that one path (the rest frozen): how far the head alone moves a kind;
- ``--tpe``: Kendall's tau of both scores against the trained validation AUC of TPE's complete
  trials (``tpe`` and ``tpe_shared`` studies, one-epoch trainings);
- ``--tau-from _k18``: Kendall's tau of both over the architectures that run trained for its own
  tau (same seed; the benchmark's tau set, :func:`benchmarks.oneshot_cross_scores.calibration_pairs`).

Printed per first-layer kind: its best setting's rank of all and the kind's mean score.

Run (after a one-shot seed; 3-8 minutes a supernet): ``python -m benchmarks.oneshot_kind_bias
--tag _k34 --seed 0 --heads 300 --probe-steps 300 --tpe --tau-from _k18``; figures merged into
``benchmarks/results/oneshot_kind_bias.json``.
"""

from __future__ import annotations

import argparse
import itertools
import re
import statistics
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import TrialState
from scipy.stats import kendalltau

from autorec.oneshot.grid import layer_settings
from autorec.oneshot.heads import KindHeads, train_head
from autorec.oneshot.labels import supernet_values
from benchmarks.oneshot_cross_scores import calibration_pairs
from benchmarks.oneshot_tpe_proxy import ROOT, load_supernet
from benchmarks.results_file import RESULTS, merge_results

PROBES = ("dhen2 512", "dhen3 512", "dcnv2(1,0) 512", "dcnv2(1,16) 256", "dcnv2(1,16)+dlrm 256",
          "dcnv2(1,0)+dcnv2(2,0) 512", "dcnv2(1,16)+dhen2 512", "dlrm 512", "wukong(16,8) 256")


def label(arch: Mapping[str, Any]) -> str:
    """A layer setting in short: each layer's kind and options, then the over-arch's first width.

    Example:
        >>> label({"layers": [{"kind": "dcnv2", "num_layers": 1, "rank": 0}, {"kind": "dhen",
        ...        "modules": ["dot", "dcn"]}], "over_arch": [512, 256]})
        'dcnv2(1,0)+dhen2 512'
    """
    parts = []
    for layer in arch["layers"]:
        kind = layer["kind"]
        if kind == "dcnv2":
            parts.append(f"dcnv2({layer.get('num_layers')},{layer.get('rank')})")
        elif kind == "wukong":
            parts.append(f"wukong({layer.get('n_fm')},{layer.get('n_lcb')})")
        elif kind == "dhen":
            parts.append(f"dhen{len(layer.get('modules') or ())}")
        else:
            parts.append(kind)
    return "+".join(parts) + f" {arch['over_arch'][0]}"


def slug(text: str) -> str:
    """``text`` as a JSON key part: ``dcnv2(1,0)+dhen2 512`` -> ``dcnv2_1_0_dhen2_512``."""
    return re.sub(r"_+", "_", re.sub(r"[^a-z0-9]", "_", text.lower())).strip("_")


def all_alike(names: Mapping[str, Sequence[str]], width: str) -> dict[str, str]:
    """Every feature at ``width`` with all its rows (hash size 1)."""
    return {n: ("1" if n.endswith(".hash") else width) for n in names if n.startswith("emb.")}


def kind_figures(rows: list[tuple[str, str, float]], prefix: str) -> dict[str, Any]:
    """Per first-layer kind, its best setting's rank (1 = the best of all) and the kind's mean
    score; the rank of each of :data:`PROBES`. ``rows``: (label, first kind, score)."""
    ranked = sorted(rows, key=lambda r: -r[2])
    out: dict[str, Any] = {f"{prefix}_settings": len(ranked)}
    for i, (name, kind, _) in enumerate(ranked, 1):
        out.setdefault(f"{prefix}_best_rank_{kind}", i)
        if name in PROBES:
            out.setdefault(f"{prefix}_rank_{slug(name)}", i)
    for kind in sorted({r[1] for r in rows}):
        out[f"{prefix}_mean_auc_{kind}"] = statistics.fmean(r[2] for r in rows if r[1] == kind)
    return out


def head_probe(loaded: Any, values: Mapping[str, Any], steps: int, samples: int) -> float:
    """The score of the path at ``values`` after ``steps`` steps of the over-arch alone on it
    (from the shared weights, restored after)."""
    head = loaded.training.search.supernet.over_arch
    shared = {k: v.detach().clone() for k, v in head.state_dict().items()}
    try:
        train_head(loaded.training, itertools.repeat(values), steps)
        return loaded.search.rescore(values, samples)["val_auc"]
    finally:
        head.load_state_dict(shared)


def tpe_pairs(loaded: Any, names: Mapping[str, Sequence[str]], samples: int,
              root: Path) -> list[tuple[float, float]]:
    """(proxy score, trained val AUC) of every complete trial of the ``tpe`` and ``tpe_shared``
    studies under ``root``, scored with whatever head the search gives the path."""
    pairs = []
    for stage in ("tpe", "tpe_shared"):
        db = root / stage / stage / "study.db"
        if not db.exists():
            continue
        study = optuna.load_study(study_name=stage, storage=f"sqlite:///{db}")
        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
            if "metrics" not in t.user_attrs:
                continue
            values = loaded.search.values_of(supernet_values(t.params, names))
            pairs.append((loaded.search.rescore(values, samples)["val_auc"],
                          t.user_attrs["metrics"]["val"]["auc"]))
    return pairs


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tag", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--width", default="16")
    parser.add_argument("--samples", type=int, default=16384)
    parser.add_argument("--heads", type=int, default=300, help="steps per kind head (0: shared only)")
    parser.add_argument("--probe-steps", type=int, default=0)
    parser.add_argument("--probe", default=";".join(PROBES),
                        help="the settings probed (labels as printed, separated by ';')")
    parser.add_argument("--tpe", action="store_true")
    parser.add_argument("--tau-from", default=None, help="a run's tag whose tau trainings to use (e.g. _k18)")
    parser.add_argument("--root", type=Path, default=ROOT)
    parser.add_argument("--out", type=Path, default=RESULTS / "oneshot_kind_bias.json")
    args = parser.parse_args(argv)

    loaded = load_supernet(args.tag, args.seed, args.samples, args.root)
    search, names = loaded.search, loaded.search.names
    widths = next(v for n, v in names.items() if n.startswith("emb.") and not n.endswith(".hash"))
    if args.width not in widths:
        raise SystemExit(f"--width: {args.width!r} is not a width of the space's embedding choices")
    emb = all_alike(names, args.width)
    settings, seen = [], set()
    for setting in layer_settings(names):
        values = search.values_of({**setting, **emb})
        arch = search.net.derive(values).to_dict()
        name = label(arch)
        if name not in seen:
            seen.add(name)
            settings.append((name, arch["layers"][0]["kind"], values))
    by_name = {name: values for name, _, values in settings}
    probes = args.probe.split(";") if args.probe_steps else []
    unknown = [name for name in probes if name not in by_name]
    if unknown:  # before any scoring
        known = sorted(by_name)
        more = f" (and {len(known) - 8} more, labelled alike)" if len(known) > 8 else ""
        raise SystemExit(f"--probe: no layer setting {unknown[0]!r}; the space's are, for example: "
                         f"{', '.join(known[:8])}{more}")
    key = f"{args.tag.lstrip('_')}_s{args.seed}_w{args.width}"
    figures: dict[str, Any] = {}
    modes: list[tuple[str, Any]] = [("shared", None)]
    if args.heads:
        with tempfile.TemporaryDirectory(prefix="kind_heads_") as scratch:  # the heads stay in memory
            heads = KindHeads(loaded.training, args.heads, Path(scratch))
            figures[f"{key}_heads{args.heads}_seconds"] = heads.fit()
        modes.append((f"heads{args.heads}", heads))
    for mode, heads in modes:
        search.heads = heads
        rows = [(name, kind, search.rescore(values, args.samples)["val_auc"])
                for name, kind, values in settings]
        figures.update(kind_figures(rows, f"{key}_{mode}"))
        if args.tpe:
            pairs = tpe_pairs(loaded, names, args.samples, args.root)
            figures[f"{key}_{mode}_tpe_trials"] = len(pairs)
            figures[f"{key}_{mode}_tpe_tau"] = float(kendalltau(*zip(*pairs, strict=True)).statistic)
        if args.tau_from:
            trained = calibration_pairs(args.tau_from, args.seed, args.root)
            pairs = [(search.rescore(search.values_of({n: str(p[n]) for n in names}),
                                     args.samples)["val_auc"], auc) for p, auc in trained]
            tau = kendalltau(*zip(*pairs, strict=True)).statistic
            figures[f"{key}_{mode}_tau_on{args.tau_from}"] = float(tau)
            figures[f"{key}_{mode}_tau_on{args.tau_from}_pairs"] = len(pairs)
        if heads is not None:
            heads.use(None)
    search.heads = None
    for name in probes:
        figures[f"{key}_probe_{slug(name)}_before"] = search.rescore(by_name[name], args.samples)["val_auc"]
        figures[f"{key}_probe{args.probe_steps}_{slug(name)}_after"] = head_probe(
            loaded, by_name[name], args.probe_steps, args.samples)
    for name, value in sorted(figures.items()):
        print(f"{name}: {value:.4f}" if isinstance(value, float) else f"{name}: {value}")
    merge_results(args.out, figures)
    return figures


if __name__ == "__main__":
    main()
