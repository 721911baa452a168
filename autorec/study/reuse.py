"""No architecture trained twice: a trial whose architecture and training settings a finished
trial of the study already trained takes that trial's result instead of training again.

A sampler re-proposes what it has seen (TPE does, more so in a small space or late in a study).
The key of a training is a hash of the canonical ArchSpec (its name left out) and the training
settings (:func:`training_key`); a trial that trains records it (``TRAINED_KEY_ATTR``). A trial
with the key of a COMPLETE trial records that trial's number (``REUSED_ATTR``), its metrics,
costs and checkpoint, and ends with its values: Optuna and the dashboard see an ordinary trial,
and the report can tell it apart. A reused trial does not use the study's budget
(:func:`autorec.study.recovery.finished_count`), so the budget goes to new architectures; at
most ``budget`` trials of a study are reused that way, so a study whose space is exhausted still ends.
Where the proposal itself is the costly part (a DNAS supernet, a growth schedule search: the
strategy's ``costly_proposals``), a reused trial still uses the budget.
A warm-started training (DNAS or growth ``retrain: warm``) is never reused nor reuses.

Example:
    >>> from autorec.data import Schema, SparseFeature
    >>> from autorec.presets import preset
    >>> spec = preset("dlrm", Schema(("x",), (SparseFeature("u", 5), SparseFeature("i", 7))))
    >>> training_key(spec, {"epochs": 1}) == training_key(spec.replace(name="other"), {"epochs": 1})
    True
    >>> training_key(spec, {"epochs": 1}) == training_key(spec, {"epochs": 2})
    False
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from autorec.arch import ArchSpec

TRAINED_KEY_ATTR = "training_key"  # trial user attr: hash of (canonical arch, training settings)
REUSED_ATTR = "reused_from"  # trial user attr: the number of the trial whose training it took
FREE_ATTR = "budget_free"  # trial user attr: a reused trial that did not use the budget
COPIED_ATTRS = ("metrics", "costs", "checkpoint")  # what a reusing trial takes of its twin


def training_key(spec: ArchSpec, settings: Mapping[str, Any]) -> str:
    """A hash of ``spec`` (its name left out) and the training ``settings`` it is trained with."""
    text = json.dumps({"arch": json.loads(spec.replace(name="-").to_json()), "train": dict(settings)},
                      sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def trained_twin(study: optuna.Study, key: str) -> FrozenTrial | None:
    """The first COMPLETE trial of ``study`` that trained the training of ``key`` itself."""
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        if t.user_attrs.get(TRAINED_KEY_ATTR) == key and REUSED_ATTR not in t.user_attrs \
                and "metrics" in t.user_attrs:
            return t
    return None


def reused_count(study: optuna.Study) -> int:
    """Trials of ``study`` that took another trial's result without using the budget."""
    return sum(bool(t.user_attrs.get(FREE_ATTR)) for t in study.get_trials(deepcopy=False))


def reuse(trial: optuna.Trial, twin: FrozenTrial, free: bool = True) -> list[float]:
    """Record on ``trial`` that it takes ``twin``'s training (without using the budget when
    ``free``); returns ``twin``'s values."""
    trial.set_user_attr(REUSED_ATTR, twin.number)
    if free:
        trial.set_user_attr(FREE_ATTR, True)
    for attr in COPIED_ATTRS:
        if attr in twin.user_attrs:
            trial.set_user_attr(attr, twin.user_attrs[attr])
    return list(twin.values)
