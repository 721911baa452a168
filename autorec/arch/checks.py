"""The values an ArchSpec may hold and the checks that name the field at fault.

Every check raises :class:`ArchSpecError` with the field's path (``layers[1].rank``) and what was
expected, so a hand-edited arch.json fails on load with a message that says where to look.

Example:
    >>> check_int("layers[0].n_fm", 0, 1)
    Traceback (most recent call last):
    ...
    autorec.arch.checks.ArchSpecError: layers[0].n_fm: expected an integer >= 1, got 0
"""

from __future__ import annotations

from typing import Any

FORMAT_VERSION = 1

# Dense-layer precisions: each names a recipe of weight/activation/gradient formats
# (autorec.precision.recipes). The rowwise ones scale FP8 per row, as torch._scaled_mm takes.
PRECISIONS = ("fp32", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "mxfp8_e4m3", "mxfp8_e5m2",
              "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4_e2m1", "mxint8", "int8",
              "fp8_e4m3_rowwise", "fp8_e5m2_rowwise")
# Embedding-table precisions that train: fbgemm's fused TBE kernel takes fp32 or fp16 weights.
EMBEDDING_PRECISIONS = ("fp32", "fp16")
# Why there are no int8 training tables (the error a TableSpec with precision "int8" raises).
INT8_TABLES = ("int8 tables cannot be trained: fbgemm's fused embedding kernel (TBE), which "
               "trains torchrec's tables, takes fp32 or fp16 weights only (its int8 rows of values "
               "plus a per-row scale and bias have a forward but no backward kernel on CPU). Train "
               "the table in fp16 (half the bytes of fp32) and quantise it to int8 for inference "
               "with autorec.precision.embeddings.quantize_tables")
# torchrec's sharded embedding kernels (fbgemm's TBE) refuse a table whose width is not a multiple
# of 4 (torchrec.distributed.batched_embedding_kernel asserts it, on CPU as on GPU).
TABLE_WIDTH_MULTIPLE = 4
DHEN_MODULES = ("dot", "attention", "dcn", "linear", "conv")
DHEN_ENSEMBLES = ("concat", "sum", "weighted_sum")



class ArchSpecError(ValueError):
    """An ArchSpec (or arch.json) is invalid; the message names the field at fault."""


def fail(path: str, message: str) -> None:
    raise ArchSpecError(f"{path}: {message}")


def check_int(path: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        fail(path, f"expected an integer >= {minimum}, got {value!r}")
    if value < minimum:
        fail(path, f"expected an integer >= {minimum}, got {value}")


def check_sizes(path: str, value: Any, *, allow_empty: bool = True) -> None:
    if not isinstance(value, tuple):
        fail(path, f"expected a list of layer sizes, got {value!r}")
    if not allow_empty and not value:
        fail(path, "expected at least one layer size")
    for i, size in enumerate(value):
        check_int(f"{path}[{i}]", size, 1)


def check_choice(path: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        fail(path, f"expected one of {', '.join(choices)}, got {value!r}")


