"""The space of growth schedules: reduced phases (a share of the steps and a width ratio per part)
before a final full-size phase, as one sequence of discrete decisions, and the narrowing of a
schedule onto a training-FLOPs budget.

Example:
    >>> space = ScheduleSpace(parts=("over_arch",), total_steps=100, phases=1,
    ...                       shares=(0.0, 0.5), ratios=(0.5, 1.0))
    >>> [name for name, _ in space.decisions]
    ['phase0.share', 'phase0.over_arch']
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from autorec.growth.schedule import GrowthSchedule


@dataclass(frozen=True)
class ScheduleSpace:
    """Schedules over ``total_steps`` of the parts ``parts`` (see the module docstring).

    Args:
        parts: the parts a reduced phase scales (e.g. :func:`prunable_parts`).
        total_steps: the step budget of every schedule (the dense baseline's too).
        phases: reduced phases before the final full-size one.
        shares: the choices of a reduced phase's share of ``total_steps`` (0 drops it).
        ratios: the choices of a part's width ratio in a reduced phase.
        min_final: the smallest share left to the final full-size phase.
        method: pruning method recorded in the schedules (``magnitude`` or ``gates``).
    """

    parts: tuple[str, ...]
    total_steps: int
    phases: int = 2
    shares: tuple[float, ...] = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6)
    ratios: tuple[float, ...] = (0.25, 0.5, 0.75, 1.0)
    min_final: float = 0.2
    method: str = "magnitude"

    def __post_init__(self) -> None:
        def bad(key: str, expected: str, got: Any) -> ValueError:
            return ValueError(f"schedule space: {key}: expected {expected}, got {got!r}")

        steps = self.total_steps
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise bad("total_steps", "a positive integer", self.total_steps)
        if isinstance(self.phases, bool) or not isinstance(self.phases, int) or self.phases < 1:
            raise bad("phases", "a positive integer", self.phases)
        if not self.shares or any(not 0 <= s < 1 for s in self.shares) or 0.0 not in self.shares:
            raise bad("shares", "choices in [0, 1) including 0", self.shares)
        if not self.ratios or any(not 0 < r <= 1 for r in self.ratios):
            raise bad("ratios", "choices in (0, 1]", self.ratios)
        if not 0 < self.min_final <= 1:
            raise bad("min_final", "a share in (0, 1]", self.min_final)
        if len(set(self.parts)) != len(self.parts):
            raise bad("parts", "distinct part names", self.parts)

    @property
    def decisions(self) -> list[tuple[str, tuple[float, ...]]]:
        """(name, choices) of every decision, in order."""
        out: list[tuple[str, tuple[float, ...]]] = []
        for k in range(self.phases):
            out.append((f"phase{k}.share", tuple(self.shares)))
            out += [(f"phase{k}.{part}", tuple(self.ratios)) for part in self.parts]
        return out

    def allowed(self, index: int, chosen: Sequence[float]) -> list[bool]:
        """Which choices decision ``index`` allows after the values ``chosen`` (shares must
        leave ``min_final`` to the final phase)."""
        name, choices = self.decisions[index]
        if not name.endswith(".share"):
            return [True] * len(choices)
        used = sum(v for (n, _), v in zip(self.decisions, chosen, strict=False) if n.endswith(".share"))
        return [s == 0.0 or used + s <= 1.0 - self.min_final + 1e-9 for s in choices]

    def schedule(self, values: Sequence[float]) -> GrowthSchedule:
        """The schedule of one value per decision (shares past the budget are cut to fit)."""
        if len(values) != len(self.decisions):
            raise ValueError(f"expected {len(self.decisions)} decision values, got {len(values)}")
        phases: list[tuple[float, dict[str, float]]] = []
        left = 1.0 - self.min_final
        per_phase = 1 + len(self.parts)
        for k in range(self.phases):
            block = values[k * per_phase:(k + 1) * per_phase]
            share = max(0.0, min(float(block[0]), left))
            left -= share
            phases.append((share, {p: float(r) for p, r in zip(self.parts, block[1:], strict=True)}))
        phases.append((1.0 - sum(s for s, _ in phases), {}))
        return GrowthSchedule.from_fractions(self.total_steps, phases, self.method).merged()

    def decode(self, actions: Sequence[int]) -> GrowthSchedule:
        """The schedule of one choice index per decision."""
        return self.schedule([choices[a] for (_, choices), a in zip(self.decisions, actions, strict=True)])



def fit_budget(space: ScheduleSpace, values: Sequence[float], flops_ratio: Callable[[GrowthSchedule], float],
               max_ratio: float) -> GrowthSchedule | None:
    """The schedule of ``values`` narrowed until its FLOPs ratio is at most ``max_ratio``: one
    step down the ratio choices at a time for the widest part of a reduced phase (the earliest on
    ties); None when even every part at the narrowest choice is over the budget.

    Example:
        >>> space = ScheduleSpace(("over_arch",), 100, phases=1, shares=(0.0, 0.5), ratios=(0.5, 1.0))
        >>> fit_budget(space, [0.5, 1.0], lambda s: 0.5 + 0.5 * s.phases[0].width("over_arch"),
        ...            0.8).to_dict()["phases"][0]
        {'steps': 50, 'widths': {'over_arch': 0.5}}
    """
    values = list(values)
    ratios = sorted(space.ratios)
    per_phase = 1 + len(space.parts)
    while True:
        schedule = space.schedule(values)
        if flops_ratio(schedule) <= max_ratio + 1e-9:
            return schedule
        movable = [i for k in range(space.phases) if values[k * per_phase] > 0
                   for i in range(k * per_phase + 1, (k + 1) * per_phase) if values[i] > ratios[0]]
        if not movable:
            return None
        i = max(movable, key=lambda j: (values[j], -j))
        values[i] = max(r for r in ratios if r < values[i])
