"""Issue 20: each one-shot seed's training-equivalent in a unit timed beside it.

The issue's training-equivalent (TE) divides a search's seconds by "one full training of the
median architecture". The report times that training once (``--fresh-reference``), but this
machine's speed drifts by a third within a session: ``k55``'s seed 0 trained the very supernet
that ``k56``'s seed 0 had (the same draws, the same final loss) in 126.6 s where ``k56`` took
90.2 s, and its 4.14 TE divided those slow seconds by a unit timed in a fast hour. So
``--stage unit --when before|after`` trains the same reference (TPE's trial of median duration,
on its trial budget) right before and right after a seed's run, and keeps both in the seed's
folder (``units.json``); the report then divides each seed's search by the mean of its own units
as well (``oneshot_seed<N>_train_equivalents_adjacent``), beside the single-unit figure, which
it keeps. ``UNITS=1 bash benchmarks/until_final.sh k58 0 1 2`` brackets every seed so.

A units file is a JSON list of ``{"when", "seconds", "trial", "machine", "at"}`` records.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks.results_file import read_json

UNITS_FILE = "units.json"
WHEN = ("before", "after")


def read_units(directory: Path) -> list[dict[str, Any]]:
    """The units timed beside the seed whose study folder is ``directory`` ([] when none were).
    Exits naming the file and what is wrong when it is not a list of unit records.

    Example:
        >>> import tempfile
        >>> read_units(Path(tempfile.mkdtemp()))
        []
    """
    path = directory / UNITS_FILE
    if not path.exists():
        return []
    units = read_json(path, list, "a JSON list of unit records")
    for i, unit in enumerate(units):
        seconds = unit.get("seconds") if isinstance(unit, dict) else None
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0:
            raise SystemExit(f"{path}: record {i} has no 'seconds' > 0 (got {unit!r}); expected "
                             "records written by --stage unit")
        if unit.get("when") not in WHEN:
            raise SystemExit(f"{path}: record {i} has 'when' {unit.get('when')!r}; expected one of "
                             f"{', '.join(WHEN)}")
    return units


def record_unit(directory: Path, when: str, seconds: float, trial: int, machine: str) -> list[dict[str, Any]]:
    """Append one timed unit to ``directory``'s units file (written whole, then renamed over the
    old one, so a kill leaves the old file or the new, never half of one); returns every unit."""
    if when not in WHEN:
        raise ValueError(f"when: expected one of {', '.join(WHEN)}, got {when!r}")
    units = read_units(directory)
    units.append({"when": when, "seconds": seconds, "trial": trial, "machine": machine,
                  "at": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
    directory.mkdir(parents=True, exist_ok=True)
    staged = directory / f"{UNITS_FILE}.writing"
    staged.write_text(json.dumps(units, indent=1) + "\n")
    os.replace(staged, directory / UNITS_FILE)
    return units


def adjacent_keys(shots: list[dict[str, Any]]) -> dict[str, Any]:
    """Flat report keys from each seed's figures (``seed``, ``search_s`` and ``units``, the list
    :func:`read_units` gives): per seed with units, their mean (``adjacent_unit_s``), how many,
    the slowest over the fastest (``adjacent_unit_spread``) and the search in that unit; and the
    worst seed's (``oneshot_train_equivalents_adjacent_max``) only when every seed has units.

    Example:
        >>> units = [{"when": "before", "seconds": 90.0}, {"when": "after", "seconds": 110.0}]
        >>> keys = adjacent_keys([{"seed": 0, "search_s": 250.0, "units": units},
        ...                       {"seed": 1, "search_s": 320.0, "units": units}])
        >>> keys["oneshot_seed0_train_equivalents_adjacent"], keys["oneshot_train_equivalents_adjacent_max"]
        (2.5, 3.2)
        >>> bare = adjacent_keys([{"seed": 0, "search_s": 1.0, "units": []}])
        >>> "oneshot_train_equivalents_adjacent_max" in bare
        False
    """
    out: dict[str, Any] = {}
    equivalents = []
    for f in shots:
        seconds = [u["seconds"] for u in f.get("units", [])]
        if not seconds:
            continue
        unit = statistics.fmean(seconds)
        prefix = f"oneshot_seed{f['seed']}_"
        out |= {f"{prefix}adjacent_unit_s": unit, f"{prefix}adjacent_units": len(seconds),
                f"{prefix}adjacent_unit_spread": max(seconds) / min(seconds),
                f"{prefix}train_equivalents_adjacent": f["search_s"] / unit}
        equivalents.append(f["search_s"] / unit)
    if shots and len(equivalents) == len(shots):
        out["oneshot_train_equivalents_adjacent_max"] = max(equivalents)
    return out
