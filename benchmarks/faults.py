"""Issue 24's fault matrix as figures: every row re-measured with real processes and storages,
merged into ``benchmarks/results/faults.json`` (flat numbers, with the machine and commit).

    .venv/bin/python -m benchmarks.faults            # the full matrix (about 20 minutes)
    .venv/bin/python -m benchmarks.faults --rows input,trials

Rows (each its own module, shared with the tests under tests/faults/):

* ``kill`` (:mod:`benchmarks.faults_kill`): kill -9 of searches, a one-shot supernet and a
  scaling ladder at seeded random points, then rerun: ``kill_points``, ``trials_lost``,
  ``trials_repeated``; 4 workers x 10 trials on SQLite, a journal file and PostgreSQL:
  ``workers``, ``trials_per_worker``, ``records_sqlite``, ``records_journal``, ``records_postgres``.
* ``trials`` (:mod:`benchmarks.faults_trials`): a trial that raises, runs out of memory, turns
  NaN, or runs past its time limit is recorded as failed and the study finishes; a killed rank
  under torchrun resumes from its last complete checkpoint: ``bad_trials_*``, ``rank_kill_resumed``.
* ``input`` (:mod:`benchmarks.faults_input`): malformed inputs each end in one clear line, a
  non-zero exit and nothing touched: ``bad_input_classes``, ``bad_input_clear``.

Rows not asked for keep their figures from the existing JSON.
"""

from __future__ import annotations

import argparse
import importlib
import json
import time
from pathlib import Path
from typing import Any

from benchmarks.results_file import RESULTS, merge_results

ROWS = {"kill": "benchmarks.faults_kill", "trials": "benchmarks.faults_trials",
        "input": "benchmarks.faults_input"}
JSON = RESULTS / "faults.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated, of {', '.join(ROWS)}")
    parser.add_argument("--json", type=Path, default=JSON)
    args = parser.parse_args()
    rows = [r.strip() for r in args.rows.split(",") if r.strip()]
    unknown = sorted(set(rows) - set(ROWS))
    if unknown:
        parser.error(f"--rows: unknown {', '.join(unknown)}; expected some of {', '.join(ROWS)}")
    measured: dict[str, Any] = {}
    for row in rows:
        start = time.perf_counter()
        figures = importlib.import_module(ROWS[row]).measure()
        measured.update(figures)
        measured[f"{row}_seconds"] = round(time.perf_counter() - start, 1)
        print(row, json.dumps(figures), flush=True)
    record = merge_results(args.json, measured)
    print(json.dumps(record, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
