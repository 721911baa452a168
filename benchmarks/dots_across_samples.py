"""DLRM's dots kernel against an earlier commit's: 16 samples across the vector lanes (this tree)
against one sample at a time (``--against``'s ``pair_dots.cpp``, 52f5bce by default).

Both kernels are built by :func:`autorec.native.build.compile_kernel` (this tree's from its file,
the earlier one from ``git show <commit>:autorec/native/pair_dots.cpp`` beside this tree's
``simd.h``) and called through ctypes with the same arguments, as the Trainer's step calls them
at the dlrm preset's shapes on the scale workload under bf16 autocast: x [4096, 27, 16] fp32, the
dense vector passed through, the output and its gradient in bf16. Forward and backward are timed
in alternating repeats, each call after 64 MB written (the step's other work evicts x between
its forward and its backward), with 2 threads.

    OMP_NUM_THREADS=2 .venv/bin/python -m benchmarks.dots_across_samples [--against 52f5bce] [--repeats 40]

Flat keys ``dots_across_samples_{new,before}_{fwd,bwd}_ms`` (medians),
``dots_across_samples_{fwd,bwd}_speedup`` (before over new), ``dots_across_samples_before_commit``
and ``dots_across_samples_commit``, merged into ``benchmarks/results/throughput.json``.
"""

from __future__ import annotations

import argparse
import ctypes
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from autorec.native import build
from benchmarks.results_file import RESULTS, commit, merge_results

SHAPES = (4096, 27, 16)  # B, F, D of the dlrm preset on the scale workload


def kernels(library: Path) -> tuple[Any, Any]:
    """The forward and backward entry points of a built ``pair_dots`` library."""
    lib = ctypes.CDLL(str(library))
    forward, backward = lib.autorec_pair_dots_forward, lib.autorec_pair_dots_backward
    forward.argtypes, forward.restype = build.PAIR_DOTS_FORWARD_ARGS, ctypes.c_int64
    backward.argtypes, backward.restype = build.PAIR_DOTS_BACKWARD_ARGS, ctypes.c_int64
    return forward, backward


def earlier_library(revision: str, root: Path) -> Path:
    """``pair_dots.cpp`` at ``revision`` built beside this tree's headers, in ``root``."""
    shown = subprocess.run(["git", "show", f"{revision}:autorec/native/pair_dots.cpp"], capture_output=True,
                           text=True, check=False, cwd=build.HERE)
    if shown.returncode != 0:
        raise ValueError(f"--against {revision!r}: git has no autorec/native/pair_dots.cpp there "
                         f"({shown.stderr.strip()})")
    source = shown.stdout
    folder = root / "src"
    folder.mkdir()
    for header in build.HERE.glob("*.h"):
        shutil.copy(header, folder / header.name)
    (folder / "pair_dots.cpp").write_text(source)
    return build.compile_kernel(folder / "pair_dots.cpp", root=root / "built")


def timed(ways: dict[str, tuple[Any, Any]], repeats: int) -> dict[str, dict[str, list[float]]]:
    """Seconds of each way's forward and backward, alternating, after 64 MB written before each."""
    b, f, d = SHAPES
    x = torch.randn(b, f, d)
    first, second = (t.contiguous() for t in torch.triu_indices(f, f, offset=1))
    p = first.numel()
    pad = -(d + p) % d
    out = torch.empty(b, d + p + pad, dtype=torch.bfloat16)
    grad = torch.randn(b, d + p + pad).to(torch.bfloat16)
    dx = torch.empty_like(x)
    evict = torch.zeros(16 * 2**20)
    threads = torch.get_num_threads()
    times: dict[str, dict[str, list[float]]] = {way: {"fwd": [], "bwd": []} for way in ways}
    outputs = {}
    for repeat in range(repeats + 3):
        for way, (forward, backward) in ways.items():
            evict.add_(1.0)
            start = time.perf_counter()
            assert forward(x.data_ptr(), b, f, d, first.data_ptr(), second.data_ptr(), p, 1, pad,
                           out.data_ptr(), 1, threads) == 0
            mid = time.perf_counter()
            evict.add_(1.0)
            begin = time.perf_counter()
            assert backward(grad.data_ptr(), 1, grad.stride(0), x.data_ptr(), b, f, d, first.data_ptr(),
                            second.data_ptr(), p, 1, dx.data_ptr(), threads) == 0
            end = time.perf_counter()
            if repeat >= 3:
                times[way]["fwd"].append(mid - start)
                times[way]["bwd"].append(end - begin)
            outputs[way] = (out.clone(), dx.clone())
    (new_out, new_dx), (old_out, old_dx) = outputs["new"], outputs["before"]
    torch.testing.assert_close(new_out, old_out, rtol=0, atol=0)  # the same dots, bit for bit
    torch.testing.assert_close(new_dx, old_dx, rtol=1e-5, atol=1e-5)  # the sums go in another order
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", default="52f5bce", help="the earlier commit whose kernel is timed")
    parser.add_argument("--repeats", type=int, default=40)
    parser.add_argument("--json", type=Path, default=RESULTS / "throughput.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        ways = {"new": kernels(build.compile_kernel(build.HERE / "pair_dots.cpp")),
                "before": kernels(earlier_library(args.against, Path(root)))}
        times = timed(ways, args.repeats)
    figures: dict[str, Any] = {}
    for way, pieces in times.items():
        for piece, seconds in pieces.items():
            figures[f"dots_across_samples_{way}_{piece}_ms"] = 1e3 * statistics.median(seconds)
    for piece in ("fwd", "bwd"):
        figures[f"dots_across_samples_{piece}_speedup"] = (figures[f"dots_across_samples_before_{piece}_ms"]
                                                           / figures[f"dots_across_samples_new_{piece}_ms"])
    figures["dots_across_samples_before_commit"] = args.against
    figures["dots_across_samples_commit"] = commit()
    for key, value in figures.items():
        print(f"{key:40s} {value if isinstance(value, str) else round(value, 3)}")
    merge_results(args.json, figures)


if __name__ == "__main__":
    main()
