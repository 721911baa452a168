"""The ``towers`` section of a search space: tower count, tower module kind and size.

::

    towers:
      num: [0, 4]              # K towers; 0 = no towers (every pooled embedding enters the stack)
      kinds: [dlrm, mlp]       # the tower module's block (its config: the kind's tower_module)
      n_out: [1, 2]            # vectors each tower emits
      partition: round_robin   # the groups for each K: round_robin (features dealt in schema
                               # order), or a JSON file {"4": [["f1", "f7"], ...], ...} that the
                               # partitioner wrote (autorec.towers.partition; relative to the space)

The partition for a given K is fixed (a DNAS supernet run keeps it too); the search chooses
K, the kind and n_out. Optuna parameters: ``towers.num``, ``towers.kind``, ``towers.n_out``
(the last two only with towers).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autorec.arch import BlockConfig, TowerSpec
from autorec.blocks import default_kind, kind, kind_names
from autorec.space.values import Invalid, parse_mapping, parse_values


def tower_module(name: str) -> BlockConfig:
    """The module config of a tower of kind ``name`` (its BlockKind's ``tower_module``)."""
    module = kind(name).tower_module
    if module is None:
        raise ValueError(f"towers.kinds: block kind {name!r} has no tower module")
    return module


def tower_kinds() -> tuple[str, ...]:
    """The registered kinds that can be a tower's module."""
    return tuple(name for name in kind_names() if kind(name).tower_module is not None)


_KEYS = ("num", "kinds", "n_out", "partition")


@dataclass(frozen=True)
class TowerChoices:
    """Tower counts (0: none), module kinds, n_out values, and the fixed groups per count."""

    num: tuple[int, ...] = (0,)
    kinds: tuple[str, ...] = field(default_factory=lambda: (default_kind(),))
    n_out: tuple[int, ...] = (1,)
    partition: str | tuple[tuple[int, tuple[tuple[str, ...], ...]], ...] = "round_robin"

    def groups(self, k: int, features: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
        """The K groups of ``features`` (checked against them; raises ValueError naming the key)."""
        if self.partition == "round_robin":
            if k > len(features):
                raise ValueError(f"towers.num: {k} towers for {len(features)} sparse features")
            return tuple(features[i::k] for i in range(k))
        found = dict(self.partition)  # type: ignore[arg-type]
        if k not in found:
            raise ValueError(f"towers.partition: no partition for {k} towers (it has {sorted(found)})")
        groups = found[k]
        listed = [f for g in groups for f in g]
        unknown = sorted(set(listed) - set(features))
        missing = sorted(set(features) - set(listed))
        if unknown or missing or len(listed) != len(set(listed)):
            raise ValueError(f"towers.partition[{k}]: the groups must hold every sparse feature once; "
                             f"unknown {unknown}, missing {missing}")
        return groups

    def spec(self, k: int, kind: str, n_out: int, features: tuple[str, ...]) -> TowerSpec | None:
        return None if k == 0 else TowerSpec(groups=self.groups(k, features), module=tower_module(kind),
                                             n_out=n_out)

    def f0(self, k: int, n_out: int, num_features: int, n_dense: int) -> int:
        """Vectors entering the interaction stack."""
        return (num_features if k == 0 else k * n_out) + (1 if n_dense else 0)


def parse_towers(data: Any, source: str) -> TowerChoices | None:
    """The ``towers`` section (None when absent); errors raise the space's Invalid with the key."""
    if data is None:
        return None
    section = parse_mapping(data, "towers", _KEYS)
    num = parse_values(section.get("num", [0]), "towers.num", "int", minimum=0)
    kinds = parse_values(section.get("kinds", [default_kind()]), "towers.kinds", "str",
                         one_of=tower_kinds())
    n_out = parse_values(section.get("n_out", [1]), "towers.n_out", "int", minimum=1)
    partition = section.get("partition", "round_robin")
    if partition != "round_robin":
        if not isinstance(partition, str):
            raise Invalid("towers.partition", f"expected round_robin or a JSON file name, got {partition!r}")
        partition = _read_partition(partition, source)
    return TowerChoices(num=tuple(num), kinds=tuple(kinds), n_out=tuple(n_out), partition=partition)


def _read_partition(name: str, source: str) -> tuple[tuple[int, tuple[tuple[str, ...], ...]], ...]:
    path = Path(name)
    if not path.is_absolute() and source not in ("", "<space>"):
        path = Path(source).parent / path
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise Invalid("towers.partition", f"no such partition file {str(path)!r}") from None
    except json.JSONDecodeError as exc:
        raise Invalid("towers.partition",
                       f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
    if not isinstance(data, Mapping) or not data:
        raise Invalid("towers.partition", f"{path}: expected an object of tower count -> groups")
    out = []
    for key, groups in data.items():
        where = f"towers.partition: {path}: [{key!r}]"
        if not str(key).isdigit() or int(key) < 1:
            raise Invalid(where, "expected a tower count (a positive integer) as the key")
        if (not isinstance(groups, list) or len(groups) != int(key)
                or not all(isinstance(g, list) and g and all(isinstance(f, str) for f in g) for g in groups)):
            raise Invalid(where, f"expected {key} non-empty lists of feature names")
        out.append((int(key), tuple(tuple(g) for g in groups)))
    return tuple(sorted(out))


def write_partition(path: str | Path, partitions: Mapping[int, tuple[tuple[str, ...], ...]]) -> None:
    """Write ``{K: groups}`` as the JSON file a space's ``towers.partition`` reads.

    Example:
        >>> import tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "p.json")
        >>> write_partition(path, {2: (("a", "c"), ("b",))})
        >>> open(path).read()
        '{"2": [["a", "c"], ["b"]]}'
    """
    Path(path).write_text(json.dumps({str(k): [list(g) for g in groups] for k, groups in partitions.items()}))
