"""Issue 25: where one training step's time goes, per preset, on the scale workload's shapes.

Each preset (dlrm, dcnv2, wukong, dhen) is built for the ``scale`` preset's schema (13 dense
features, 26 tables at Criteo Kaggle's cardinalities capped at 10^6) and trained by the Trainer's
own ``train_step`` (DistributedModelParallel, fused row-wise Adagrad in backward, Adam), batch
4096. Hooks on the model's parts and the optimizer time every step's pieces:

- ``data``: drawing the next batch (the in-memory gather and the KJT);
- ``embedding_fwd`` (the sharded lookup, waited for), ``dense_arch_fwd``, ``interaction_fwd`` (the
  interaction layers), ``over_arch_fwd``, ``forward_other`` (projections, stacking, the loss);
- ``loss_bwd`` (to the logits' gradient), ``over_arch_bwd``, ``interaction_bwd``,
  ``embedding_bwd`` (the rest of the backward: the lookup's backward with the fused row-wise
  Adagrad update inside it, the dense arch's backward and DDP's all-reduce);
- ``dense_optimizer`` (Adam's step and zero_grad);
- ``other``: the step minus its timed pieces (Python between them).

The step is also timed without hooks (``step_ms``), beside the roofline floor of the same step
(``benchmarks/roofline.py``, rates measured in this run) and torch.profiler's five costliest
operators, and the page faults and kernel time per step over the timed steps (``getrusage``).
Results: a table on stdout and flat keys ``<preset>_<piece>_ms``, ``<preset>_step_ms``,
``<preset>_floor_ms``, ``<preset>_floor_share``, ``<preset>_faults_per_step``,
``<preset>_sys_ms_per_step`` and ``<preset>_commit`` (the commit this preset's figures were
measured at: a run of some presets keeps the others' figures) merged into
``benchmarks/results/throughput.json``.

    OMP_NUM_THREADS=2 .venv/bin/python -m benchmarks.step_profile [--presets dlrm,wukong] [--steps 10]
    OMP_NUM_THREADS=2 .venv/bin/python -m benchmarks.step_profile --compile   # + the compiled step
    OMP_NUM_THREADS=2 .venv/bin/python -m benchmarks.step_profile --autocast bf16
    OMP_NUM_THREADS=2 .venv/bin/python -m benchmarks.step_profile --dim 64   # keys <preset>_dim64_*
    OMP_NUM_THREADS=2 .venv/bin/python -m benchmarks.step_profile --fp32-matmul bf16   # <preset>_bf16mm_*

With ``--autocast bf16`` every preset trains with ``train.autocast: bf16`` and its keys are
``<preset>_bf16_*``: ``<preset>_bf16_floor_share`` against the same fp32 floor (the issue's
definition, so it can pass 1), and ``<preset>_bf16_floor_share_at_bf16_rate`` against the
floor at the bf16 matrix-product rate measured in the same run; the same with ``--fp32-matmul
bf16`` (``train.fp32_matmul: bf16``, keys ``<preset>_bf16mm_*``).
"""

from __future__ import annotations

import argparse
import logging
import resource
import statistics
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

from autorec.data import load_dataset
from autorec.presets import preset
from autorec.train.autocast import AUTOCAST, FP32_MATMUL
from autorec.train.compiled import DENSE_PARTS, compile_dense
from autorec.train.trainer import TrainConfig, Trainer
from autorec.train.waiting import Waited
from benchmarks.results_file import RESULTS, commit, merge_results
from benchmarks.roofline import Rates, measure_rates, pooling_factors, step_floor

PRESETS = ("dlrm", "dcnv2", "wukong", "dhen")
PARTS = ("sparse_arch", *DENSE_PARTS)  # RecModel's submodules, in forward order
PIECES = ("data", "embedding_fwd", "dense_arch_fwd", "interaction_fwd", "over_arch_fwd", "forward_other",
          "loss_bwd", "over_arch_bwd", "interaction_bwd", "embedding_bwd", "dense_optimizer", "other")


class StepClock:
    """Time marks of one step, set by hooks on ``net``'s parts and on ``optimizer``."""

    def __init__(self, net: torch.nn.Module, optimizer: Any) -> None:
        self.marks: dict[str, float] = {}
        self.handles: list[Any] = []
        for name in PARTS:
            module = getattr(net, name, None)
            if module is not None:
                self.handles.append(module.register_forward_pre_hook(self._before(name)))
                self.handles.append(module.register_forward_hook(self._after(name)))
        self.optimizer = optimizer
        self._step, self._zero = optimizer.step, optimizer.zero_grad
        optimizer.step = self._timed(self._step, "opt_step")
        optimizer.zero_grad = self._timed(self._zero, "zero_grad")

    def mark(self, key: str) -> None:
        self.marks.setdefault(key, time.perf_counter())  # the first time it happens

    def _timed(self, fn: Callable[..., Any], key: str) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            self.mark(f"{key}.start")
            out = fn(*args, **kwargs)
            self.mark(f"{key}.end")
            return out
        return run

    def _on_grad(self, key: str, tensor: Any) -> None:
        if isinstance(tensor, torch.Tensor) and tensor.requires_grad:
            tensor.register_hook(lambda grad: self.mark(key))

    def _before(self, name: str) -> Callable[..., None]:
        def hook(module: torch.nn.Module, args: tuple[Any, ...]) -> None:
            self.mark(f"{name}.fwd0")
            for arg in args:
                self._on_grad(f"{name}.grad_in", arg)
        return hook

    def _after(self, name: str) -> Callable[..., None]:
        def hook(module: torch.nn.Module, args: tuple[Any, ...], out: Any) -> None:
            if name == "sparse_arch":  # a sharded module answers lazily: wait for the lookup here
                out = out.values() if hasattr(out, "values") else out
            self.mark(f"{name}.fwd1")
            self._on_grad(f"{name}.grad_out", out)
        return hook

    def pieces(self, step_start: float, step_end: float, data_s: float) -> dict[str, float]:
        """Seconds of each piece of the step whose marks were just set (see the module docstring)."""
        m = self.marks

        def span(a: str, b: str) -> float:
            return max(m[b] - m[a], 0.0) if a in m and b in m else 0.0

        out = {"data": data_s, "embedding_fwd": span("sparse_arch.fwd0", "sparse_arch.fwd1"),
               "dense_arch_fwd": span("dense_arch.fwd0", "dense_arch.fwd1"),
               "interaction_fwd": span("layers.fwd0", "layers.fwd1"),
               "over_arch_fwd": span("over_arch.fwd0", "over_arch.fwd1")}
        forward = max(m["zero_grad.start"] - step_start, 0.0)
        out["forward_other"] = max(forward - sum(out[k] for k in list(out)[1:]), 0.0)
        backward_end = m["opt_step.start"]
        out["loss_bwd"] = span("zero_grad.end", "over_arch.grad_out")
        out["over_arch_bwd"] = span("over_arch.grad_out", "over_arch.grad_in")
        out["interaction_bwd"] = span("over_arch.grad_in", "layers.grad_in")
        last = "layers.grad_in" if "layers.grad_in" in m else "over_arch.grad_in"
        out["embedding_bwd"] = max(backward_end - m[last], 0.0)
        out["dense_optimizer"] = (span("zero_grad.start", "zero_grad.end")
                                  + span("opt_step.start", "opt_step.end"))
        timed = sum(v for k, v in out.items() if k != "data")
        out["other"] = max(step_end - step_start - timed, 0.0)
        return out

    def close(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.optimizer.step, self.optimizer.zero_grad = self._step, self._zero


def _draw(batches: Waited[Any]) -> tuple[Any, float]:
    """The next batch and the seconds its ``next()`` took (what training counts as data wait)."""
    before = batches.seconds
    batch = next(batches)
    return batch, batches.seconds - before


def figure_key(name: str, autocast: str = "off", dim: int | None = None, fp32_matmul: str = "ieee") -> str:
    """The prefix of a preset's figures: ``<name>[_dim<D>][_<autocast>][_<fp32_matmul>mm]``.

    Example:
        >>> figure_key("dlrm"), figure_key("dlrm", "bf16", 64), figure_key("dlrm", fp32_matmul="bf16")
        ('dlrm', 'dlrm_dim64_bf16', 'dlrm_bf16mm')
    """
    return (name + ("" if dim is None else f"_dim{dim}") + ("" if autocast == "off" else f"_{autocast}")
            + ("" if fp32_matmul == "ieee" else f"_{fp32_matmul}mm"))


def profile_preset(name: str, data: Any, batch_size: int, steps: int, warmup: int,
                   rates: Rates, compiled: bool = False, autocast: str = "off",
                   keep_freed_memory: bool = True, dim: int | None = None,
                   fp32_matmul: str = "ieee") -> dict[str, Any]:
    """Median milliseconds per piece of ``name``'s step, its plain step, floor and top operators;
    with ``compiled``, then the same trainer's step with its dense parts compiled
    (:func:`autorec.train.compiled.compile_dense`; after ``warmup``
    steps that compile it): ``<name>_compiled_step_ms``, ``<name>_compile_speedup`` (the eager
    step's median over the compiled one's) and ``<name>_compile_s`` (the compiling steps' seconds)."""
    key = figure_key(name, autocast, dim, fp32_matmul)  # the figures' prefix
    spec = preset(name, data.schema, **({} if dim is None else {"dim": dim}))
    trainer = Trainer(spec, data, TrainConfig(batch_size=batch_size, progress=False, autocast=autocast,
                                              keep_freed_memory=keep_freed_memory, fp32_matmul=fp32_matmul))
    batches = Waited(iter(trainer._batches("train", batch_size, True, 0)))
    seen = []
    for _ in range(warmup):
        batch, _ = _draw(batches)
        trainer.train_step(batch)
        seen.append(batch)
    plain = []
    kernel_before = resource.getrusage(resource.RUSAGE_SELF)
    for _ in range(steps):  # the step as training runs it: no hooks
        batch, _ = _draw(batches)
        start = time.perf_counter()
        trainer.train_step(batch)
        plain.append(time.perf_counter() - start)
        seen.append(batch)
    kernel_after = resource.getrusage(resource.RUSAGE_SELF)
    clock = StepClock(trainer.model.module, trainer.optimizer)
    rows: list[dict[str, float]] = []
    try:
        for _ in range(steps):
            clock.marks.clear()
            batch, data_s = _draw(batches)
            start = time.perf_counter()
            trainer.train_step(batch)
            rows.append(clock.pieces(start, time.perf_counter(), data_s))
    finally:
        clock.close()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            batch, _ = _draw(batches)
            trainer.train_step(batch)
    top = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)[:5]
    extra: dict[str, float] = {}
    if compiled:
        compile_dense(trainer.model.module)
        start = time.perf_counter()
        for _ in range(max(warmup, 2)):
            trainer.train_step(_draw(batches)[0])
        extra[f"{key}_compile_s"] = time.perf_counter() - start
        fast = []
        for _ in range(steps):
            batch, _ = _draw(batches)
            start = time.perf_counter()
            trainer.train_step(batch)
            fast.append(time.perf_counter() - start)
        extra[f"{key}_compiled_step_ms"] = 1e3 * statistics.median(fast)
        extra[f"{key}_compile_speedup"] = statistics.median(plain) / statistics.median(fast)
    floor = step_floor(spec, batch_size, rates, pooling_factors(seen))
    step_s = statistics.median(plain)
    out: dict[str, Any] = {f"{key}_{k}_ms": 1e3 * statistics.median(r[k] for r in rows) for k in PIECES}
    out.update({f"{key}_step_ms": 1e3 * step_s, f"{key}_samples_per_s": batch_size / step_s,
                f"{key}_floor_ms": 1e3 * floor.seconds, f"{key}_floor_share": floor.seconds / step_s,
                f"{key}_floor_bound": floor.bound, f"{key}_step_gflop": floor.flops / 1e9,
                f"{key}_step_mbytes": floor.bytes / 2**20,
                # page faults and kernel time per step, the batch's draw included (every thread's)
                f"{key}_faults_per_step": (kernel_after.ru_minflt - kernel_before.ru_minflt) / steps,
                f"{key}_sys_ms_per_step": 1e3 * (kernel_after.ru_stime - kernel_before.ru_stime) / steps,
                f"{key}_top_ops": "; ".join(f"{e.key} {e.self_cpu_time_total / 3e3:.1f} ms" for e in top)})
    out.update(extra)
    return out


def floor_figures(figures: dict[str, Any], name: str, rates: Rates) -> dict[str, Any]:
    """``name``'s floor (ms, bound) and floor share at ``rates``, from the FLOPs and bytes of its
    step that :func:`profile_preset` recorded."""
    compute_s = figures[f"{name}_step_gflop"] * 1e9 / rates.matmul_flops
    memory_s = figures[f"{name}_step_mbytes"] * 2**20 / rates.bandwidth
    floor_s = max(compute_s, memory_s)
    return {f"{name}_floor_ms": 1e3 * floor_s,
            f"{name}_floor_share": 1e3 * floor_s / figures[f"{name}_step_ms"],
            f"{name}_floor_bound": "compute" if compute_s >= memory_s else "memory"}


def best_rates(a: Rates, b: Rates) -> Rates:
    """The better of two measurements of each rate."""
    return Rates(matmul_flops=max(a.matmul_flops, b.matmul_flops), bandwidth=max(a.bandwidth, b.bandwidth))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presets", default=",".join(PRESETS))
    parser.add_argument("--batch-size", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=10, help="timed steps (each way: plain and hooked)")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--compile", action="store_true",
                        help="then time each preset's step with its dense parts under torch.compile")
    parser.add_argument("--autocast", choices=AUTOCAST, default="off",
                        help="train every preset under this autocast (keys <preset>_<autocast>_*)")
    parser.add_argument("--fp32-matmul", choices=FP32_MATMUL, default="ieee",
                        help="train every preset with this train.fp32_matmul (keys <preset>_<mode>mm_*; the "
                             "floor stays at the IEEE fp32 rate)")
    parser.add_argument("--keep-freed-memory", action=argparse.BooleanOptionalAction, default=True,
                        help="the Trainer's keep_freed_memory (glibc keeps freed buffers warm)")
    parser.add_argument("--dim", type=int, default=None,
                        help="every preset at this embedding width (keys <preset>_dim<D>_*; default: "
                             "the presets' own, 16)")
    parser.add_argument("--json", default=str(RESULTS / "throughput.json"))
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    logging.getLogger().setLevel(logging.ERROR)
    needed = (2 * args.warmup + 3 * args.steps + 5) * len(args.presets.split(",")) * args.batch_size
    data = load_dataset("synthetic", preset="scale", num_samples=needed * 10 // 8 + args.batch_size)
    rates = measure_rates()
    bf16 = args.autocast == "bf16" or args.fp32_matmul == "bf16"
    bf16_rates = measure_rates(dtype=torch.bfloat16) if bf16 else None
    print(f"matmul {rates.matmul_flops / 1e9:.1f} GFLOP/s, copy bandwidth {rates.bandwidth / 1e9:.1f} GB/s, "
          f"{torch.get_num_threads()} threads; batch {args.batch_size}, {args.steps} steps")
    names = [figure_key(n, args.autocast, args.dim, args.fp32_matmul) for n in args.presets.split(",")]
    figures: dict[str, Any] = {}
    for name in args.presets.split(","):
        # The floor is a best case, so it takes the best rates seen over the whole run, measured
        # again before every preset (this VM's matmul rate moved between 137 and 189 GFLOP/s
        # from one run to the next); the floors are set from them at the end.
        rates = best_rates(rates, measure_rates())
        if bf16_rates is not None:
            bf16_rates = best_rates(bf16_rates, measure_rates(dtype=torch.bfloat16))
        found = profile_preset(name, data, args.batch_size, args.steps, args.warmup, rates,
                               compiled=args.compile, autocast=args.autocast,
                               keep_freed_memory=args.keep_freed_memory, dim=args.dim,
                               fp32_matmul=args.fp32_matmul)
        name = figure_key(name, args.autocast, args.dim, args.fp32_matmul)
        figures.update(found)
        print(f"  {name}: {figures[f'{name}_step_ms']:.1f} ms/step, top: {figures[f'{name}_top_ops']}",
              flush=True)
    for name in names:
        figures |= floor_figures(figures, name, rates)
        figures[f"{name}_commit"] = commit()  # each preset's own: runs of some presets keep the others
        if bf16_rates is not None:
            figures[f"{name}_floor_share_at_bf16_rate"] = floor_figures(
                figures, name, bf16_rates)[f"{name}_floor_share"]
    run = figure_key("profile", args.autocast, args.dim, args.fp32_matmul)
    figures |= {f"{run}_matmul_gflops": rates.matmul_flops / 1e9,
                f"{run}_bandwidth_gbs": rates.bandwidth / 1e9,
                f"{run}_batch_size": args.batch_size, f"{run}_threads": torch.get_num_threads()}
    if bf16_rates is not None:
        figures[f"{run}_matmul_bf16_gflops"] = bf16_rates.matmul_flops / 1e9
    print(f"best rates over the run: matmul {rates.matmul_flops / 1e9:.1f} GFLOP/s"
          + (f" (bf16 {bf16_rates.matmul_flops / 1e9:.1f})" if bf16_rates else "")
          + f", copy bandwidth {rates.bandwidth / 1e9:.1f} GB/s")
    print("\n| piece (ms per step) | " + " | ".join(names) + " |\n|---|" + "---|" * len(names))
    for piece in (*PIECES, "step", "floor"):
        print(f"| {piece} | " + " | ".join(f"{figures[f'{n}_{piece}_ms']:.1f}" for n in names) + " |")
    print("| floor share | " + " | ".join(f"{figures[f'{n}_floor_share']:.2f}" for n in names) + " |")
    if args.compile:
        for label, key, form in (("compiled step", "compiled_step_ms", ".1f"),
                                 ("compile speedup", "compile_speedup", ".2f")):
            print(f"| {label} | " + " | ".join(f"{figures[f'{n}_{key}']:{form}}" for n in names) + " |")
    merge_results(Path(args.json), figures, prefix=run)


if __name__ == "__main__":
    main()
