"""Issue 24's fault row "a killed rank": kill -9 one torchrun worker while it writes a checkpoint.

``autorec train --nproc-per-node 2 --max-restarts 1`` trains a tiny DLRM over gloo with a
sharded checkpoint every step. Once a complete checkpoint exists (``LATEST``) and the next one
is being written (its ``.step-N.partial`` folder exists), worker rank 1 (not the launcher) gets
SIGKILL; torchrun's agent stops rank 0 and restarts both, they resume from the last complete
checkpoint, and the run must end on the uncut run's curve and metrics (:data:`LOSS_TOL`,
:data:`METRIC_TOL`). The uncut run is the same job in one process (2 ranks reproduce it within
float noise: tests/train/test_multiprocess.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TABLES = ("t_cat_0", "t_cat_1", "t_cat_2", "t_cat_3")
EPOCHS, BATCH, STEPS_PER_EPOCH = 2, 200, 13  # 2401 training rows: 13 global steps an epoch
DATA = {"preset": "tiny", "num_samples": 3001}
LOSS_TOL, METRIC_TOL = 1e-4, 1e-3  # float noise of summing over 2 ranks, amplified by Adam over 26 steps
TIMEOUT_S = 600


@dataclass
class KilledRun:
    """What the cut run did: the checkpoint being written when rank 1 died, and its result."""

    code: int
    partial: str | None  # the staged checkpoint folder seen just before the kill
    result: dict[str, Any] | None
    log: str

    @property
    def resumed(self) -> bool:
        """The restarted workers resumed from a checkpoint at world size 2 and finished."""
        r = self.result
        return (self.code == 0 and r is not None and r["resumed_from"] is not None
                and r["resumed_from"]["world_size"] == 2)

    @property
    def resumed_step(self) -> int | None:
        """The global step of the checkpoint the restart loaded."""
        if not self.resumed:
            return None
        r = self.result["resumed_from"]  # type: ignore[index]
        return r["epoch"] * STEPS_PER_EPOCH + r["step"]


def plan(path: Path, ranks: list[int]) -> Path:
    """Tables table-wise on ``ranks`` and one data-parallel (whole tables: the same row-wise
    Adagrad updates at any world size, so curves compare)."""
    pairs = zip(TABLES[1:], ranks, strict=True)
    tables = {t: {"sharding_type": "table_wise", "ranks": [r]} for t, r in pairs}
    path.write_text(json.dumps({"version": 1, "tables": {TABLES[0]: {"sharding_type": "data_parallel"},
                                                         **tables}}))
    return path


def train_args(folder: Path, *extra: str) -> list[str]:
    data = [a for k, v in DATA.items() for a in ("--data-opt", f"{k}={v}")]
    return [sys.executable, "-m", "autorec.cli", "train", "--data", "synthetic", *data, "--arch", "dlrm",
            "--batch-size", str(BATCH), "--lr", "3e-3", "--embedding-lr", "0.1", "--epochs", str(EPOCHS),
            "--patience", str(EPOCHS), "--json", *extra]


def _process_tree(root: int) -> list[int]:
    """Every descendant of ``root``, read from /proc (Linux)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(entry.name)] = int(fields[1])
    found, frontier = [], [root]
    while frontier:
        children = [pid for pid, parent in parents.items() if parent in frontier]
        found += children
        frontier = children
    return found


def worker_pid(launcher: int, rank: int) -> int | None:
    """The first attempt's worker process of ``rank`` under the launcher (by its environment)."""
    for pid in _process_tree(launcher):
        try:
            env = dict(item.split("=", 1) for item in Path(f"/proc/{pid}/environ").read_text().split("\0")
                       if "=" in item)
        except OSError:
            continue
        if env.get("RANK") == str(rank) and env.get("TORCHELASTIC_RESTART_COUNT") == "0":
            return pid
    return None


def _staged(checkpoints: Path) -> str | None:
    try:
        names = os.listdir(checkpoints)
    except FileNotFoundError:
        return None
    return next((n for n in names if n.startswith(".step-") and n.endswith(".partial")), None)


def kill_one_rank(folder: Path) -> KilledRun:
    """Start the 2-process run, kill -9 rank 1 while a checkpoint is being written, let torchrun
    restart it, and return what the run produced."""
    folder.mkdir(parents=True, exist_ok=True)
    ck, out, log = folder / "ck", folder / "out.json", folder / "launcher.log"
    args = train_args(folder, "--nproc-per-node", "2", "--max-restarts", "1", "--checkpoint-dir", str(ck),
                      "--checkpoint-every", "1", "--plan", str(plan(folder / "p2.json", [1, 0, 1])),
                      "--output", str(out))
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "OMP_NUM_THREADS": "1"}
    with log.open("w") as sink:  # a file, not a pipe: nobody drains a pipe while we wait
        launcher = subprocess.Popen(args, cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT)
        partial, deadline = None, time.monotonic() + TIMEOUT_S
        try:
            while launcher.poll() is None and time.monotonic() < deadline:
                if (ck / "LATEST").exists():
                    partial = _staged(ck)
                    if partial is not None:
                        victim = worker_pid(launcher.pid, rank=1)
                        if victim is not None:
                            os.kill(victim, signal.SIGKILL)
                            break
                time.sleep(0.001)
            code = launcher.wait(timeout=TIMEOUT_S)
        finally:
            if launcher.poll() is None:
                launcher.kill()
                launcher.wait()
    result = json.loads(out.read_text()) if code == 0 and out.exists() else None
    return KilledRun(code, partial, result, log.read_text()[-3000:])


def uncut(folder: Path) -> dict[str, Any]:
    """The same job in one process, uninterrupted: {step_losses, val, test}."""
    out = folder / "uncut.json"
    proc = subprocess.run(train_args(folder, "--plan", str(plan(folder / "p1.json", [0, 0, 0])),
                                     "--output", str(out)),
                          cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S,
                          env={**os.environ, "PYTHONWARNINGS": "ignore", "OMP_NUM_THREADS": "1"})
    if proc.returncode != 0:
        raise RuntimeError(f"the uncut run failed: {proc.stderr[-2000:]}")
    return json.loads(out.read_text())


def differences(killed: KilledRun, reference: dict[str, Any]) -> dict[str, float]:
    """The largest gaps between the cut run and the uncut one: per-step loss, then AUC and
    logloss of val and test."""
    result = killed.result or {}
    losses, want = result.get("step_losses", []), reference["step_losses"]
    gaps = {"steps": float(abs(len(losses) - len(want))),
            "step_loss": max((abs(a - b) for a, b in zip(losses, want, strict=False)), default=0.0)}
    for split in ("val", "test"):
        for key in ("auc", "logloss"):
            gaps[f"{split}_{key}"] = abs(result.get(split, {}).get(key, float("inf")) - reference[split][key])
    return gaps


def matches_uncut(killed: KilledRun, folder: Path) -> bool:
    """The cut run ended on the uncut run's curve and metrics, within the stated tolerances."""
    if killed.result is None:
        return False
    gaps = differences(killed, uncut(folder))
    return (gaps["steps"] == 0 and gaps["step_loss"] <= LOSS_TOL
            and all(v <= METRIC_TOL for k, v in gaps.items() if k not in ("steps", "step_loss")))
