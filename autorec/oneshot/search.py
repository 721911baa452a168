"""Search many candidates on one trained supernet: each scored with its inherited weights.

An Optuna sampler (TPE, NSGA-II for several objectives, or random) proposes values for the
supernet's choices; the candidate is the ArchSpec the supernet derives from them, scored on
fixed validation batches with the weights it inherits (forward passes only: no training) and
costed by the analytic model. Every candidate is a trial of the study (``stage: proxy``), so
thousands of them show in the dashboard; a candidate seen before reuses its scores.

Example:
    >>> scores_to_values({"val_auc": 0.7, "val_loss": 0.5}, {"flops": 10.0}, ("val_auc", "flops"))
    [0.7, 10.0]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import optuna

from autorec.arch import ArchSpec
from autorec.oneshot.drops import DROPPED_NAMES_ATTR, zero_width
from autorec.oneshot.train import SupernetTraining, embedding_groups
from autorec.supernet.search import _value_name

STAGE_ATTR = "stage"  # trial user attr: proxy (inherited weights), rerank, calibrate (tau), final
PROXY_ATTR = "proxy"  # trial user attr: the inherited-weight scores of the candidate
# hash_choice: "search" proposes every hash size; "full" holds every table at all its rows, for
# studies scored on accuracy alone, on data where the proxy cannot price collisions (BENCHMARKS.md, k16)
HASH_CHOICES = ("search", "full")
# Objectives a candidate has without training; latency needs a trained model and is refused.
PROXY_OBJECTIVES = ("val_auc", "val_logloss", "flops", "params_bytes", "embedding_bytes",
                    "compute_time_h100", "exchange_bytes")


def scores_to_values(scores: Mapping[str, float], costs: Mapping[str, float],
                     objectives: Sequence[str]) -> list[float]:
    """The objective values of a candidate from its scores and costs, in ``objectives`` order."""
    table = {"val_auc": scores["val_auc"], "val_logloss": scores["val_loss"], **costs}
    return [float(table[o]) for o in objectives]


def check_objectives(objectives: Sequence[str], hash_choice: str = "search") -> None:
    """A ValueError naming what a one-shot search cannot do with ``objectives`` (run before the
    supernet trains, so a bad study file costs no training).

    Example:
        >>> check_objectives(["val_auc", "embedding_bytes"], "search")
        >>> try:
        ...     check_objectives(["val_auc", "embedding_bytes"], "full")
        ... except ValueError as err:
        ...     print(str(err)[:52])
        hash_choice: 'full' keeps every table's rows, so the
    """
    unknown = [o for o in objectives if o not in PROXY_OBJECTIVES]
    if unknown:
        raise ValueError(f"objectives: {unknown} cannot be scored without training; a one-shot "
                         f"search scores {', '.join(PROXY_OBJECTIVES)}")
    if hash_choice not in HASH_CHOICES:
        raise ValueError(f"hash_choice: expected one of {', '.join(HASH_CHOICES)}, got {hash_choice!r}")
    rows = [o for o in objectives if o in ("embedding_bytes", "params_bytes")]  # what a table's rows cost
    if hash_choice == "full" and rows:
        raise ValueError(f"hash_choice: 'full' keeps every table's rows, so the objective {rows[0]} "
                         "could not trade rows for bytes; use 'search'")


class CandidateSearch:
    """Proposes, derives, scores and records candidates of ``training``'s supernet; with
    ``screen_drops`` False no feature is dropped in what it proposes (no width 0: the drops are
    left to a read of the finalists, :mod:`autorec.oneshot.drops`), though a thinned finalist
    enqueued with user attribute ``dropped_choices`` is scored with those widths at 0. With
    ``heads`` (a fitted :class:`~autorec.oneshot.heads.KindHeads`) each path is scored with the
    over-arch of its last layer kind."""

    def __init__(self, training: SupernetTraining, selection_samples: int,
                 objectives: Sequence[str], trial_attrs: Mapping[str, Any] | None = None,
                 hash_choice: str = "search", screen_drops: bool = True, heads: Any = None) -> None:
        check_objectives(objectives, hash_choice)
        self.search = training.search
        self.heads = heads
        self.objectives = tuple(objectives)
        self.trial_attrs = dict(trial_attrs or {})  # set on every candidate first (the worker, for recovery)
        self.net = self.search.supernet
        self._batches = self.search.selection_batches(selection_samples)  # the same for every candidate
        self._rescore_batches: dict[int, list[Any]] = {}
        self.names = {name: [_value_name(v) for v in c.values] for name, c in self.net.arch.choices.items()}
        # hash_choice "full": each hash choice held at its largest size (every row) in what is proposed
        held = embedding_groups(self.net.arch.choices.values())[1] if hash_choice == "full" else []
        self.held = {c.name: _value_name(max(c.values)) for c in held}
        self.drops = {v for v, w in zip(self.net.emb_values, self.net.emb_widths, strict=True) if w == 0}
        self.screen_drops = screen_drops
        kept = {c.name: [_value_name(v) for v in c.values if screen_drops or v not in self.drops]
                for c in embedding_groups(self.net.arch.choices.values())[0]}
        self.proposed = {name: [self.held[name]] if name in self.held else kept.get(name) or names
                         for name, names in self.names.items()}
        self._cache: dict[str, tuple[dict[str, float], dict[str, float]]] = {}

    def values_of(self, params: Mapping[str, str]) -> dict[str, Any]:
        """Choice name -> value from Optuna's string parameters."""
        out = {}
        for name, choice in self.net.arch.choices.items():
            out[name] = choice.values[self.names[name].index(params[name])]
        return out

    def evaluate(self, values: Mapping[str, Any]) -> tuple[ArchSpec, dict[str, float], dict[str, float]]:
        """(the derived spec, its inherited-weight scores, its analytic costs)."""
        from autorec.costs import arch_cost

        spec = self.net.derive(values)
        key = spec.to_json()
        if key not in self._cache:  # the costs a study records (autorec.study.trial.cost_summary)
            self._cache[key] = (self._scores(values, self._batches), arch_cost(spec).summary())
        scores, costs = self._cache[key]
        return spec, scores, costs

    def shared_settings(self) -> list[dict[str, str]]:
        """The all-alike embedding settings as partial Optuna parameters (choice name -> value
        name): for each width of the width choices and each hash size of the hash choices, every
        feature set to them (one setting for width 0, which drops every feature whatever the
        hash; none without ``screen_drops``). A per-feature sampler almost never proposes them
        (``shared_crossings`` crosses them with the screen's best layers), and they are the space
        a shared-width study searches."""
        widths, hashes = ({c.name: c for c in group}
                          for group in embedding_groups(self.net.arch.choices.values()))
        if not widths and not hashes:
            return []
        # in the choices' order, of any value type (a width may be a dim_ratio)
        width_values = list(dict.fromkeys(v for c in widths.values() for v in c.values)) or [None]
        hash_values = list(dict.fromkeys(v for c in hashes.values() for v in c.values)) or [None]
        if self.held:  # hash_choice "full": every row
            hash_values = [max(hash_values)]
        drops = self.drops
        if not self.screen_drops:
            width_values = [v for v in width_values if v not in drops] or width_values
        out = []
        for width in width_values:
            for size in hash_values[:1] if width in drops else hash_values:
                params = {}
                for group, value in ((widths, width), (hashes, size)):
                    for name, choice in group.items():
                        if value in choice.values:
                            params[name] = self.names[name][choice.values.index(value)]
                out.append(params)
        return out

    def rescore(self, values: Mapping[str, Any], samples: int) -> dict[str, float]:
        """The inherited-weight scores of the path at ``values`` on ``samples`` validation samples
        (the screen's samples first, then more of the same seeded stream): a second, more precise
        look at the few candidates the screen put first."""
        if samples not in self._rescore_batches:
            self._rescore_batches[samples] = self.search.selection_batches(samples)
        return self._scores(values, self._rescore_batches[samples])

    def _scores(self, values: Mapping[str, Any], batches: list[Any]) -> dict[str, float]:
        """The path's inherited-weight scores on ``batches`` (with its kind's head, if any)."""
        if self.heads is not None:
            self.heads.use(values)
        return self.search.path_scores(values, batches)

    def objective(self, trial: optuna.Trial) -> float | list[float]:
        for key, value in self.trial_attrs.items():
            trial.set_user_attr(key, value)
        params = {name: trial.suggest_categorical(name, names) for name, names in self.proposed.items()}
        values = self.values_of(params)
        for name in trial.user_attrs.get(DROPPED_NAMES_ATTR, []):  # a thinned finalist's drops
            values[name] = zero_width(self, name)
        spec, scores, costs = self.evaluate(values)
        trial.set_user_attr(STAGE_ATTR, "proxy")
        trial.set_user_attr(PROXY_ATTR, scores)
        trial.set_user_attr("arch", spec.to_dict())
        trial.set_user_attr("costs", costs)
        values = scores_to_values(scores, costs, self.objectives)
        return values[0] if len(values) == 1 else values

