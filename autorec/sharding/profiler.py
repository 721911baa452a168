"""Measure the cost of embedding shards with the real kernels: the data the cost model fits.

A shard is the set of tables on one device. For each shard the profiler builds fbgemm's
table-batched embedding op (``SplitTableBatchedEmbeddingBagsCodegen``: the fused kernel that
torchrec's EmbeddingBagCollection runs under DistributedModelParallel, with the trainer's exact
row-wise Adagrad applied inside backward) and times, on fresh batches drawn from each table's
pooling factor and power-law access:

- forward: the pooled lookup of the whole batch (table-wise sharding: one device serves every
  sample for its tables), [B, sum of dims];
- backward: the backward pass with the fused optimizer update;
- comm: in a real multi-process gloo group (``world_size`` processes spawned through torchrun),
  the all-to-all of the shard's pooled output [B, sum of dims] (forward) plus that of its
  gradient (backward), every rank sending a payload of the same size, the slowest rank's time.

Times on CPU are process CPU time, not wall time: this project's machines are shared (2 cores,
several jobs), and wall time there measures the other jobs; CPU time of a single-threaded kernel
is what its wall time is on an idle core. Each time is the minimum over ``repeats`` runs (the
least disturbed one: caches and memory bandwidth are shared too). Profiles are JSON lines, one
shard each, with every table's features (:class:`ShardProfile`). ``device="cuda"`` puts the
tables in GPU memory, times wall clock after a synchronize and uses NCCL: written for GPU
machines and untested here.

Example:
    >>> from autorec.sharding.tables import TableSet
    >>> shard = TableSet.generate(2, seed=0, rows_range=(1e3, 1e4))
    >>> fwd, bwd = measure_compute(shard, batch_size=64, repeats=2)
    >>> fwd > 0 and bwd > 0
    True
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from autorec.sharding.tables import TableSet, TableSetError, access_indices

PROFILES = "profiles.jsonl"
_REQUIRED = ("tables", "batch_size", "device", "world_size", "forward_ms", "backward_ms", "comm_ms")


class ProfileError(ValueError):
    """A profile file is malformed; the message names the file and line."""


@dataclass(frozen=True)
class ShardProfile:
    """One shard's measured costs (ms per step at ``batch_size``) and its tables.

    Example:
        >>> from autorec.sharding.tables import TableSet
        >>> p = ShardProfile(TableSet.generate(1, seed=0), 64, "cpu", 2, 0.5, 0.7, 0.2)
        >>> ShardProfile.from_dict(json.loads(json.dumps(p.to_dict()))) == p
        True
        >>> p.targets.tolist()
        [0.5, 0.699999988079071, 0.20000000298023224]
    """

    tables: TableSet
    batch_size: int
    device: str
    world_size: int
    forward_ms: float
    backward_ms: float
    comm_ms: float
    repeats: int = 1

    @property
    def targets(self) -> torch.Tensor:
        """[3]: forward, backward, comm (ms)."""
        return torch.tensor([self.forward_ms, self.backward_ms, self.comm_ms])

    def to_dict(self) -> dict[str, object]:
        return {"tables": self.tables.to_dict()["tables"], "batch_size": self.batch_size,
                "device": self.device, "world_size": self.world_size, "repeats": self.repeats,
                "forward_ms": self.forward_ms, "backward_ms": self.backward_ms,
                "comm_ms": self.comm_ms}

    @classmethod
    def from_dict(cls, doc: object, where: str = "profile") -> ShardProfile:
        if not isinstance(doc, dict):
            raise ProfileError(f"{where}: expected a JSON object, got {type(doc).__name__}")
        missing = [k for k in _REQUIRED if k not in doc]
        if missing:
            raise ProfileError(f"{where}: missing key {missing[0]!r} (a profile needs "
                               f"{', '.join(_REQUIRED)})")
        try:
            tables = TableSet.from_dict({"tables": doc["tables"]}, where)
        except TableSetError as exc:
            raise ProfileError(str(exc)) from None
        values = {}
        for key in ("forward_ms", "backward_ms", "comm_ms"):
            value = doc[key]
            if not isinstance(value, (int, float)) or not value > 0 or not math.isfinite(value):
                raise ProfileError(f"{where}: {key}: expected a positive number of ms, got {value!r}")
            values[key] = float(value)
        for key in ("batch_size", "world_size"):
            if not isinstance(doc[key], int) or doc[key] < 1:
                raise ProfileError(f"{where}: {key}: expected a positive integer, got {doc[key]!r}")
        return cls(tables, doc["batch_size"], str(doc["device"]), doc["world_size"],
                   repeats=int(doc.get("repeats", 1)), **values)


def load_profiles(path: str | Path) -> list[ShardProfile]:
    """Every profile of a JSON-lines file (blank lines skipped); errors name the file and line."""
    path = Path(path)
    if not path.is_file():
        raise ProfileError(f"{path}: no such profile file")
    out = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ProfileError(f"{path}:{number}: not valid JSON: {exc.msg}") from None
        out.append(ShardProfile.from_dict(doc, f"{path}:{number}"))
    return out


def append_profiles(path: str | Path, profiles: Iterable[ShardProfile]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        for p in profiles:
            f.write(json.dumps(p.to_dict()) + "\n")


def shard_batch_inputs(tables: TableSet, batch_size: int, rng: np.random.Generator,
                       device: str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """One batch for fbgemm's TBE: indices [N] and offsets [T * B + 1] (table-major).

    Each sample looks up Poisson(pooling) ids of a table (at least one when pooling >= 1),
    drawn from the table's power-law access.
    """
    lengths, ids = [], []
    for t in tables.tables:
        n = rng.poisson(t.pooling, batch_size)
        if t.pooling >= 1:
            n = np.maximum(n, 1)
        lengths.append(n)
        ids.append(access_indices(t.rows, t.access_exponent, int(n.sum()), rng))
    flat = torch.from_numpy(np.concatenate(lengths).astype(np.int64))
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), flat.cumsum(0)])
    return torch.from_numpy(np.concatenate(ids)).to(device), offsets.to(device)


def build_tbe(tables: TableSet, device: str = "cpu") -> torch.nn.Module:
    """fbgemm's fused table-batched embedding bags for ``tables`` (sum pooling, exact row-wise
    Adagrad in backward), fp32 or fp16 weights as the tables say."""
    from fbgemm_gpu.split_embedding_configs import EmbOptimType, SparseType
    from fbgemm_gpu.split_table_batched_embeddings_ops_common import EmbeddingLocation
    from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
        ComputeDevice,
        SplitTableBatchedEmbeddingBagsCodegen,
    )

    cuda = device.startswith("cuda")
    location = EmbeddingLocation.DEVICE if cuda else EmbeddingLocation.HOST
    compute = ComputeDevice.CUDA if cuda else ComputeDevice.CPU
    precisions = {t.bytes_per_element for t in tables.tables}
    if len(precisions) != 1 or precisions - {2.0, 4.0}:
        raise ValueError(f"a profiled shard needs one weight precision (fp32 or fp16), got "
                         f"{sorted(precisions)} bytes per element")
    weights = SparseType.FP16 if precisions == {2.0} else SparseType.FP32
    return SplitTableBatchedEmbeddingBagsCodegen(
        [(t.rows, t.dim, location, compute) for t in tables.tables],
        optimizer=EmbOptimType.EXACT_ROWWISE_ADAGRAD, learning_rate=0.01, eps=1e-8,
        weights_precision=weights, device=device)


def _now(device: str) -> float:
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return time.perf_counter()


def _cpu_now(device: str) -> float:
    """The clock compute is timed by: this process's CPU time on CPU (time the scheduler gave to
    other processes on a shared machine does not count; one thread, so on an idle core it equals
    wall time), wall time after a synchronize on CUDA."""
    return _now(device) if device.startswith("cuda") else time.process_time()


def measure_compute(tables: TableSet, batch_size: int = 1024, repeats: int = 5, *,
                    device: str = "cpu", seed: int = 0,
                    min_total_s: float = 0.1) -> tuple[float, float]:
    """(forward ms, backward ms) of the shard ``tables``: minimum over at least ``repeats``
    batches (``repeats + 1`` fresh ones, cycled), after one untimed warm-up batch; process CPU
    time on CPU (see :func:`_cpu_now`)."""
    rng = np.random.default_rng(seed)
    tbe = build_tbe(tables, device)
    batches = [shard_batch_inputs(tables, batch_size, rng, device) for _ in range(repeats + 1)]
    grad = torch.randn(batch_size, sum(t.dim for t in tables.tables), device=device)
    fwd, bwd = math.inf, math.inf
    # small shards take more runs (up to 8x), until min_total_s of timed CPU: cheap, and they are
    # the ones a stray page fault or cache flush moves the most
    i, spent = 0, 0.0
    while i <= repeats or (spent < min_total_s and i <= 8 * repeats):
        indices, offsets = batches[i % len(batches)]
        start = _cpu_now(device)
        out = tbe(indices, offsets)
        middle = _cpu_now(device)
        out.backward(grad)
        end = _cpu_now(device)
        if i:  # the first batch warms up allocations and caches
            fwd, bwd = min(fwd, middle - start), min(bwd, end - middle)
            spent += end - start
        i += 1
    return fwd * 1e3, bwd * 1e3


def measure_comm_in_group(widths: Sequence[int], batch_size: int, repeats: int,
                          device: str = "cpu") -> list[float]:
    """Inside an initialised process group: per width w, the ms of an all-to-all of a [B, w]
    pooled output plus one of its gradient, every rank sending the same payload; the minimum over
    ``repeats`` rounds of the slowest rank's time (process CPU time on CPU, gloo's threads and the
    kernel's loopback copies included; see :func:`_cpu_now`). The rounds go over all widths in
    turn, so a burst of load on a shared machine spoils one round of many widths, not every round
    of one."""
    import torch.distributed as dist

    world = dist.get_world_size()
    if batch_size % world:
        raise ValueError(f"batch_size {batch_size} must divide by the world size {world}")
    best = [math.inf] * len(widths)
    buffers = {w: (torch.randn(batch_size, w, device=device),
                   torch.empty(batch_size, w, device=device)) for w in set(widths)}
    for round_ in range(repeats + 1):
        for i, width in enumerate(widths):
            x, y = buffers[width]
            dist.barrier()
            start = _cpu_now(device)
            dist.all_to_all_single(y, x)  # pooled embeddings to the ranks that own the samples
            dist.all_to_all_single(x, y)  # their gradients back
            elapsed = torch.tensor([_cpu_now(device) - start])
            dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
            if round_:  # round 0 warms up the connections
                best[i] = min(best[i], float(elapsed))
    return [b * 1e3 for b in best]


def measure_comm(widths: Sequence[int], batch_size: int = 1024, repeats: int = 5, *,
                 world_size: int = 2, device: str = "cpu", timeout_s: float = 900) -> list[float]:
    """:func:`measure_comm_in_group` in a fresh group of ``world_size`` processes that torchrun
    spawns (gloo on CPU, NCCL on CUDA); ms per width."""
    with tempfile.TemporaryDirectory() as tmp:
        request, result = Path(tmp) / "widths.json", Path(tmp) / "comm.json"
        request.write_text(json.dumps({"widths": [int(w) for w in widths], "batch_size": batch_size,
                                       "repeats": repeats, "device": device}))
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               "--nproc-per-node", str(world_size), "-m", "autorec.sharding.profiler",
               str(request), str(result)]
        env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env)
        if done.returncode or not result.is_file():
            raise RuntimeError(f"the {world_size}-process communication measurement failed "
                               f"(exit {done.returncode}):\n{done.stderr[-3000:]}")
        return [float(x) for x in json.loads(result.read_text())["ms"]]


def _comm_worker(request: str, result: str) -> None:
    """The torchrun worker of :func:`measure_comm`."""
    import torch.distributed as dist

    torch.set_num_threads(1)
    job = json.loads(Path(request).read_text())
    device = job["device"]
    if device.startswith("cuda"):
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        device = f"cuda:{torch.cuda.current_device()}"
    dist.init_process_group("nccl" if device.startswith("cuda") else "gloo")
    try:
        ms = measure_comm_in_group(job["widths"], job["batch_size"], job["repeats"], device)
        if dist.get_rank() == 0:
            Path(result).write_text(json.dumps({"ms": ms}))
    finally:
        dist.destroy_process_group()


def random_shards(n_shards: int, seed: int, *, max_tables: int = 40,
                  rows_range: tuple[float, float] = (1e3, 1e6),
                  max_shard_bytes: int = 384 << 20) -> list[TableSet]:
    """Shards of generated tables (:meth:`TableSet.generate`) scaled to fit this machine.

    Table counts are log-uniform in 1..``max_tables``; rows log-uniform in ``rows_range``; while
    a shard holds more than ``max_shard_bytes`` its largest table's rows are halved (down to
    the lower end of ``rows_range``), then, if still too big, its largest table is dropped.
    """
    from dataclasses import replace

    rng = np.random.default_rng(seed)
    shards = []
    for s in range(n_shards):
        n = round(math.exp(rng.uniform(0, math.log(max_tables))))
        tables = list(TableSet.generate(n, seed=seed * 100003 + s, rows_range=rows_range,
                                        prefix=f"s{s}t").tables)
        while sum(t.bytes for t in tables) > max_shard_bytes:
            big = max(range(len(tables)), key=lambda i: tables[i].bytes)
            if tables[big].rows // 2 >= rows_range[0]:
                tables[big] = replace(tables[big], rows=tables[big].rows // 2)
            elif len(tables) > 1:
                tables.pop(big)
            else:
                break
        shards.append(TableSet(tuple(tables)))
    return shards


def profile_shards(shards: Sequence[TableSet], *, batch_size: int = 1024, repeats: int = 5,
                   comm_repeats: int = 15, world_size: int = 2, device: str = "cpu", seed: int = 0,
                   log: bool = False) -> list[ShardProfile]:
    """Forward, backward (in this process, min of ``repeats``) and comm (in a
    ``world_size``-process group, min of ``comm_repeats`` rounds) of each shard."""
    compute = []
    for i, shard in enumerate(shards):
        compute.append(measure_compute(shard, batch_size, repeats, device=device, seed=seed + i))
        if log:
            print(f"shard {i + 1}/{len(shards)}: {len(shard)} tables, fwd {compute[-1][0]:.2f} ms, "
                  f"bwd {compute[-1][1]:.2f} ms", file=sys.stderr, flush=True)
    widths = [sum(t.dim for t in s.tables) for s in shards]
    comm = measure_comm(widths, batch_size, comm_repeats, world_size=world_size, device=device)
    return [ShardProfile(s, batch_size, device.split(":")[0], world_size, f, b, c, repeats)
            for s, (f, b), c in zip(shards, compute, comm, strict=True)]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="torchrun worker of the comm measurement")
    parser.add_argument("request")
    parser.add_argument("result")
    _args = parser.parse_args()
    _comm_worker(_args.request, _args.result)
