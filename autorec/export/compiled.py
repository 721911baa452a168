"""The exported program compiled ahead of time by AOTInductor: a serving artefact.

``torch._inductor.aoti_compile_and_package`` turns the ``torch.export`` program (see
:mod:`~autorec.export.program`) into a ``.pt2`` package holding a shared library of generated
C++ (CPU) or Triton (CUDA) kernels; ``aoti_load_package`` runs it from Python with no Python in
the model's own path, and the same package loads from C++ (``AOTIModelPackageLoader``). Its
signature is the program's: ``(dense [B, n_dense] float32, values [N] int64, lengths [F, B]
int64) -> logits [B]``, B and N dynamic.

Compiling needs a C++ compiler on the machine (g++ or clang, as Inductor's CPU backend does) and
takes tens of seconds for a small model.

Example:
    >>> from autorec.export.layout import COMPILED
    >>> COMPILED
    'model.aoti.pt2'
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch
from torch.export import ExportedProgram

from autorec.export.layout import COMPILED, ExportError

Runner = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def compile_package(program: ExportedProgram, path: str | Path) -> Path:
    """AOTInductor-compile ``program`` into the package ``path`` (a ``.pt2`` file).

    A failure (no C++ compiler, an operator Inductor cannot lower) raises :class:`ExportError`
    naming the package, and no partial package is left behind."""
    path = Path(path)
    try:
        written = torch._inductor.aoti_compile_and_package(program, package_path=str(path))
    except Exception as exc:  # Inductor raises compiler, lowering and codegen errors alike
        path.unlink(missing_ok=True)
        raise ExportError(f"{path}: AOTInductor could not compile the program: "
                          f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None
    return Path(written)


def load_compiled(out_dir: str | Path) -> Runner:
    """The compiled package of an export directory, as a callable (see the module docstring)."""
    path = Path(out_dir) / COMPILED
    if not path.is_file():
        raise ExportError(f"{path}: missing; export with --compile to write it")
    try:
        return torch._inductor.aoti_load_package(str(path))
    except Exception as exc:  # a truncated or foreign package fails inside the loader
        raise ExportError(f"{path}: not a loadable AOTInductor package: "
                          f"{type(exc).__name__}: {exc}") from None
