"""Growth-and-pruning schedules: phases of training at a target width per part of the model.

A :class:`GrowthSchedule` is a sequence of :class:`Phase` s. Each phase trains for ``steps``
optimizer steps with every named part of the dense model scaled to a width ratio (``1.0``: the
full size of the ArchSpec; parts left out are full). Between phases the trainer
(:mod:`autorec.growth.train`) prunes (the ratio falls) or grows (it rises) the model with
:mod:`autorec.growth.ops`. The last phase is always at full size, so a schedule ends with the
full model ready for recurring training. Part names are those of
:func:`autorec.growth.shrink.shrink`: ``dense_arch``, ``layers.<i>``, ``over_arch``.

A schedule lives beside the architecture it trains, not inside it (an ArchSpec describes the
architecture only): a growth trial records it in its ``growth`` user attribute, and an export
writes it as ``schedule.json`` next to ``arch.json`` (:meth:`GrowthSchedule.save`)::

    {"method": "magnitude", "phases": [
        {"steps": 600, "widths": {"layers.0": 0.5, "over_arch": 0.5}},
        {"steps": 400, "widths": {}}]}

Example:
    >>> schedule = GrowthSchedule.from_fractions(1000, [(0.6, {"over_arch": 0.5}), (0.4, {})])
    >>> [p.steps for p in schedule.phases], schedule.phases[0].width("over_arch")
    ([600, 400], 0.5)
    >>> GrowthSchedule.from_dict(schedule.to_dict()) == schedule
    True
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from autorec.arch import ArchSpec

PRUNE_METHODS = ("magnitude", "gates")
_PART = re.compile(r"dense_arch|over_arch|layers\.(0|[1-9][0-9]*)")


class ScheduleError(ValueError):
    """A schedule is invalid; the message names the field at fault and what was expected."""


def _fail(path: str, message: str) -> None:
    raise ScheduleError(f"{path}: {message}")


def _widths(value: Any, path: str) -> tuple[tuple[str, float], ...]:
    """``{part: ratio}`` (or pairs) as sorted pairs; ratio 1.0 entries dropped (full is default)."""
    if isinstance(value, Mapping):
        items = list(value.items())
    elif isinstance(value, (tuple, list)) and all(isinstance(p, (tuple, list)) and len(p) == 2
                                                   for p in value):
        items = [tuple(p) for p in value]
    else:
        _fail(path, f"expected an object of part: width ratio, got {value!r}")
    out: dict[str, float] = {}
    for part, ratio in items:
        if not isinstance(part, str) or not _PART.fullmatch(part):
            _fail(f"{path}.{part}", "unknown part; expected dense_arch, layers.<i> or over_arch")
        if part in out:
            _fail(f"{path}.{part}", "part repeats")
        if (isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not math.isfinite(ratio)
                or not 0.0 < ratio <= 1.0):
            _fail(f"{path}.{part}", f"expected a width ratio in (0, 1], got {ratio!r}")
        out[part] = float(ratio)
    return tuple(sorted((p, r) for p, r in out.items() if r != 1.0))


@dataclass(frozen=True)
class Phase:
    """``steps`` optimizer steps at the width ratios ``widths`` (part -> ratio in (0, 1]).

    Args:
        steps: optimizer steps of this phase (>= 1).
        widths: a mapping (or pairs) of part name to width ratio; parts left out are at 1.0.

    Example:
        >>> phase = Phase(200, {"layers.0": 0.5, "over_arch": 1.0})
        >>> phase.widths, phase.width("over_arch"), phase.full
        ((('layers.0', 0.5),), 1.0, False)
    """

    steps: int
    widths: tuple[tuple[str, float], ...] = field(default=())

    def __post_init__(self) -> None:
        if isinstance(self.steps, bool) or not isinstance(self.steps, int) or self.steps < 1:
            _fail("steps", f"expected an integer >= 1, got {self.steps!r}")
        object.__setattr__(self, "widths", _widths(self.widths, "widths"))

    def width(self, part: str) -> float:
        """The width ratio of ``part`` in this phase (1.0 when not named)."""
        return dict(self.widths).get(part, 1.0)

    @property
    def full(self) -> bool:
        """Whether every part is at full size."""
        return not self.widths

    def to_dict(self) -> dict[str, Any]:
        return {"steps": self.steps, "widths": dict(self.widths)}


@dataclass(frozen=True)
class GrowthSchedule:
    """Phases of training at target widths, ending at full size (see the module docstring).

    Args:
        phases: at least one :class:`Phase`; the last one at full size.
        method: how pruning picks what to keep: ``magnitude`` or ``gates`` (learned gates).

    Example:
        >>> s = GrowthSchedule((Phase(300, {"over_arch": 0.25}), Phase(100)))
        >>> s.total_steps, s.starts, s.phase_at(299).width("over_arch"), s.phase_at(300).full
        (400, (0, 300), 0.25, True)
        >>> try:
        ...     GrowthSchedule((Phase(100, {"over_arch": 0.5}),))
        ... except ScheduleError as exc:
        ...     print(str(exc)[:59])
        schedule.phases[0]: the last phase must be at full size (no
    """

    phases: tuple[Phase, ...]
    method: str = "magnitude"

    def __post_init__(self) -> None:
        if isinstance(self.phases, list):
            object.__setattr__(self, "phases", tuple(self.phases))
        self.validate()

    def validate(self, path: str = "schedule") -> None:
        if not isinstance(self.phases, tuple) or not self.phases:
            _fail(f"{path}.phases", "expected a non-empty list of phases")
        for i, phase in enumerate(self.phases):
            if not isinstance(phase, Phase):
                _fail(f"{path}.phases[{i}]", f"expected a Phase, got {type(phase).__name__}")
        if not self.phases[-1].full:
            _fail(f"{path}.phases[{len(self.phases) - 1}]", "the last phase must be at full size "
                  f"(no width below 1.0), got {dict(self.phases[-1].widths)}")
        if self.method not in PRUNE_METHODS:
            _fail(f"{path}.method", f"expected one of {', '.join(PRUNE_METHODS)}, got {self.method!r}")

    # ---- steps ------------------------------------------------------------------------
    @property
    def total_steps(self) -> int:
        return sum(p.steps for p in self.phases)

    @property
    def starts(self) -> tuple[int, ...]:
        """The step at which each phase begins."""
        out, step = [], 0
        for phase in self.phases:
            out.append(step)
            step += phase.steps
        return tuple(out)

    def phase_at(self, step: int) -> Phase:
        """The phase that trains step ``step`` (0-based)."""
        if not 0 <= step < self.total_steps:
            raise IndexError(f"step {step} is outside the schedule's {self.total_steps} steps")
        for start, phase in zip(reversed(self.starts), reversed(self.phases), strict=True):
            if step >= start:
                return phase
        raise AssertionError("unreachable")

    @property
    def parts(self) -> tuple[str, ...]:
        """Every part some phase scales, sorted."""
        return tuple(sorted({p for phase in self.phases for p, _ in phase.widths}))

    def merged(self) -> GrowthSchedule:
        """The same schedule with consecutive phases of equal widths joined into one."""
        out: list[Phase] = []
        for phase in self.phases:
            if out and out[-1].widths == phase.widths:
                out[-1] = Phase(out[-1].steps + phase.steps, out[-1].widths)
            else:
                out.append(phase)
        return GrowthSchedule(tuple(out), self.method)

    def __iter__(self) -> Iterator[Phase]:
        return iter(self.phases)

    # ---- against an architecture -------------------------------------------------------
    def check_parts(self, spec: ArchSpec, path: str = "schedule") -> None:
        """Every part a phase names exists in ``spec`` (the full-size architecture)."""
        known = {"over_arch", *(f"layers.{i}" for i in range(len(spec.layers)))}
        if spec.n_dense and spec.dense_arch:
            known.add("dense_arch")
        for i, phase in enumerate(self.phases):
            for part, _ in phase.widths:
                if part not in known:
                    _fail(f"{path}.phases[{i}].widths.{part}",
                          f"the architecture has no such part; it has {', '.join(sorted(known))}")

    def phase_specs(self, spec: ArchSpec) -> list[ArchSpec]:
        """The architecture of each phase: ``spec`` shrunk to the phase's widths (``spec`` itself
        at full size)."""
        from autorec.growth.shrink import shrink

        self.check_parts(spec)
        return [spec if phase.full else shrink(spec, dict(phase.widths)) for phase in self.phases]

    # ---- construction and JSON -------------------------------------------------------------
    @classmethod
    def from_fractions(cls, total_steps: int, phases: Sequence[tuple[float, Mapping[str, float]]],
                       method: str = "magnitude") -> GrowthSchedule:
        """Phases given as (share of ``total_steps``, widths); the steps are rounded so that
        they add up to ``total_steps`` exactly. Phases of 0 steps are dropped."""
        if isinstance(total_steps, bool) or not isinstance(total_steps, int) or total_steps < 1:
            _fail("total_steps", f"expected an integer >= 1, got {total_steps!r}")
        shares = [float(share) for share, _ in phases]
        if any(not math.isfinite(s) or s < 0 for s in shares) or not sum(shares) > 0:
            _fail("phases", f"expected shares >= 0 with a positive sum, got {shares}")
        total = sum(shares)
        ends = [round(total_steps * sum(shares[: i + 1]) / total) for i in range(len(shares))]
        steps = [b - a for a, b in zip([0, *ends[:-1]], ends, strict=True)]
        kept = [Phase(n, widths) for n, (_, widths) in zip(steps, phases, strict=True) if n > 0]
        return cls(tuple(kept), method)

    @classmethod
    def full_size(cls, total_steps: int) -> GrowthSchedule:
        """The dense baseline: one phase of ``total_steps`` at full size."""
        return cls((Phase(total_steps),))

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "phases": [p.to_dict() for p in self.phases]}

    @classmethod
    def from_dict(cls, data: Any, path: str = "schedule") -> GrowthSchedule:
        """Parse what :meth:`to_dict` wrote; errors name ``path`` and the key at fault."""
        if not isinstance(data, Mapping):
            _fail(path, f"expected an object with phases and method, got {type(data).__name__}")
        unknown = sorted(set(data) - {"phases", "method"})
        if unknown:
            _fail(f"{path}.{unknown[0]}", "unknown key; expected phases, method")
        phases = data.get("phases")
        if not isinstance(phases, list) or not phases:
            _fail(f"{path}.phases", f"expected a non-empty list of phases, got {phases!r}")
        parsed = []
        for i, raw in enumerate(phases):
            where = f"{path}.phases[{i}]"
            if not isinstance(raw, Mapping):
                _fail(where, f"expected an object with steps and widths, got {type(raw).__name__}")
            extra = sorted(set(raw) - {"steps", "widths"})
            if extra:
                _fail(f"{where}.{extra[0]}", "unknown key; expected steps, widths")
            if "steps" not in raw:
                _fail(f"{where}.steps", "required key is missing")
            try:
                parsed.append(Phase(raw["steps"], raw.get("widths", {})))
            except ScheduleError as exc:
                raise ScheduleError(f"{where}.{exc}") from None
        try:
            return cls(tuple(parsed), data.get("method", "magnitude"))
        except ScheduleError as exc:
            message = str(exc)
            raise ScheduleError(path + message[len("schedule"):] if message.startswith("schedule")
                                else f"{path}: {message}") from None

    def save(self, path: str | Path) -> None:
        """Write ``schedule.json`` (what :meth:`to_dict` gives)."""
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n")

    @classmethod
    def load(cls, path: str | Path, spec: ArchSpec | None = None) -> GrowthSchedule:
        """Read a ``schedule.json``; with ``spec``, also check that every part it names exists
        there. Errors name the file and the key at fault."""
        from autorec.textfiles import read_text

        text = read_text(path, ScheduleError)
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ScheduleError(f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
        try:
            schedule = cls.from_dict(data)
            if spec is not None:
                schedule.check_parts(spec)
        except ScheduleError as exc:
            raise ScheduleError(f"{path}: {exc}") from None
        return schedule
