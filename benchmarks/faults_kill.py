"""Issue 24's rows "kill -9 mid-search" and "N workers x M trials on one storage".

    .venv/bin/python -m benchmarks.faults_kill            # the full matrix (some minutes)
    .venv/bin/python -m benchmarks.faults_kill --quick    # a smoke of each row

Kill -9: real ``autorec search`` / ``autorec scale`` processes on tiny studies of the random and
TPE strategies, a one-shot study (its supernet training and candidate search) and a scaling
ladder, each killed with SIGKILL at points drawn from a seeded RNG (during a trial's training,
while its result is written, between trials, during the supernet's training), several kills in
a row on one study, then rerun to the end and compared with an uncut run of the same seed
(:mod:`benchmarks.faults_runs`). Workers: ``autorec search --workers 4`` on a study of 4 x 10
trials in SQLite, a journal file and PostgreSQL (a real server: ``AUTOREC_TEST_POSTGRES_URL``,
or one tools/start_postgres.sh starts). :func:`measure` returns the flat figures;
benchmarks/faults.py merges them with the other rows' into benchmarks/results/faults.json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.faults_runs import (
    ROOT,
    ChainResult,
    KillPoint,
    kill_chain,
    run,
    study_file,
    table,
    trials_of,
    workers_run,
)

SEED = 24  # the number: the kill schedule's seed
# Per strategy: chains of kills (each a list of kills on one study) and the study's size.
CHAINS = {"random": (2, 4), "tpe": (2, 3), "oneshot": (1, 4), "ladder": (1, 4)}
QUICK_CHAINS = {"random": (1, 2)}
SEARCH_PHASES = ["training", "training", "write", "between"]  # training twice as often
TRIALS, STEPS = 6, 20  # a search study's trials, and steps per training (a window to kill in)


def schedule(strategy: str, kills: int, rng: random.Random) -> list[KillPoint]:
    """``kills`` kill points for a study of ``strategy``, drawn from ``rng``. A one-shot study is
    cut in its supernet's training first (each rerun resumes it and trains on), then during its
    candidate search; a search or a ladder in a trial's training, its result's write or between
    trials, at the first or second trial the process starts."""
    points = []
    for k in range(kills):
        if strategy == "oneshot" and k < kills // 2:
            points.append(KillPoint(strategy, "supernet", 0, round(rng.uniform(0.0, 0.5), 2)))
            continue
        # A candidate's score is recorded with its state (no metrics written apart to cut in).
        phases = ["training", "between"] if strategy == "oneshot" else SEARCH_PHASES
        phase = rng.choice(phases)
        delay = round(rng.uniform(0.0, 0.1), 2) if phase == "training" else 0.0
        points.append(KillPoint(strategy, phase, rng.randrange(2), delay))
    return points


def study_of(folder: Path, strategy: str) -> Path:
    """The study a strategy's kills run on (a ladder of 2 families x 4 rungs; a one-shot study
    of 6 candidates; else 6 trials of 20 steps)."""
    if strategy in ("oneshot", "ladder"):
        return study_file(folder, strategy)
    return study_file(folder, strategy, trials=TRIALS, steps=STEPS)


def kill_strategy(root: Path, strategy: str, chains: int, kills: int) -> list[ChainResult]:
    """The uncut run of ``strategy``'s study, then ``chains`` chains of ``kills`` kills (drawn
    from an RNG seeded by ``SEED`` and the strategy) on fresh copies of it, each judged against
    the uncut run."""
    rng = random.Random(f"{SEED}-{strategy}")
    reference_path = study_of(root / strategy / "uncut", strategy)
    run(reference_path)
    reference = table(trials_of(reference_path))
    ordered = strategy != "ladder"  # a grid's order after a resume is the sampler's choice
    return [kill_chain(study_of(root / strategy / f"chain{c}", strategy), schedule(strategy, kills, rng),
                       reference, ordered) for c in range(chains)]


def postgres_url() -> str | None:
    """The test server's URL: ``AUTOREC_TEST_POSTGRES_URL``, or one tools/start_postgres.sh
    starts (None where it cannot)."""
    url = os.environ.get("AUTOREC_TEST_POSTGRES_URL")
    if url:
        return url
    done = subprocess.run(["bash", str(ROOT / "tools" / "start_postgres.sh")], capture_output=True, text=True)
    return done.stdout.strip() or None if done.returncode == 0 else None


def measure(quick: bool = False) -> dict[str, Any]:
    """Run both rows and return their flat figures (``quick``: one chain of two kills and
    4 workers x 2 trials)."""
    workers, per_worker = 4, 2 if quick else 10
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="autorec-faults-") as tmp:
        root = Path(tmp)
        results = [r for strategy, (chains, kills) in (QUICK_CHAINS if quick else CHAINS).items()
                   for r in kill_strategy(root, strategy, chains, kills)]
        outcomes = [o for r in results for o in r.outcomes]
        figures.update({
            "kill_points": sum(o.killed for o in outcomes),
            "kill_points_missed": sum(not o.killed for o in outcomes),
            "kill_trials_cut": sum(len(o.cut) for o in outcomes),
            "trials_lost": sum(r.lost for r in results),
            "trials_repeated": sum(r.repeated for r in results),
            "kill_numbers_reused": sum(not r.numbers_ok for r in results),
            "kill_tables_differing": sum(not r.table_equal for r in results),
            "kill_chains": len(results),
            "workers": workers, "trials_per_worker": per_worker,
        })
        problems = [p for r in results for p in r.problems]
        if problems:
            figures["kill_problems"] = "; ".join(problems)
        url = postgres_url()
        for name, storage in (("sqlite", "sqlite"), ("journal", "journal"), ("postgres", url)):
            if storage is None:
                figures[f"records_{name}"] = None
                continue
            out = workers_run(root / f"workers-{name}", storage, workers, per_worker)
            figures[f"records_{name}"] = out.records
            figures[f"duplicates_{name}"] = out.duplicates
            figures[f"worker_processes_{name}"] = out.processes
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke of each row")
    print(json.dumps(measure(parser.parse_args().quick), indent=1))


if __name__ == "__main__":
    main()
