"""How a one-shot study orders its candidates: distinct architectures, families of layer kinds
taken in turns, the layer settings the all-alike embeddings are crossed with, and the order in
which the re-ranked candidates go to the final (ties broken by capacity, by the proxy that chose
them, or by measured training speed), and which of the final rung's trainings goes on. Pure
functions of the study's trials (:mod:`autorec.oneshot.run` applies them).

Example:
    >>> import optuna
    >>> t = optuna.trial.create_trial(value=0.7, user_attrs={"arch": {"layers": [{"kind": "dhen"},
    ...                                                                   {"kind": "wukong"}]}})
    >>> family(t), family(t, "kind")
    (('dhen', 'wukong'), ('dhen',))
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TypeVar

from optuna.trial import FrozenTrial

from autorec.arch import ArchSpec
from autorec.oneshot.search import PROXY_ATTR

T = TypeVar("T", bound=Hashable)


def layer_setting(t: FrozenTrial) -> str:
    """What a candidate is apart from its embeddings: its derived layers, dense and over-arch."""
    arch = t.user_attrs["arch"]
    return json.dumps({k: arch.get(k) for k in ("layers", "dense_arch", "over_arch")}, sort_keys=True)


def crossing_bases(screen: list[FrozenTrial], k: int, by: str = "layers") -> list[FrozenTrial]:
    """The ``k`` screen trials whose layer settings (:func:`layer_setting`) the all-alike
    embedding settings are crossed with: each distinct layer setting's best, taken in turns over
    families (:func:`in_family_turns` ``by``: each family's best, then each one's second). By
    ``kind`` every block kind the screen holds gets its best layers crossed before any kind gets
    a second: a kind whose screen candidates all drew poor per-feature settings still meets the
    re-rank with an all-alike one."""
    distinct: dict[str, FrozenTrial] = {}  # each layer setting's best screen trial, best first
    for t in sorted(screen, key=lambda t: -t.user_attrs[PROXY_ATTR]["val_auc"]):
        distinct.setdefault(layer_setting(t), t)
    return in_family_turns(list(distinct.values()), by)[:k]


LAYER_KIND = re.compile(r"layer\d+\.kind")  # the choice of an interaction layer's block kind


def kind_neighbours(params: Mapping[str, str], names: Mapping[str, Sequence[str]]) -> list[dict[str, str]]:
    """The candidates one layer kind away from ``params`` (a candidate's Optuna parameters,
    choice name -> value name; ``names``: each choice's value names): each ``layer<i>.kind`` set to
    each of its other values (the layer swapped for another kind, added where it was skipped, or
    skipped where the space lets it), every other choice kept.

    Example:
        >>> kind_neighbours({"layer0.kind": "dcnv2", "layer1.kind": "skip", "emb.a": "8"},
        ...                 {"layer0.kind": ["dcnv2", "dlrm"], "layer1.kind": ["skip", "dcnv2", "dlrm"],
        ...                  "emb.a": ["4", "8"]})  # doctest: +NORMALIZE_WHITESPACE
        [{'layer0.kind': 'dlrm', 'layer1.kind': 'skip', 'emb.a': '8'},
         {'layer0.kind': 'dcnv2', 'layer1.kind': 'dcnv2', 'emb.a': '8'},
         {'layer0.kind': 'dcnv2', 'layer1.kind': 'dlrm', 'emb.a': '8'}]
    """
    out = []
    for name in sorted(n for n in names if LAYER_KIND.fullmatch(n)):
        out += [{**params, name: value} for value in names[name] if value != params[name]]
    return out


def distinct_best(trials: list[FrozenTrial], k: int) -> list[FrozenTrial]:
    """The ``k`` trials of highest proxy validation AUC with distinct architectures."""
    seen: set[str] = set()
    out = []
    for t in sorted(trials, key=lambda t: -t.user_attrs[PROXY_ATTR]["val_auc"]):
        key = ArchSpec.from_dict(t.user_attrs["arch"]).replace(name="x").to_json()
        if key not in seen:
            seen.add(key)
            out.append(t)
        if len(out) == k:
            break
    return out


def family(t: FrozenTrial, by: str = "layers") -> tuple[str, ...]:
    """A candidate's family: the kinds of its interaction layers, in order (``layers``), or the
    kind of its first layer (``kind``: a DHEN + Wukong stack is of the DHEN family)."""
    kinds = tuple(layer["kind"] for layer in t.user_attrs["arch"]["layers"])
    return kinds[:1] if by == "kind" else kinds


def in_family_turns(ranked: list[FrozenTrial], by: str = "layers") -> list[FrozenTrial]:
    """``ranked`` (best first) reordered in turns over families (:func:`family` ``by``): each
    family's best (families in the order of their bests), then each one's second best, and so on."""
    by_family: dict[tuple[str, ...], list[FrozenTrial]] = {}
    for t in ranked:
        by_family.setdefault(family(t, by), []).append(t)
    turns: list[FrozenTrial] = []
    for i in range(max((len(members) for members in by_family.values()), default=0)):
        turns += [members[i] for members in by_family.values() if i < len(members)]
    return turns


def family_bests(ranked: list[FrozenTrial], k: int, by: str = "layers") -> list[FrozenTrial]:
    """The first ``k`` of ``ranked`` (best first) of distinct families, then, if fewer families
    than ``k`` are there, the next best of any."""
    return in_family_turns(ranked, by)[:k]


def near_first(ranked: list[FrozenTrial], auc: Callable[[FrozenTrial], float], tie: float,
               key: Callable[[FrozenTrial], float]) -> list[FrozenTrial]:
    """``ranked`` (best first) with the trials whose ``auc`` is within ``tie`` of the best moved
    to the front in order of ``key``, largest first (equal keys keep their rank); the others
    follow in their order. ``tie`` 0 changes nothing. Each tie rule below is one ``key``."""
    if not tie or not ranked:
        return list(ranked)
    best = max(auc(t) for t in ranked)
    near = sorted((t for t in ranked if auc(t) >= best - tie), key=lambda t: -key(t))  # stable
    return near + [t for t in ranked if t not in near]


def prefer_capacity(ranked: list[FrozenTrial], auc: Callable[[FrozenTrial], float],
                    tie: float) -> list[FrozenTrial]:
    """:func:`near_first` by forward FLOPs per sample, largest first."""
    return near_first(ranked, auc, tie, lambda t: t.user_attrs["costs"]["flops"])


def prefer_speed(ranked: list[FrozenTrial], auc: Callable[[FrozenTrial], float],
                 speed: Callable[[FrozenTrial], float], tie: float) -> list[FrozenTrial]:
    """:func:`near_first` by ``speed`` (training samples per second), fastest first. The opposite
    of :func:`prefer_capacity`: on the ``scale`` workload the costliest stacks lead a short
    training and the cheap DCNv2 crosses overtake them late in the first epoch (BENCHMARKS.md,
    ``k5`` seed 2)."""
    return near_first(ranked, auc, tie, speed)


def rerank_order(chosen: list[FrozenTrial], trained_auc: Callable[[FrozenTrial], float],
                 tie: float, proxy_auc: Callable[[FrozenTrial], float] | None = None,
                 proxy_tie: float = 0.0, speed: Callable[[FrozenTrial], float] | None = None,
                 speed_tie: float = 0.0) -> list[FrozenTrial]:
    """The re-ranked candidates, the one to train in full first: by ``trained_auc``; with
    ``tie``, the largest (forward FLOPs) of those within ``tie`` of the best first; with
    ``proxy_tie``, those within ``proxy_tie`` of it by ``proxy_auc`` (the inherited-weight score
    that chose them): a short training's noise is wider than the gap it is then asked to read;
    with ``speed_tie``, those within ``speed_tie`` of it by ``speed``, fastest first
    (:func:`prefer_speed`)."""
    ranked = sorted(chosen, key=lambda t: -trained_auc(t))
    if proxy_auc is not None:
        ranked = near_first(ranked, trained_auc, proxy_tie, proxy_auc)
    if speed is not None:
        ranked = prefer_speed(ranked, trained_auc, speed, speed_tie)
    return prefer_capacity(ranked, trained_auc, tie)


def winner(chosen: list[FrozenTrial], trained_auc: Callable[[FrozenTrial], float],
           tie: float, proxy_auc: Callable[[FrozenTrial], float] | None = None,
           proxy_tie: float = 0.0, speed: Callable[[FrozenTrial], float] | None = None,
           speed_tie: float = 0.0) -> FrozenTrial:
    """The re-ranked candidate to train in full (the first of :func:`rerank_order`)."""
    return rerank_order(chosen, trained_auc, tie, proxy_auc, proxy_tie, speed, speed_tie)[0]


Run = tuple[T, int]  # (a finalist, its restart: 0 is the rung's own training seed)


def rung_runs(finalists: Sequence[T], seeds: int, winner_seeds: int,
              auc: Callable[[Run[T]], float | None]) -> tuple[Run[T], list[Run[T]]] | None:
    """The final rung's choice: each finalist under ``seeds`` training seeds (restarts 0 .. seeds-1,
    in that order), then the one whose training led under further restarts up to ``winner_seeds``
    in all; returns (the best (finalist, restart) by ``auc``, every (finalist, restart) in the order
    they are needed). ``auc`` gives a training's validation AUC (the rung trains it on demand;
    a record lacking it returns None, and so does this).

    Example:
        >>> val = {("a", 0): 0.60, ("b", 0): 0.62, ("b", 1): 0.65}
        >>> rung_runs(["a", "b"], 1, 2, val.get)
        (('b', 1), [('a', 0), ('b', 0), ('b', 1)])
        >>> rung_runs(["a", "b"], 1, 1, val.get)
        (('b', 0), [('a', 0), ('b', 0)])
        >>> rung_runs(["a"], 1, 2, val.get) is None  # "a" was never restarted
        True
    """
    runs = [(f, r) for f in finalists for r in range(seeds)]
    values = {run: auc(run) for run in runs}
    if None in values.values():
        return None
    leader = max(runs, key=values.__getitem__)[0]  # (the first of equals, as max() keeps)
    restarts = [(leader, r) for r in range(seeds, winner_seeds)]
    values.update({run: auc(run) for run in restarts})
    if None in values.values():
        return None
    runs += restarts
    return max(runs, key=values.__getitem__), runs


def priced_pauses(speeds: Mapping[T, float], probe: int, pause: int) -> dict[T, int]:
    """The steps at which a rung read at equal seconds pauses each finalist (``rung_price:
    seconds``): every finalist trained to ``probe`` steps, where ``speeds`` (samples per second
    over those steps) were measured; the fastest then goes on to ``pause``, and each other one
    to the step it reaches in the seconds the fastest takes from ``probe`` to ``pause`` (at least
    one step past ``probe``). A finalist at half the speed is read at about half the steps: a
    slow finalist is priced by the time its read costs, and a loser costs the leader's seconds.

    Example:
        >>> priced_pauses({"dcnv2": 30000.0, "dhen": 12000.0}, 100, 1100)
        {'dcnv2': 1100, 'dhen': 500}
        >>> priced_pauses({"a": 1.0, "b": 0.0001}, 100, 1100)["b"]  # at least one step on
        101
    """
    fastest = max(speeds.values())
    if not fastest > 0 or not 0 < probe < pause:
        raise ValueError(f"priced_pauses: expected positive speeds and 0 < probe < pause, got speeds "
                         f"{dict(speeds)}, probe {probe}, pause {pause}")
    return {f: max(probe + 1, probe + round((pause - probe) * s / fastest)) for f, s in speeds.items()}


def halving(finalists: Sequence[T], reads: int,
            auc: Callable[[T, int], float | None]) -> tuple[T, list[tuple[T, int]]] | None:
    """Successive halving over ``reads`` reads of the final rung: every finalist is read at the
    first (``auc(finalist, 0)``, its training paused there), the better half (rounded up; the
    first of equals first) goes on to the next read, and so on; after the last read the best goes
    on to the final. Returns (that finalist, every (finalist, read) in the order they are needed),
    or None when a record lacks one (``auc`` returns None).

    Example:
        >>> val = {("a", 0): 0.60, ("b", 0): 0.62, ("c", 0): 0.61, ("b", 1): 0.64, ("c", 1): 0.66}
        >>> halving(["a", "b", "c"], 2, lambda f, i: val.get((f, i)))
        ('c', [('a', 0), ('b', 0), ('c', 0), ('b', 1), ('c', 1)])
        >>> halving(["a", "b", "c"], 1, lambda f, i: val.get((f, i)))[0]
        'b'
    """
    alive, asked = list(finalists), []
    for read in range(reads):
        values = {f: auc(f, read) for f in alive}
        asked += [(f, read) for f in alive]
        if None in values.values():
            return None
        ranked = sorted(alive, key=lambda f: -values[f])  # (sorted is stable: the first of equals first)
        alive = ranked[:1] if read == reads - 1 else ranked[:-(-len(alive) // 2)]
    return alive[0], asked


def race(finalists: Sequence[T], reads: int, auc: Callable[[T, int], float | None],
         margin: float) -> tuple[T, list[tuple[T, int]]] | None:
    """A race over ``reads`` reads of the final rung (``rung_margin``): every finalist is read at
    the first read (``auc(finalist, 0)``); each that trails the leader by ``margin`` or more stops
    there, the others go on to the next read, and so on until one is left, or until the last read,
    whose best goes on to the final. Returns (that finalist, every (finalist, read) in the order
    they are needed), or None when a record lacks one (``auc`` returns None). A close call is read
    again later in the epoch; a clear one costs the loser only its first read.

    Example:
        >>> val = {("a", 0): 0.600, ("b", 0): 0.610, ("a", 1): 0.640, ("b", 1): 0.630}
        >>> race(["a", "b"], 2, lambda f, i: val.get((f, i)), 0.005)  # b leads by 0.01: a stops
        ('b', [('a', 0), ('b', 0)])
        >>> race(["a", "b"], 2, lambda f, i: val.get((f, i)), 0.02)  # within the margin: read again
        ('a', [('a', 0), ('b', 0), ('a', 1), ('b', 1)])
    """
    if not margin > 0:
        raise ValueError(f"race: expected a positive AUC margin, got {margin}")
    alive, asked = list(finalists), []
    for read in range(reads):
        values = {f: auc(f, read) for f in alive}
        asked += [(f, read) for f in alive]
        if None in values.values():
            return None
        lead = max(v for v in values.values() if v is not None)
        if read == reads - 1:
            return max(alive, key=lambda f: values[f] or 0.0), asked  # (the first of equals)
        alive = [f for f in alive if lead - (values[f] or 0.0) < margin]
        if len(alive) == 1:
            return alive[0], asked
    raise ValueError(f"race: expected at least one read, got {reads}")


def first_layer(params: Mapping[str, str], names: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """``params`` (a candidate's Optuna parameters, choice name -> value name; ``names``: each
    choice's value names) cut to its first interaction layer: every later ``layer<i>.kind`` that
    may be skipped is set to ``skip``, every other choice kept (a later layer's own choices are
    then unread).

    Example:
        >>> first_layer({"layer0.kind": "dcnv2", "layer1.kind": "dhen", "emb.a": "8"},
        ...             {"layer0.kind": ["dcnv2", "dhen"], "layer1.kind": ["dcnv2", "dhen", "skip"],
        ...              "emb.a": ["4", "8"]})
        {'layer0.kind': 'dcnv2', 'layer1.kind': 'skip', 'emb.a': '8'}
    """
    return {name: "skip" if (LAYER_KIND.fullmatch(name) and name != "layer0.kind" and "skip" in names[name])
            else value for name, value in params.items()}
