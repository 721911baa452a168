"""Dense training on one CUDA GPU: bf16 MFU of Wukong, native FP8 against bf16, and the FP8
path's numbers against its CPU emulation.

Measured, each in the same run:

- the device's matrix rates: an 8192^3 product in bf16 and in FP8 E4M3 (``torch._scaled_mm``,
  row-wise scales), the practical peaks the MFU figures are read against beside the nominal
  H100 SXM peak of ``autorec.costs.throughput``;
- for two Wukong architectures on the scale workload's schema (13 dense, 26 sparse features):
  the ``wukong`` preset (D=16, two small layers) and ``wukong-large`` (D=128, four layers of
  64 FM + 64 LCB outputs, FMB MLP 2048x2048, over-arch 2048x1024; about 0.31 GFLOP per sample
  forward), one training step of the dense part (dense arch, interaction layers, over-arch,
  Adam) on fixed X0 [B, F, D] in: fp32, tf32, bf16 autocast, and the project's ``fp8_e4m3``
  / ``fp8_e4m3_rowwise`` recipes in every dense layer with bf16 autocast around them (their
  three products run natively on ``torch._scaled_mm``, compute capability >= 8.9), each eager
  and under ``torch.compile``. MFU = analytic train FLOPs (3 x forward, ``arch_cost``) x B /
  step time / peak;
- one FP8 layer (4096 x 2048 -> 2048) natively on the GPU against its emulation on the CPU
  (output, input and weight gradients), and the FP8 models' logits likewise and against fp32:
  the check that the native path computes what the emulation every CPU test runs computes;
- whether torchrec's EmbeddingBagCollection trains on the GPU here, and the full model's step
  (embedding lookup + dense part) when it does.

    python benchmarks/gpu_dense.py --json benchmarks/results/gpu.json

Needs a CUDA device; nothing here runs in the test suite (no GPU on the CI machine).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import time
import traceback
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import torch
from torch import nn

from autorec.arch import ArchSpec, WukongConfig
from autorec.costs.analytic import arch_cost
from autorec.costs.throughput import peak_flops
from autorec.data.synthetic.config import SyntheticConfig
from autorec.models import build_model
from autorec.precision.layers import QuantLinear
from autorec.precision.native import REFUSED, native_linear
from autorec.precision.recipes import with_precision
from autorec.presets import preset
from benchmarks.results_file import commit, machine

LARGE_LAYER = WukongConfig(n_fm=64, n_lcb=64, rank=32, mlp=(2048, 2048))
FP8_RECIPES = ("fp8_e4m3", "fp8_e4m3_rowwise")


def architectures() -> dict[str, ArchSpec]:
    """The two Wukong architectures, on the scale workload's schema."""
    schema = SyntheticConfig.from_options("scale").schema()
    large = preset("wukong", schema, dim=128).replace(
        name="wukong-large", layers=(LARGE_LAYER,) * 4, over_arch=(2048, 1024), dense_arch=(512,))
    return {"wukong": preset("wukong", schema), "wukong-large": large}


def dense_parts(spec: ArchSpec, device: torch.device) -> nn.ModuleList:
    """dense arch, interaction layers, over-arch of ``build_model(spec)`` on ``device`` (the
    tables stay on the meta device: the dense step never reads them)."""
    torch.manual_seed(0)
    model = build_model(spec, device=torch.device("meta"))
    return nn.ModuleList([model.dense_arch, model.layers, model.over_arch]).to(device)


def logits_of(parts: nn.ModuleList, dense: torch.Tensor, x0: torch.Tensor) -> torch.Tensor:
    """[B] logits of the dense part: X0 [B, F, D] without its dense row, dense [B, n_dense]."""
    dense_arch, layers, over_arch = parts
    x = torch.cat([dense_arch(dense).unsqueeze(1), x0], dim=1)
    return over_arch(layers(x).flatten(1)).squeeze(-1)


def train_step(parts: nn.ModuleList, inputs: tuple[torch.Tensor, ...], autocast: bool,
               compiled: bool) -> Callable[[], None]:
    """One Adam step of the dense part on fixed ``inputs`` (dense, x0, labels)."""
    dense, x0, labels = inputs
    optimizer = torch.optim.Adam(parts.parameters(), lr=1e-4, fused=True)
    forward = torch.compile(logits_of) if compiled else logits_of
    context = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if autocast else nullcontext

    def step() -> None:
        with context():
            logits = forward(parts, dense, x0)
        loss = nn.functional.binary_cross_entropy_with_logits(logits.float(), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return step


def time_step(step: Callable[[], None], warmup: int, steps: int) -> float:
    """Seconds per step: median of ``steps`` single-step CUDA-event timings after ``warmup``."""
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(steps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return sorted(times)[len(times) // 2]


def matmul_rates(device: torch.device, n: int = 8192) -> dict[str, float]:
    """TFLOP/s of an n^3 product in bf16 and in FP8 E4M3 with row-wise scales."""
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    out = {"matmul_bf16_tflops": 2 * n**3 / time_step(lambda: a @ b, 3, 10) / 1e12}
    native = native_linear(a, b, rowwise=True)  # a @ b.T through _scaled_mm, scales included
    if native is not None:
        out["matmul_fp8_rowwise_tflops"] = (
            2 * n**3 / time_step(lambda: native_linear(a, b, rowwise=True), 3, 10) / 1e12)
        out["matmul_fp8_rowwise_rel_err"] = float((native.float() - (a @ b.T).float()).norm()
                                                  / (a @ b.T).float().norm())
    return out


def fp8_agreement(spec: ArchSpec, inputs: tuple[torch.Tensor, ...], rows: int = 1024) -> dict[str, float]:
    """Relative L2 gaps of each FP8 recipe's logits: GPU native forward against CPU emulation,
    and each against fp32, on the first ``rows`` samples."""
    dense, x0 = (t[:rows] for t in inputs[:2])
    cpu = torch.device("cpu")
    out: dict[str, float] = {}
    with torch.no_grad():
        reference = logits_of(dense_parts(spec, cpu), dense.cpu(), x0.cpu())
        for name in FP8_RECIPES:
            quantised = with_precision(spec, name)
            native = logits_of(dense_parts(quantised, dense.device), dense, x0).float().cpu()
            emulated = logits_of(dense_parts(quantised, cpu), dense.cpu(), x0.cpu())
            scale = emulated.norm()
            out[f"{name}_native_vs_emulated_rel_err"] = float((native - emulated).norm() / scale)
            out[f"{name}_emulated_vs_fp32_rel_err"] = float((emulated - reference).norm()
                                                            / reference.norm())
            out[f"{name}_native_vs_fp32_rel_err"] = float((native - reference).norm() / reference.norm())
    return out


def layer_agreement(device: torch.device, rows: int = 4096, k: int = 2048, n: int = 2048) -> dict[str, float]:
    """Relative L2 gaps between one FP8 linear layer [rows, k] -> [rows, n] run natively on the
    GPU and emulated on the CPU, given the same weights, inputs and output gradient: the output,
    the input gradient and the weight gradient."""
    out: dict[str, float] = {}
    for name in FP8_RECIPES:
        torch.manual_seed(3)
        emulated = QuantLinear(k, n, precision=name)
        native = copy.deepcopy(emulated).to(device)
        x = torch.randn(rows, k)
        upstream = torch.randn(rows, n)
        x_cpu, x_gpu = x.clone().requires_grad_(), x.to(device).requires_grad_()
        y_cpu, y_gpu = emulated(x_cpu), native(x_gpu)
        y_cpu.backward(upstream)
        y_gpu.backward(upstream.to(device))
        for part, (a, b) in {"out": (y_gpu, y_cpu), "grad_x": (x_gpu.grad, x_cpu.grad),
                             "grad_w": (native.weight.grad, emulated.weight.grad)}.items():
            out[f"layer_{name}_{part}_native_vs_emulated_rel_err"] = float(
                (a.detach().cpu().float() - b).norm() / b.norm())
    return out


def full_model_step(spec: ArchSpec, device: torch.device, batch: int, rows: int = 100_000) -> dict[str, Any]:
    """samples/s of a full training step (torchrec EmbeddingBagCollection lookup + dense part,
    bf16 autocast) with every table capped at ``rows`` rows, or the error where it cannot run."""
    from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

    tables = tuple(dataclasses.replace(t, num_embeddings=min(t.num_embeddings, rows))
                   for t in spec.tables)
    small: ArchSpec = spec.replace(tables=tables)
    try:
        torch.manual_seed(0)
        model = build_model(small).to(device)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
        keys = [f for t in tables for f in t.features]
        lengths = torch.ones(len(keys) * batch, dtype=torch.int64, device=device)
        values = torch.cat([torch.randint(0, t.num_embeddings, (batch,), device=device)
                            for t in tables for _ in t.features])
        kjt = KeyedJaggedTensor.from_lengths_sync(keys, values, lengths)
        dense = torch.randn(batch, spec.n_dense, device=device)
        labels = torch.randint(0, 2, (batch,), device=device).float()

        def step() -> None:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(dense, kjt)
            loss = nn.functional.binary_cross_entropy_with_logits(logits.float(), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()

        seconds = time_step(step, 3, 10)
        return {"full_step_ms": seconds * 1e3, "full_samples_per_s": batch / seconds, "torchrec_on_gpu": 1}
    except Exception as error:  # recorded, not hidden: which part of torchrec failed on the GPU
        return {"torchrec_on_gpu": 0,
                "torchrec_on_gpu_error": "".join(traceback.format_exception_only(error)).strip()[:400]}


def measure(name: str, spec: ArchSpec, batch: int, device: torch.device, peaks: dict[str, float],
            steps: int) -> dict[str, Any]:
    """Every row of one architecture (see the module docstring), as flat figures."""
    torch.manual_seed(1)
    n_vectors = len(spec.tables)
    inputs = (torch.randn(batch, spec.n_dense, device=device),
              torch.randn(batch, n_vectors, spec.dim, device=device) * 0.1,
              torch.randint(0, 2, (batch,), device=device).float())
    cost = arch_cost(spec)
    flops_per_step = cost.train_flops * batch
    out: dict[str, Any] = {f"{name}_batch": batch, f"{name}_train_gflop_per_sample": cost.train_flops / 1e9,
                           f"{name}_dense_params_m": cost.dense_params / 1e6,
                           f"{name}_cost_model_h100_bf16_step_ms": cost.train_flops * batch
                           / peak_flops("h100", "bf16") * 1e3}
    rows: dict[str, tuple[ArchSpec, bool, bool, bool]] = {
        "fp32": (spec, False, False, False), "tf32": (spec, False, False, True),
        "bf16": (spec, True, False, False), "bf16_compiled": (spec, True, True, False)}
    for recipe_name in FP8_RECIPES:  # FP8 dense layers, bf16 autocast around them
        rows[recipe_name] = (with_precision(spec, recipe_name), True, False, False)
        rows[f"{recipe_name}_compiled"] = (with_precision(spec, recipe_name), True, True, False)
    for row, (variant, autocast, compiled, tf32) in rows.items():
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
        started = time.perf_counter()
        try:
            seconds = time_step(train_step(dense_parts(variant, device), inputs, autocast, compiled),
                                5 if compiled else 3, steps)
        except Exception as error:
            out[f"{name}_{row}_error"] = "".join(traceback.format_exception_only(error)).strip()[:400]
            print(f"{name} {row}: failed: {out[f'{name}_{row}_error']}", flush=True)
            continue
        finally:
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.cuda.empty_cache()
        rate = flops_per_step / seconds
        out.update({f"{name}_{row}_ms": seconds * 1e3, f"{name}_{row}_samples_per_s": batch / seconds,
                    f"{name}_{row}_tflops": rate / 1e12,
                    f"{name}_{row}_mfu_nominal": rate / peaks["nominal_bf16_flops"],
                    f"{name}_{row}_mfu_measured": rate / (peaks["matmul_bf16_tflops"] * 1e12)})
        print(f"{name} {row}: {seconds * 1e3:.2f} ms/step, {rate / 1e12:.1f} TFLOP/s, "
              f"MFU {rate / peaks['nominal_bf16_flops']:.3f} of nominal bf16 "
              f"({time.perf_counter() - started:.0f} s)", flush=True)
    for fp8 in FP8_RECIPES:
        for suffix in ("", "_compiled"):
            if f"{name}_{fp8}{suffix}_ms" in out and f"{name}_bf16{suffix}_ms" in out:
                out[f"{name}_{fp8}{suffix}_vs_bf16_speed"] = (out[f"{name}_bf16{suffix}_ms"]
                                                             / out[f"{name}_{fp8}{suffix}_ms"])
    out.update({f"{name}_{k}": v for k, v in fp8_agreement(spec, inputs).items()})
    out.update({f"{name}_{k}": v for k, v in full_model_step(spec, device, batch).items()})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", type=Path, help="write the figures here (flat JSON)")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per row")
    parser.add_argument("--archs", default="wukong,wukong-large")
    parser.add_argument("--batches", default="65536,16384", help="batch size per architecture")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("gpu_dense: no CUDA device here; this benchmark measures a GPU")
    device = torch.device("cuda")
    figures: dict[str, Any] = {"device": torch.cuda.get_device_name(device),
                               "capability": ".".join(map(str, torch.cuda.get_device_capability())),
                               "torch_version": torch.__version__, "machine": machine(), "commit": commit(),
                               "nominal_bf16_flops": peak_flops("h100", "bf16")}
    figures.update(matmul_rates(device))
    figures.update(layer_agreement(device))
    print(json.dumps(figures, indent=1), flush=True)
    specs = architectures()
    for name, batch in zip(args.archs.split(","), map(int, args.batches.split(",")), strict=True):
        figures.update(measure(name, specs[name], batch, device, figures, args.steps))
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(figures, indent=1, sort_keys=True) + "\n")
    figures["native_refused"] = len(REFUSED)  # operand pairings _scaled_mm refused (emulated)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1, sort_keys=True) + "\n")
    print(json.dumps(figures, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
