"""Warm start: the presets a study names (``warm_start``) become its first trials.

A sampler that starts from known-good points spends fewer trials finding the region they mark
(Optuna's ``enqueue_trial``). Each preset is built for the dataset's schema, mapped to the search
space's parameters (:meth:`autorec.space.SearchSpace.to_params`) and enqueued once, when the
study has no trial yet; the trial records ``warm_start: <preset>``. Every preset is checked
against the space before any is enqueued, so a preset outside the space changes nothing stored.
"""

from __future__ import annotations

from collections.abc import Callable

import optuna

from autorec.study.config import StudyConfig, StudyConfigError
from autorec.study.trial import TrialRunner

WARM_ATTR = "warm_start"  # trial user attr: the preset it started from
WARM_STRATEGIES = ("random", "tpe", "nsga2")


def enqueue_presets(config: StudyConfig, study: optuna.Study, runner: TrialRunner,
                    log: Callable[[str], None] = print) -> list[str]:
    """Enqueue ``config.warm_start``'s presets as the first trials of a new ``study``; returns the
    names enqueued (none when the study already has trials or names none)."""
    from autorec.presets import preset
    from autorec.space import SearchSpace, SpaceError

    if not config.warm_start or study.get_trials(deepcopy=False):
        return []
    if config.strategy.name not in WARM_STRATEGIES or config.space is None:
        raise StudyConfigError(f"{config.source}: warm_start: a {config.strategy.name} study does not "
                               f"sample trials from the space; expected one of {', '.join(WARM_STRATEGIES)}")
    space = SearchSpace.load(config.space)
    params = {}
    for name in config.warm_start:
        try:
            params[name] = space.to_params(preset(name, runner.dataset.schema))
        except SpaceError as exc:
            raise StudyConfigError(f"{config.source}: warm_start: preset {name!r}: {exc}") from None
    for name, values in params.items():
        study.enqueue_trial(values, user_attrs={WARM_ATTR: name})
    log(f"warm start: trials 0-{len(params) - 1} are the presets {', '.join(params)}")
    return list(params)
