"""Nodes emulated on one machine, for the multi-node tests and ``benchmarks/multinode.py``.

A torchrun "node" is one ``autorec train --nnodes 2`` launcher (a torchrun elastic agent and its
workers, in a process group of its own so the node can be killed whole), meeting the other at a
c10d rendezvous on 127.0.0.1, exactly as ``trainers/torchrun_multi_node.sh`` runs on each node
of a cluster. A Ray "node" is a ``ray start`` process: :class:`RayCluster` starts a head and a
second node (each with CPUs of its own, token authentication on), as a user does on two machines.

Example:
    >>> port = free_port()  # doctest: +SKIP
    >>> nodes = start_nodes(Path("logs"), port, "run1", ["--data", "synthetic", "--json"])  # doctest: +SKIP
    >>> finish(nodes, Path("logs"))  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RAY = Path(sys.executable).parent / "ray"
TIMEOUT_S = 600


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_node(logs: Path, node: int, port: int, run_id: str, args: list[str],
               nproc: int = 2) -> subprocess.Popen:
    """Node ``node``'s launcher: ``autorec train --nnodes 2 --nproc-per-node nproc`` with the
    rendezvous at 127.0.0.1:``port``, then ``args`` (a later flag replaces an earlier one), its
    output in ``logs``/node<node>.log."""
    log = (logs / f"node{node}.log").open("a")
    command = [sys.executable, "-m", "autorec.cli", "train", "--nnodes", "2", "--nproc-per-node", str(nproc),
               "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", run_id, *args]
    return subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})


def start_nodes(logs: Path, port: int, run_id: str, args: list[str],
                nproc: int = 2) -> list[subprocess.Popen]:
    """Node 0's launcher, then, once it serves the rendezvous store on ``port`` (as the node named
    by RDZV_ENDPOINT does on a cluster), node 1's."""
    first = start_node(logs, 0, port, run_id, args, nproc)
    deadline = time.monotonic() + 120
    while True:
        if first.poll() is not None:
            tail = (logs / "node0.log").read_text()[-3000:]
            raise RuntimeError(f"node 0 ended before the rendezvous:\n{tail}")
        if time.monotonic() > deadline:
            raise TimeoutError("node 0 never served the rendezvous")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.1)
    return [first, start_node(logs, 1, port, run_id, args, nproc)]


def finish(nodes: list[subprocess.Popen], logs: Path, timeout_s: float = TIMEOUT_S) -> None:
    """Wait for every node; a node that fails raises with its log's tail (and a node that hangs
    kills them all)."""
    for i, proc in enumerate(nodes):
        try:
            code = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            for p in nodes:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
            raise
        if code != 0:
            tail = (logs / f"node{i}.log").read_text()[-3000:]
            raise RuntimeError(f"node {i} exited with {code}:\n{tail}")


def trial_states(db: Path) -> Counter[str]:
    """How many trials of the SQLite study at ``db`` are in each state, read-only (none while its
    tables do not exist: a poller must not race the run's creation of them)."""
    if not db.exists():
        return Counter()
    try:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)) as con:
            return Counter(dict(con.execute("SELECT state, count(*) FROM trials GROUP BY state").fetchall()))
    except sqlite3.OperationalError:
        return Counter()


def running_nodes(db: Path) -> set[str]:
    """The Ray nodes that trials RUNNING in the SQLite study at ``db`` train on (their ``node``
    attr, which the driver writes from a trial's first epoch report), read-only."""
    if not db.exists():
        return set()
    query = ("SELECT a.value_json FROM trial_user_attributes a JOIN trials t ON a.trial_id = t.trial_id "
             "WHERE t.state = 'RUNNING' AND a.key = 'node'")
    try:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)) as con:
            return {row[0] for row in con.execute(query).fetchall()}
    except sqlite3.OperationalError:
        return set()


def wait_for_both_nodes_training(db: Path, proc: subprocess.Popen, log: Path,
                                 timeout_s: float = TIMEOUT_S) -> None:
    """Wait until a trial of the study at ``db`` trains on each of the two nodes (two RUNNING
    trials have reported an epoch, from different nodes), so that a node lost now cuts a trial
    mid-training. Counting RUNNING trials alone is not enough: a trial is RUNNING from the
    driver's ask, before its actor is placed, and one node may be between trials."""
    deadline = time.monotonic() + timeout_s
    while True:
        if len(running_nodes(db)) >= 2:
            return
        if proc.poll() is not None:
            raise RuntimeError("the search ended first:\n" + log.read_text()[-3000:])
        if time.monotonic() > deadline:
            raise TimeoutError(f"no trial trained on each node at once within {timeout_s} s: "
                               f"{dict(trial_states(db))}")
        time.sleep(0.1)


def children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (from /proc)."""
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        out += [int(c) for c in (task / "children").read_text().split()]
    return out + [g for c in out for g in children(c)]


def lose_node(node: subprocess.Popen) -> None:
    """kill -9 a node: its launcher and its workers (torchrun starts them in sessions of their own)."""
    for pid in [node.pid, *children(node.pid)]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    node.wait()


class RayCluster:
    """Two Ray nodes on localhost: the head (a daemon) and a second node held in the foreground
    (``--block``), so that it can be killed whole. ``env`` is what a client of the cluster needs
    (the token); ``address`` its GCS address."""

    def __init__(self, tmp: Path, cpus_per_node: int = 1) -> None:
        self.port, self.tmp = free_port(), tmp
        # Ray's token authentication: every process of the cluster and its clients share the token.
        self.env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16),
                    "RAY_USAGE_STATS_ENABLED": "0", "OMP_NUM_THREADS": "1"}
        self.address = f"127.0.0.1:{self.port}"
        subprocess.run([str(RAY), "start", "--head", "--port", str(self.port),
                        "--num-cpus", str(cpus_per_node), "--include-dashboard", "false",
                        "--temp-dir", str(tmp / "ray")],
                       env=self.env, check=True, capture_output=True, timeout=120)
        self.second = subprocess.Popen([str(RAY), "start", "--address", self.address, "--num-cpus",
                                        str(cpus_per_node), "--block"], env=self.env, start_new_session=True,
                                       stdout=(tmp / "node1.log").open("w"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while self.nodes() < 2:
            if self.second.poll() is not None:
                self.stop()
                raise RuntimeError("the second node ended:\n" + (tmp / "node1.log").read_text()[-2000:])
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError("the second node never joined")
            time.sleep(1)

    def nodes(self) -> int:
        """Alive nodes, as ``ray status`` lists them."""
        out = subprocess.run([str(RAY), "status", "--address", self.address], env=self.env,
                             capture_output=True, text=True, timeout=60).stdout
        active = out.split("Active:")[-1].split("Pending:")[0]
        return sum(1 for line in active.splitlines() if "node_" in line)

    def lose_second_node(self) -> None:
        """kill -9 the second node's raylet and every worker process it started (Ray starts its
        workers in sessions of their own: the process group alone would leave them running, and
        a trial on the "lost" node would finish)."""
        doomed = children(self.second.pid)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.second.pid, signal.SIGKILL)
        for pid in doomed:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.second.wait()

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.second.pid, signal.SIGKILL)
        subprocess.run([str(RAY), "stop", "--force"], env=self.env, capture_output=True, timeout=120)
        shutil.rmtree(self.tmp / "ray", ignore_errors=True)
