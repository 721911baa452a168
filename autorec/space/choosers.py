"""Who picks each value of a space's walk: an Optuna trial (``suggest``, ``from_params``), a
seeded random generator (``sample``), or a matcher that finds a given spec's values
(``to_params``)."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from autorec.space.values import Invalid, SpaceError, Values, encode, has_value, same_value, show_values

if TYPE_CHECKING:
    import optuna


class Chooser:
    """Picks one of ``values`` for the parameter ``name``; ``want`` is what to_params looks for."""

    def choose(self, name: str, values: Values, want: Any = None) -> Any:
        return values[0] if len(values) == 1 else self.pick(name, values)

    def pick(self, name: str, values: Values) -> Any:
        raise NotImplementedError


class TrialChooser(Chooser):
    """Asks an Optuna trial (a FixedTrial for from_params), checking what it answers."""

    def __init__(self, trial: optuna.trial.BaseTrial, source: str) -> None:
        self.trial, self.source = trial, source
        self.names: set[str] = set()

    def pick(self, name: str, values: Values) -> Any:
        self.names.add(name)
        try:
            if isinstance(values, range):
                value = self.trial.suggest_int(name, values.start, values[-1], step=values.step)
                if has_value(values, value):
                    return value
            else:
                codes = [encode(v) for v in values]
                code = self.trial.suggest_categorical(name, codes)
                for v, c in zip(values, codes, strict=True):
                    if same_value(c, code):
                        return v
                value = code
        except (ValueError, TypeError) as exc:
            raise SpaceError(f"{self.source}: parameter {name!r}: {exc}") from None
        raise SpaceError(f"{self.source}: parameter {name!r}: expected one of {show_values(values)}, "
                         f"got {value!r}")


class RandomChooser(Chooser):
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def pick(self, name: str, values: Values) -> Any:
        return self.rng.choice(values)


class Matcher(Chooser):
    """Picks the wanted value when the choices hold it, recording the parameters that do."""

    def __init__(self) -> None:
        self.params: dict[str, Any] = {}

    def choose(self, name: str, values: Values, want: Any = None) -> Any:
        if not has_value(values, want):
            shown = encode(want) if isinstance(want, tuple) else want
            raise Invalid(name, f"{shown!r} is not among the choices {show_values(values)}")
        if len(values) > 1:
            self.params[name] = encode(want)
        return want


