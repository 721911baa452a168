"""No private attribute of an Optuna or Ray object is read or written anywhere in autorec/: their
private parts change between releases without notice, and the crash recovery, the Ray bridge and
the dashboard must survive an upgrade. The check is textual: a name mentioning optuna, ray, a
study, a trial or a storage, followed by ``._`` and a lowercase letter."""

from __future__ import annotations

import re
from pathlib import Path

PATTERN = re.compile(r"(optuna|ray|study|trial|storage)\w*\._[a-z]")
PACKAGE = Path(__file__).resolve().parents[1] / "autorec"


def test_the_pattern_catches_what_it_is_for():
    for text in ("study._storage", "trial._trial_id", "self._ot_study._storage.get_trial", "ray_trial._x"):
        assert PATTERN.search(text), text
    for text in ("study.user_attrs", "self._ot_study.tell", "storage.get_study_id_from_name"):
        assert not PATTERN.search(text), text


def test_no_private_attribute_of_optuna_or_ray_objects():
    hits = [f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()}"
            for path in sorted(PACKAGE.rglob("*.py"))
            for number, line in enumerate(path.read_text().splitlines(), 1) if PATTERN.search(line)]
    assert not hits, "\n".join(hits)
