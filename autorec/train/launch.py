"""Launching many training processes through torch.distributed.run (torchrun, elastic).

``autorec train --nproc-per-node N [--nnodes M --rdzv-endpoint HOST:PORT --max-restarts K]``
re-runs itself as N workers per node under torchrun's elastic agent: the agent rendezvouses
the nodes, sets RANK/WORLD_SIZE/LOCAL_RANK for each worker, and on a worker's death (kill -9
included) stops the others and restarts them all, up to K times; the trainer then resumes from
the latest checkpoint (``--checkpoint-dir``).

Example:
    >>> torchrun_args(["train", "--data", "synthetic"], nproc_per_node=2)[:6]
    ['--nproc-per-node', '2', '--nnodes', '1', '--max-restarts', '0']
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Sequence


def under_launcher() -> bool:
    """True inside a worker that torchrun (or Ray Train, or Slurm via torchrun) started."""
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


def torchrun_args(worker_argv: Sequence[str], *, nproc_per_node: int, nnodes: str = "1",
                  rdzv_endpoint: str | None = None, rdzv_id: str | None = None,
                  max_restarts: int = 0, node_rank: int | None = None) -> list[str]:
    """torchrun's argument list that runs ``python -m autorec.cli <worker_argv>`` on each worker.

    One node without an endpoint runs standalone (a local rendezvous on a free port); several
    nodes meet at ``rdzv_endpoint`` through the c10d rendezvous, under ``rdzv_id`` (the same on
    every node; default: a fresh id, so give one when starting nodes by hand).
    """
    if nproc_per_node < 1:
        raise ValueError(f"--nproc-per-node: expected a positive integer, got {nproc_per_node}")
    if max_restarts < 0:
        raise ValueError(f"--max-restarts: expected 0 or more, got {max_restarts}")
    args = ["--nproc-per-node", str(nproc_per_node), "--nnodes", str(nnodes),
            "--max-restarts", str(max_restarts)]
    if rdzv_endpoint is None:
        if str(nnodes) != "1":
            raise ValueError(f"--rdzv-endpoint: --nnodes {nnodes} needs HOST:PORT of the "
                             "rendezvous (the first node's address)")
        args.append("--standalone")
    else:
        if ":" not in rdzv_endpoint:
            raise ValueError(f"--rdzv-endpoint: expected HOST:PORT, got {rdzv_endpoint!r}")
        args += ["--rdzv-backend", "c10d", "--rdzv-endpoint", rdzv_endpoint,
                 "--rdzv-id", rdzv_id or uuid.uuid4().hex[:12]]
    if node_rank is not None:
        args += ["--node-rank", str(node_rank)]
    return [*args, "-m", "autorec.cli", *worker_argv]


def launch(worker_argv: Sequence[str], **kwargs: object) -> int:
    """Run torchrun in this process (it becomes the elastic agent); 0 when every worker succeeded."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import main as torchrun

    try:
        torchrun(torchrun_args(worker_argv, **kwargs))  # type: ignore[arg-type]
    except ChildFailedError as exc:
        print(f"autorec: error: training failed on {len(exc.failures)} worker(s): "
              f"{exc.get_first_failure()[1].message or exc.get_first_failure()[1].exitcode}",
              file=sys.stderr)
        return 1
    return 0
