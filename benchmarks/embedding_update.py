"""The CPU tables' row-wise Adagrad, compiled and in torch's ops, against fbgemm's fused backward (issue 25).

Two measurements on the ``scale`` workload's schema (26 tables at Criteo Kaggle's cardinalities
capped at 10^6, 16 columns; batch 4096), each in alternating rounds so that a load that comes
and goes weighs on both alike:

- the lookup alone: three TBEs with the training's own tables and optimizer (fresh copies), one
  on fbgemm's fused backward, two switched (:func:`autorec.train.cpu_lookup.switch`), one to
  each kernel (``native``: compiled, the default; ``torch``: torch's ops), forward and backward
  on the lookups a training step really made (captured from the trainer);
- the training step: per preset, three Trainers stepping on the same batches, one as
  :func:`autorec.train.distributed.shard` gives it (native), one switched to torch's ops, one
  with every table given back to fbgemm (:func:`autorec.train.cpu_lookup.restore`).

    OMP_NUM_THREADS=2 .venv/bin/python -m benchmarks.embedding_update [--presets dlrm,wukong] [--rounds 8]

Flat keys ``embedding_update_lookup_<path>_{fwd,bwd}_ms``, ``embedding_update_lookup_bwd_speedup``
(fbgemm over torch's ops), ``embedding_update_lookup_bwd_native_speedup`` (torch's ops over
native), ``embedding_update_<preset>_<path>_step_ms``, ``embedding_update_<preset>_speedup``
(fbgemm's step time over torch's ops', median of the paired rounds) and
``embedding_update_<preset>_native_speedup`` (torch's ops' over native's), merged into
``benchmarks/results/throughput.json``.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

import torch
from fbgemm_gpu.split_table_batched_embeddings_ops_training import SplitTableBatchedEmbeddingBagsCodegen

from autorec.presets import preset
from autorec.train import cpu_lookup
from autorec.train.trainer import TrainConfig, Trainer
from benchmarks.results_file import merge_results
from benchmarks.step_ab import ab_parser, alternating_rounds, paired_speedup, scale_data

PATHS = ("native", "torch", "fbgemm")


def trainer(name: str, data: Any, batch_size: int, path: str) -> Trainer:
    """``name``'s Trainer with its fused tables on ``path``."""
    out = Trainer(preset(name, data.schema), data, TrainConfig(batch_size=batch_size, progress=False))
    tables = cpu_lookup.fused_tables(out.model)
    for tbe in tables:
        if path == "fbgemm":
            cpu_lookup.restore(tbe)
        else:
            assert cpu_lookup.switch(tbe, path)
            assert path == "torch" or cpu_lookup.native_ready(tbe), "the native kernel is unavailable"
    assert tables and all(("forward" in t.__dict__) == (path != "fbgemm") for t in tables)
    return out


def captured_lookups(run: Trainer, batches: list[Any]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The (indices, offsets) the trainer's (first) fused TBE received on ``batches``."""
    tbe = cpu_lookup.fused_tables(run.model)[0]
    seen: list[tuple[torch.Tensor, torch.Tensor]] = []

    def hook(_module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        indices = kwargs.get("indices", args[0] if args else None)
        offsets = kwargs.get("offsets", args[1] if len(args) > 1 else None)
        seen.append((indices.long().clone(), offsets.long().clone()))

    handle = tbe.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        for batch in batches:
            run.train_step(batch)
    finally:
        handle.remove()
    return seen


Lookups = list[tuple[torch.Tensor, torch.Tensor]]


def lookup_rounds(source: cpu_lookup.TBE, lookups: Lookups, rounds: int) -> dict[str, float]:
    """Forward and backward of fresh copies of ``source``'s tables, each path, alternating rounds."""
    tbes = {}
    for path in PATHS:
        tbe = SplitTableBatchedEmbeddingBagsCodegen(
            [(rows, dim, loc, dev) for rows, dim, loc, dev in source.embedding_specs],
            feature_table_map=source.feature_table_map, optimizer=source.optimizer,
            learning_rate=source.get_learning_rate(), eps=source.optimizer_args.eps,
            pooling_mode=source.pooling_mode)
        with torch.no_grad():
            tbe.weights_host.copy_(source.weights_host)
        if path != "fbgemm":
            assert cpu_lookup.switch(tbe, path)
        tbes[path] = tbe
    gen = torch.Generator().manual_seed(0)
    upstream = torch.randn(lookups[0][1].numel() // (source.D_offsets.numel() - 1), source.total_D,
                           generator=gen) * 1e-3
    fwd: dict[str, list[float]] = {p: [] for p in PATHS}
    bwd: dict[str, list[float]] = {p: [] for p in PATHS}
    for r in range(rounds):
        for path in PATHS if r % 2 == 0 else PATHS[::-1]:
            f, b = [], []
            for indices, offsets in lookups:
                start = time.perf_counter()
                out = tbes[path](indices, offsets)
                mid = time.perf_counter()
                out.backward(upstream[: out.shape[0]])
                f.append(mid - start)
                b.append(time.perf_counter() - mid)
            fwd[path].append(statistics.median(f))
            bwd[path].append(statistics.median(b))
    out = {}
    for path in PATHS:
        out[f"embedding_update_lookup_{path}_fwd_ms"] = 1e3 * statistics.median(fwd[path])
        out[f"embedding_update_lookup_{path}_bwd_ms"] = 1e3 * statistics.median(bwd[path])
    out["embedding_update_lookup_bwd_speedup"] = (out["embedding_update_lookup_fbgemm_bwd_ms"]
                                                  / out["embedding_update_lookup_torch_bwd_ms"])
    out["embedding_update_lookup_bwd_native_speedup"] = (out["embedding_update_lookup_torch_bwd_ms"]
                                                         / out["embedding_update_lookup_native_bwd_ms"])
    out["embedding_update_lookup_rows"] = sum(rows for rows, *_ in source.embedding_specs)
    return out


def step_rounds(name: str, data: Any, batch_size: int, rounds: int, steps: int) -> dict[str, float]:
    times = alternating_rounds({path: trainer(name, data, batch_size, path) for path in PATHS}, rounds, steps)
    out = {f"embedding_update_{name}_{path}_step_ms": 1e3 * statistics.median(t) for path, t in times.items()}
    out[f"embedding_update_{name}_speedup"] = paired_speedup(times["fbgemm"], times["torch"])
    ratios = [t / n for t, n in zip(times["torch"], times["native"], strict=True)]
    out[f"embedding_update_{name}_native_speedup"] = statistics.median(ratios)
    out[f"embedding_update_{name}_native_speedup_min"] = min(ratios)
    out[f"embedding_update_{name}_native_speedup_max"] = max(ratios)
    return out


def main() -> None:
    parser = ab_parser(__doc__)
    parser.set_defaults(presets="dlrm,dcnv2,wukong,dhen")
    args = parser.parse_args()
    data = scale_data(args)
    figures: dict[str, Any] = {"embedding_update_threads": torch.get_num_threads(),
                               "embedding_update_rounds": args.rounds}
    probe = trainer("dlrm", data, args.batch_size, "fbgemm")
    batches = list(probe._batches("train", args.batch_size, True, 0))[: args.steps]
    lookups = captured_lookups(probe, batches)
    got = lookup_rounds(cpu_lookup.fused_tables(probe.model)[0], lookups, args.rounds)
    figures.update(got)
    del probe
    print(f"lookup of {got['embedding_update_lookup_rows']:,} rows, batch {args.batch_size}: "
          + "; ".join(f"{p} fwd {got[f'embedding_update_lookup_{p}_fwd_ms']:.2f} ms, "
                      f"bwd + update {got[f'embedding_update_lookup_{p}_bwd_ms']:.2f} ms" for p in PATHS)
          + f"; backward speedup fbgemm/torch {got['embedding_update_lookup_bwd_speedup']:.2f}x, "
          f"torch/native {got['embedding_update_lookup_bwd_native_speedup']:.2f}x")
    print("| preset | native ms/step | torch ms/step | fbgemm ms/step | fbgemm/torch | torch/native |")
    print("|---|---|---|---|---|---|")
    for name in args.presets.split(","):
        got = step_rounds(name, data, args.batch_size, args.rounds, args.steps)
        figures.update(got)
        key = f"embedding_update_{name}"
        steps = " | ".join(f"{got[f'{key}_{p}_step_ms']:.1f}" for p in PATHS)
        print(f"| {name} | {steps} | {got[f'{key}_speedup']:.3f} | {got[f'{key}_native_speedup']:.3f} "
              f"({got[f'{key}_native_speedup_min']:.3f}-{got[f'{key}_native_speedup_max']:.3f}) |",
              flush=True)
    merge_results(Path(args.json), figures, prefix="embedding_update")


if __name__ == "__main__":
    main()
