"""Where the prunable units of a model sit inside its tensors, and how to move them.

A *unit space* is one set of interchangeable units: the neurons of one hidden layer, the rank
components of one low-rank product, the output vectors (rows) of one block. Pruning keeps a
subset of a space's units; growth keeps all and adds copies of old units or fresh ones. Both
are an index per space, new unit -> old unit (-1: fresh).

A :class:`Layout` says how one tensor axis is made of units: a fixed axis (``Fixed``), one
space (``Units``), a row-major product (``Product``: the F*D values of flatten(X) are rows x
positions) or a concatenation (``Concat``: Wukong's FMB rows then LCB rows). Each tensor axis
plays one of three roles towards its units:

- ``"out"``: the units are computed here (a Linear's weight rows). A copy takes the old slice;
  a fresh unit takes the freshly initialised value.
- ``"elem"``: a per-unit parameter (LayerNorm weight over the units): as ``"out"``.
- ``"in"``: the units are consumed linearly here (a Linear's weight columns). A unit and its
  copies share the old slice, each a fraction of it (the space's ``share``; the fractions of
  one old unit sum to 1, so the sum is unchanged; unequal fractions give the copies unequal
  gradients, so they do not stay copies forever); a fresh unit gets zero, so its (arbitrary)
  value changes nothing downstream.

Example:
    >>> spaces = {"h": Space("h", old=3, new=2, index=torch.tensor([2, 0]))}
    >>> w = torch.arange(6.0).view(3, 2)  # Linear(2 -> 3): rows are the units of "h"
    >>> remap(w, torch.zeros(2, 2), (("out", Units("h")), None), spaces)
    tensor([[4., 5.],
            [0., 1.]])
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

ROLES = ("out", "elem", "in")


@dataclass
class Space:
    """One set of units: ``old`` of them before, ``new`` after; ``index`` [new] maps each new
    unit to the old unit it keeps or copies (-1: a fresh unit). ``stat``: some consumer
    normalises over these units (a LayerNorm across them, a softmax over them), so growth is
    exact only by copying every old unit equally often. ``share`` [new]: the fraction of its
    old unit's outgoing weights each new unit takes (None: equal fractions)."""

    name: str
    old: int
    new: int
    stat: bool = False
    index: torch.Tensor | None = None
    share: torch.Tensor | None = None

    def resolved(self) -> torch.Tensor:
        if self.index is None:
            raise RuntimeError(f"{self.name}: no index computed yet")
        return self.index


Spaces = Mapping[str, Space]
AxisRule = tuple[str, "Layout"] | None


class Layout(ABC):
    """How one tensor axis is made of units (see the module docstring)."""

    @abstractmethod
    def old_size(self, spaces: Spaces) -> int: ...

    @abstractmethod
    def new_size(self, spaces: Spaces) -> int: ...

    @abstractmethod
    def index(self, spaces: Spaces) -> torch.Tensor:
        """[new_size]: the old position each new position takes, -1 where fresh."""

    @abstractmethod
    def unit_of(self, name: str, spaces: Spaces) -> torch.Tensor:
        """[old_size]: the unit of space ``name`` at each old position, -1 where none."""

    @abstractmethod
    def share(self, spaces: Spaces) -> torch.Tensor:
        """[new_size]: the fraction of its old position's outgoing weight each new position
        takes (0 where fresh); the fractions of one old position sum to 1."""

    def spaces(self) -> tuple[str, ...]:
        return ()


@dataclass(frozen=True)
class Fixed(Layout):
    """An axis no operation changes."""

    size: int

    def old_size(self, spaces: Spaces) -> int:
        return self.size

    def new_size(self, spaces: Spaces) -> int:
        return self.size

    def index(self, spaces: Spaces) -> torch.Tensor:
        return torch.arange(self.size)

    def unit_of(self, name: str, spaces: Spaces) -> torch.Tensor:
        return torch.full((self.size,), -1, dtype=torch.long)

    def share(self, spaces: Spaces) -> torch.Tensor:
        return torch.ones(self.size)


@dataclass(frozen=True)
class Units(Layout):
    """An axis that is one space's units."""

    space: str

    def old_size(self, spaces: Spaces) -> int:
        return spaces[self.space].old

    def new_size(self, spaces: Spaces) -> int:
        return spaces[self.space].new

    def index(self, spaces: Spaces) -> torch.Tensor:
        return spaces[self.space].resolved()

    def unit_of(self, name: str, spaces: Spaces) -> torch.Tensor:
        old = spaces[self.space].old
        return torch.arange(old) if name == self.space else torch.full((old,), -1, dtype=torch.long)

    def share(self, spaces: Spaces) -> torch.Tensor:
        space = spaces[self.space]
        if space.share is not None:
            return space.share
        return equal_shares(space.resolved(), space.old)

    def spaces(self) -> tuple[str, ...]:
        return (self.space,)


@dataclass(frozen=True)
class Product(Layout):
    """Row-major ``outer x inner`` (flatten of an [outer, inner] grid)."""

    outer: Layout
    inner: Layout

    def old_size(self, spaces: Spaces) -> int:
        return self.outer.old_size(spaces) * self.inner.old_size(spaces)

    def new_size(self, spaces: Spaces) -> int:
        return self.outer.new_size(spaces) * self.inner.new_size(spaces)

    def index(self, spaces: Spaces) -> torch.Tensor:
        o, i = self.outer.index(spaces), self.inner.index(spaces)
        flat = o[:, None] * self.inner.old_size(spaces) + i[None, :]
        flat[(o < 0)[:, None] | (i < 0)[None, :]] = -1
        return flat.flatten()

    def unit_of(self, name: str, spaces: Spaces) -> torch.Tensor:
        o, i = self.outer.unit_of(name, spaces), self.inner.unit_of(name, spaces)
        return torch.maximum(o[:, None], i[None, :]).flatten()

    def share(self, spaces: Spaces) -> torch.Tensor:
        return (self.outer.share(spaces)[:, None] * self.inner.share(spaces)[None, :]).flatten()

    def spaces(self) -> tuple[str, ...]:
        return self.outer.spaces() + self.inner.spaces()


@dataclass(frozen=True)
class Concat(Layout):
    """The parts one after another (Wukong's FMB rows then LCB rows)."""

    parts: tuple[Layout, ...]

    def old_size(self, spaces: Spaces) -> int:
        return sum(p.old_size(spaces) for p in self.parts)

    def new_size(self, spaces: Spaces) -> int:
        return sum(p.new_size(spaces) for p in self.parts)

    def index(self, spaces: Spaces) -> torch.Tensor:
        pieces, offset = [], 0
        for part in self.parts:
            idx = part.index(spaces)
            pieces.append(torch.where(idx >= 0, idx + offset, idx))
            offset += part.old_size(spaces)
        return torch.cat(pieces) if pieces else torch.zeros(0, dtype=torch.long)

    def unit_of(self, name: str, spaces: Spaces) -> torch.Tensor:
        pieces = [p.unit_of(name, spaces) for p in self.parts]
        return torch.cat(pieces) if pieces else torch.zeros(0, dtype=torch.long)

    def share(self, spaces: Spaces) -> torch.Tensor:
        pieces = [p.share(spaces) for p in self.parts]
        return torch.cat(pieces) if pieces else torch.zeros(0)

    def spaces(self) -> tuple[str, ...]:
        return tuple(s for p in self.parts for s in p.spaces())


@dataclass(frozen=True)
class Pairs(Layout):
    """The pairwise dots i < j of ``rows`` (i <= j with ``diagonal``), in ``triu_indices`` order.

    A new pair of two old rows takes that pair's dot (dots are symmetric); a pair with a fresh
    row, or a row and its own copy when the diagonal is not kept, is a value the old model did
    not have: fresh."""

    rows: Layout
    diagonal: bool = False

    def _count(self, n: int) -> int:
        return n * (n + 1) // 2 if self.diagonal else n * (n - 1) // 2

    def old_size(self, spaces: Spaces) -> int:
        return self._count(self.rows.old_size(spaces))

    def new_size(self, spaces: Spaces) -> int:
        return self._count(self.rows.new_size(spaces))

    def index(self, spaces: Spaces) -> torch.Tensor:
        offset = 0 if self.diagonal else 1
        n_old, n_new = self.rows.old_size(spaces), self.rows.new_size(spaces)
        position = torch.full((n_old, n_old), -1, dtype=torch.long)
        triu = torch.triu_indices(n_old, n_old, offset=offset)
        position[triu[0], triu[1]] = torch.arange(triu.shape[1])
        rows = self.rows.index(spaces)
        new = torch.triu_indices(n_new, n_new, offset=offset)
        a, b = rows[new[0]], rows[new[1]]
        lo, hi = torch.minimum(a, b), torch.maximum(a, b)
        out = position[lo.clamp(min=0), hi.clamp(min=0)]
        return torch.where((lo < 0) | (hi < 0), -1, out)

    def unit_of(self, name: str, spaces: Spaces) -> torch.Tensor:
        return torch.full((self.old_size(spaces),), -1, dtype=torch.long)

    def share(self, spaces: Spaces) -> torch.Tensor:
        # The new pairs of old pair (a, b), a != b, are the copies of a times the copies of b:
        # their shares multiply and sum to 1 (a row with its own copy is fresh: share 0).
        offset = 0 if self.diagonal else 1
        n_new = self.rows.new_size(spaces)
        new = torch.triu_indices(n_new, n_new, offset=offset)
        rows = self.rows.share(spaces)
        return torch.where(self.index(spaces) >= 0, rows[new[0]] * rows[new[1]], 0.0)

    def spaces(self) -> tuple[str, ...]:
        return self.rows.spaces()


def equal_shares(index: torch.Tensor, old: int) -> torch.Tensor:
    """[new]: 1 / (number of new units of the same old unit); 0 for fresh units."""
    counts = torch.bincount(index[index >= 0], minlength=max(old, 1)).clamp(min=1)
    return torch.where(index >= 0, 1.0 / counts[index.clamp(min=0)], 0.0)


def _along(values: torch.Tensor, axis: int, ndim: int) -> torch.Tensor:
    shape = [1] * ndim
    shape[axis] = values.numel()
    return values.view(shape)


def remap(old: torch.Tensor, init: torch.Tensor, axes: Sequence[AxisRule], spaces: Spaces
          ) -> torch.Tensor:
    """The new tensor (shaped like ``init``) from ``old`` under each axis's (role, layout).

    ``init`` supplies the values of fresh units on ``"out"``/``"elem"`` axes.
    """
    value = old.detach()
    ndim = old.dim()
    fresh_out = torch.zeros((), dtype=torch.bool)
    scale = torch.ones(())
    for axis, rule in enumerate(axes):
        if rule is None:
            continue
        role, layout = rule
        if role not in ROLES:
            raise ValueError(f"unknown role {role!r}; expected one of {', '.join(ROLES)}")
        if old.shape[axis] != layout.old_size(spaces):
            raise RuntimeError(f"axis {axis} holds {old.shape[axis]} values, its layout "
                               f"{layout} {layout.old_size(spaces)}")
        idx = layout.index(spaces)
        value = value.index_select(axis, idx.clamp(min=0))
        fresh = _along(idx < 0, axis, ndim)
        if role == "in":
            share = torch.where(idx >= 0, layout.share(spaces), 0.0).to(old.dtype)
            scale = scale * _along(share, axis, ndim)
        else:
            fresh_out = fresh_out | fresh
    if value.shape != init.shape:
        raise RuntimeError(f"remapped to {tuple(value.shape)}, the new model holds {tuple(init.shape)}")
    return torch.where(fresh_out, init.detach(), value * scale)


def unit_norms(tensor: torch.Tensor, axes: Sequence[AxisRule], name: str, spaces: Spaces
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """Squared norms of the slices of ``tensor`` belonging to each unit of space ``name``:
    (as producer, i.e. on "out"/"elem" axes; as consumer, on "in" axes), each [old]."""
    size = spaces[name].old
    produced, consumed = torch.zeros(size), torch.zeros(size)
    squares = tensor.detach().float().pow(2)
    for axis, rule in enumerate(axes):
        if rule is None or name not in rule[1].spaces():
            continue
        role, layout = rule
        units = layout.unit_of(name, spaces)
        per_position = squares.sum(dim=[d for d in range(tensor.dim()) if d != axis]) \
            if tensor.dim() > 1 else squares
        keep = units >= 0
        target = consumed if role == "in" else produced
        target.index_add_(0, units[keep], per_position[keep])
    return produced, consumed
