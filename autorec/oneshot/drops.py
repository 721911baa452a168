"""The tables a finalist does not use, read off the supernet (or its re-rank training,
:mod:`autorec.oneshot.importance`) and dropped before it trains.

Each embedded feature of a candidate is dropped in turn (its width choice set to 0, every other
choice kept) and the path scored again on the same validation samples with its inherited
weights: a feature whose drop costs the path at most ``tolerance`` of validation AUC is one the
supernet learned to do without. All of them are dropped at once, and the candidate so thinned
replaces its original when the joint drop costs at most ``tolerance`` for each feature dropped
(:func:`joint_holds`; each may cost that much alone). On the ``scale``
workload a DCNv2 winner trained without the planted noise tables gains 0.0026 test AUC over three
training seeds, but the features its supernet path does without are noise and weak tables
mixed (BENCHMARKS.md, "What the per-feature choices ... are worth" and ``k22``); a short
stand-alone training reads them apart (:class:`~autorec.oneshot.importance.TrainedDrops`, ``k23``).

Example:
    >>> free_drops({"emb.a": -0.0004, "emb.b": 0.0001, "emb.c": 0.0090}, tolerance=0.0)
    ['emb.a']
    >>> free_drops({"emb.a": -0.0004, "emb.b": 0.0001, "emb.c": 0.0090}, tolerance=0.0002)
    ['emb.a', 'emb.b']
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import optuna
from optuna.trial import FrozenTrial

DROPPED_ATTR = "dropped_from"  # trial user attr: the finalist whose free tables this candidate drops
DROPS_ATTR = "drops"  # key of the study's oneshot record: each finalist's drop costs and choice
# trial user attr of a thinned candidate: the width choices it sets to 0. Its parameters say so too
# where the study's value space holds width 0; without ``screen_drops`` it does not (one value
# space per parameter in an Optuna study), and the parameters keep the finalist's widths.
DROPPED_NAMES_ATTR = "dropped_choices"


def zero_width(search: Any, name: str) -> Any | None:
    """The value of width choice ``name`` that drops its feature (None: it cannot drop);
    ``search``: a :class:`~autorec.oneshot.search.CandidateSearch`."""
    net = search.net
    zero = {v for v, w in zip(net.emb_values, net.emb_widths, strict=True) if w == 0}
    return next((v for v in net.arch.choices[name].values if v in zero), None)


def droppable(search: Any, values: Mapping[str, Any]) -> list[str]:
    """The width choices of ``values`` that embed their feature and can drop it."""
    names = [n for n in search.net.arch.choices if n.startswith("emb.") and not n.endswith(".hash")]
    return [n for n in names if (off := zero_width(search, n)) is not None and values[n] != off]


def drop_costs(search: Any, values: Mapping[str, Any], samples: int) -> tuple[float, dict[str, float]]:
    """(the path's inherited-weight val AUC on ``samples`` validation samples, width choice name ->
    that AUC minus the path's with the feature dropped) for every width choice of ``values`` that
    embeds its feature and can drop it."""
    base = search.rescore(values, samples)["val_auc"]
    return base, {name: base - search.rescore({**values, name: zero_width(search, name)}, samples)["val_auc"]
                  for name in droppable(search, values)}


def free_drops(costs: Mapping[str, float], tolerance: float) -> list[str]:
    """The width choices whose drop costs at most ``tolerance``, sorted by name."""
    return sorted(name for name, cost in costs.items() if cost <= tolerance)


def joint_holds(base: float, joint: float, tolerance: float, dropped: int) -> bool:
    """Whether ``dropped`` features, each free at ``tolerance``, may go together: the AUC with all
    of them dropped (``joint``) is at most ``tolerance`` per feature below ``base``.

    Example:
        >>> joint_holds(0.6187, 0.6184, 0.0001, 3), joint_holds(0.6187, 0.6184, 0.0001, 2)
        (True, False)
        >>> joint_holds(0.6187, 0.6187, 0.0, 8)  # at margin 0 the joint drop may cost nothing
        True
    """
    return dropped > 0 and joint >= base - tolerance * dropped - 1e-12


class SupernetDrops:
    """Reads a finalist's drops off the supernet: each embedded feature's width choice set to 0
    (:func:`drop_costs`) on ``samples`` validation samples with inherited weights."""

    name = "supernet"

    def __init__(self, search: Any, samples: int) -> None:
        self.search, self.samples = search, samples

    def costs(self, trial: FrozenTrial, values: Mapping[str, Any]) -> tuple[float, dict[str, float]]:
        return drop_costs(self.search, values, self.samples)

    def joint(self, trial: FrozenTrial, values: Mapping[str, Any], dropped: list[str]) -> float:
        off = {name: zero_width(self.search, name) for name in dropped}
        return self.search.rescore({**values, **off}, self.samples)["val_auc"]


def drop_finalists(study: optuna.Study, search: Any, finalists: list[FrozenTrial], reader: Any,
                   tolerance: float, record: dict[str, Any], save: Callable[[], None],
                   score_enqueued: Callable[[], int], read_first: bool = False) -> list[FrozenTrial]:
    """``finalists`` with each replaced by its thinned candidate (:func:`free_drops` of the costs
    ``reader`` reads, all dropped when :func:`joint_holds`): a proxy
    trial with user attribute ``dropped_from``, enqueued and scored by ``score_enqueued``.
    ``reader``: a :class:`SupernetDrops` or an
    :class:`~autorec.oneshot.importance.TrainedDrops` (``costs(trial, values)`` -> (AUC, width
    choice name -> cost); ``joint(trial, values, dropped)`` -> AUC with all of them dropped). Each
    finalist's costs and choice are kept in ``record["drops"]`` (``save`` stores the record as
    each is made), so a rerun after a kill scores nothing twice and thins the same way.
    With ``read_first`` (``drop_from: first``) only the first finalist's costs are read; each other
    finalist is offered the first one's free drops (those it embeds), kept when they hold jointly
    on its own path (:func:`joint_holds` against its own undropped AUC): whether a table carries
    signal is the data's, and each read costs a pass per feature."""
    done: dict[str, Any] = record.setdefault(DROPS_ATTR, {})
    for i, t in enumerate(finalists):
        if str(t.number) in done:
            continue
        params = {name: str(t.params[name]) for name in search.names}
        values = search.values_of(params)
        if read_first and i > 0:  # the first finalist's free drops, recorded when it was read
            first = done[str(finalists[0].number)]
            offered = first.get("free", first["dropped"])  # (a record from before "free": its drops)
            base, costs = reader.joint(t, values, []), None
            dropped = [name for name in offered if name in droppable(search, values)]
        else:
            base, costs = reader.costs(t, values)
            dropped = free_drops(costs, tolerance)
        joint = reader.joint(t, values, dropped) if dropped else base
        keep = joint_holds(base, joint, tolerance, len(dropped))
        if keep:  # (enqueued before the record says so: a kill in between scores it twice, harmlessly)
            for name in dropped:
                choice = search.net.arch.choices[name]
                off = search.names[name][choice.values.index(zero_width(search, name))]
                if off in search.proposed[name]:
                    params[name] = off
            study.enqueue_trial(params, user_attrs={DROPPED_ATTR: t.number, DROPPED_NAMES_ATTR: dropped})
        done[str(t.number)] = {"path_auc": base, "costs": costs, "free": dropped,
                               "dropped": dropped if keep else [], "joint_auc": joint,
                               "read": reader.name if costs is not None else "first"}
        save()
    score_enqueued()
    thinned = {t.user_attrs[DROPPED_ATTR]: t for t in study.get_trials(deepcopy=False)
               if DROPPED_ATTR in t.user_attrs and t.state == optuna.trial.TrialState.COMPLETE}
    return [thinned.get(t.number, t) for t in finalists]
