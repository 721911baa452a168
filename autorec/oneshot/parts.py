"""Which part of the proxy can be trusted: tau split into an architecture's layers and its embeddings.

Kendall's tau over architectures drawn from the whole space mixes two rankings: of their layers
(kinds, depth, options, over-arch) and of their per-feature embedding settings (each feature's
width and hash size). :func:`proxy_parts` scores each architecture four more ways with inherited
weights (:class:`~autorec.oneshot.search.CandidateSearch`, with its kind heads where the search
has them):

- ``layers``: its layers with every feature at the reference embedding setting (each embedding
  choice at its largest value: the widest width, every row);
- ``features``: the sum over features of each one's setting scored alone on a reference path
  (the given layers at the reference embedding) as a difference from that path: the embeddings'
  share, read additively (every setting of every feature is scored once, whatever the number of
  architectures);
- ``additive``: ``layers + features``;
- ``own_features``: ``joint - layers`` (the embeddings' share at the architecture's own layers),

beside ``joint``, the path as drawn (the proxy). :func:`part_figures` gives each part's tau
against the trained AUCs and the spread of its scores. On issue 20's ``scale`` workload the
layers part ranked 72 whole-space architectures at 0.02-0.11 on thirteen supernets, with a
spread as wide as the trained AUCs', and the features part at 0.61-0.73 on the three that train
per-feature paths for 1000 steps after 2000 all-alike ones with kind heads fitted there
(BENCHMARKS.md, ``benchmarks/oneshot_tau_parts.py``): the supernet ranks the embeddings there, not
the layers, which the search's race of real trainings decides.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from scipy.stats import kendalltau

PARTS = ("joint", "layers", "features", "additive", "own_features")


def reference_setting(names: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """Every embedding choice (``emb.*``) at its largest value: the widest width, every row.

    Example:
        >>> reference_setting({"emb.a": ["0", "4", "16"], "emb.a.hash": ["1", "0.05"], "over_arch": ["8"]})
        {'emb.a': '16', 'emb.a.hash': '1'}
    """
    return {n: max(values, key=float) for n, values in names.items() if n.startswith("emb.")}


def feature_settings(names: Mapping[str, Sequence[str]]) -> list[tuple[str, str, str | None]]:
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
        hashes: Sequence[str | None] = names.get(f"{name}.hash", [None])
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
    """(width, hash or None) of width choice ``name`` in ``params`` (a dropped feature's hash None).

    Example:
        >>> setting_of({"emb.a": "0", "emb.a.hash": "0.5"}, "emb.a", {"emb.a.hash": "1"})
        ('0', None)
    """
    width = params[name]
    hashed = f"{name}.hash"
    size = None if float(width) == 0 else params.get(hashed, reference.get(hashed))
    return width, size


def proxy_parts(search: Any, architectures: Sequence[Mapping[str, Any]], reference_layers: Mapping[str, Any],
                samples: int) -> dict[str, list[float]]:
    """Each part's score (module docstring) for every architecture (choice name -> value name,
    as Optuna records them) of ``architectures``, in order; ``reference_layers`` the layer and
    over-arch choices of the reference path (its embedding choices are ignored); scored by
    ``search`` (a :class:`~autorec.oneshot.search.CandidateSearch`) on ``samples`` validation
    samples. Costs 2 scores an architecture and 1 + ``len(feature_settings(search.names))``, each
    distinct path scored once."""
    names = search.names
    scored: dict[tuple[str, ...], float] = {}  # a path scored once (architectures may share layers)

    def score(params: Mapping[str, Any]) -> float:
        path = tuple(str(params[n]) for n in names)
        if path not in scored:
            scored[path] = search.rescore(search.values_of(dict(zip(names, path, strict=True))),
                                          samples)["val_auc"]
        return scored[path]

    reference = reference_setting(names)
    base = {**{n: str(v) for n, v in reference_layers.items() if not n.startswith("emb.")}, **reference}
    base_score = score(base)
    delta = {(n, w, h): score(with_setting(base, n, w, h)) - base_score
             for n, w, h in feature_settings(names)}
    width_names = [n for n in names if n.startswith("emb.") and not n.endswith(".hash")]
    parts: dict[str, list[float]] = {part: [] for part in PARTS}
    for architecture in architectures:
        params = {n: str(architecture[n]) for n in names}
        joint, layers = score(params), score({**params, **reference})
        features = sum(delta.get((n, *setting_of(params, n, reference)), 0.0) for n in width_names)
        values = (joint, layers, features, layers + features, joint - layers)
        for part, value in zip(PARTS, values, strict=True):
            parts[part].append(value)
    return parts


def part_figures(parts: Mapping[str, Sequence[float]], trained: Sequence[float]) -> dict[str, float | None]:
    """``tau_<part>`` (Kendall's tau against ``trained``; None where a side is constant or under 3
    pairs) and ``sd_<part>`` (the scores' population standard deviation) for each part, and
    ``sd_trained``.

    Example:
        >>> figures = part_figures({"joint": [0.5, 0.6, 0.7], "layers": [0.6, 0.6, 0.6]}, [0.1, 0.3, 0.2])
        >>> round(figures["tau_joint"], 3), figures["tau_layers"], figures["sd_layers"]
        (0.333, None, 0.0)
    """
    out: dict[str, float | None] = {}
    for part, scores in parts.items():
        tau = kendalltau(scores, trained).statistic if len(scores) >= 3 else None
        out[f"tau_{part}"] = None if tau is None or tau != tau else float(tau)
        out[f"sd_{part}"] = statistics.pstdev(scores)
    out["sd_trained"] = statistics.pstdev(trained)
    return out


def parts_apart(search: Any, architectures: Sequence[Mapping[str, Any]],
                labelled: Sequence[Mapping[str, Any]], reference_layers: Mapping[str, Any],
                samples: int) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """:func:`proxy_parts` of ``architectures`` and of ``labelled`` (another study's trained ones,
    which a predictor learns from) in one call, so every feature setting is scored once for
    both: (the first's parts, the second's)."""
    scored = proxy_parts(search, [*architectures, *labelled], reference_layers, samples)
    n = len(architectures)
    return ({part: scores[:n] for part, scores in scored.items()},
            {part: scores[n:] for part, scores in scored.items()})
