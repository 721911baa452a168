"""``train.compile``: the dense parts of a model compiled by ``torch.compile`` (Inductor).

The dense arch, the interaction layers and the over-arch are compiled in place
(``nn.Module.compile``: the parameters, their names and so the checkpoints stay as they are); the
sharded embedding lookup stays eager, on fbgemm's kernels. Compiling costs seconds to a minute
per model on first use (and again on a new batch shape), so it pays for long trainings, not for
short trials. Measured per preset by ``python -m benchmarks.step_profile --compile``
(BENCHMARKS.md, "Where a training step goes").

Example:
    >>> from autorec.arch import ArchSpec, DotConfig, TableSpec
    >>> from autorec.models import build_model
    >>> model = build_model(ArchSpec(dim=4, n_dense=2, dense_arch=(8,), over_arch=(8,),
    ...     tables=(TableSpec(name="t", features=("f",), num_embeddings=10, dim=4),), layers=(DotConfig(),)))
    >>> compile_dense(model)
    ['dense_arch', 'layers', 'over_arch']
"""

from __future__ import annotations

from torch import nn

DENSE_PARTS = ("dense_arch", "layers", "over_arch")  # RecModel's dense submodules, in forward order


def compile_dense(model: nn.Module) -> list[str]:
    """Compile ``model``'s dense parts (a RecModel, or DMP's ``.module``) in place; the names of
    the parts compiled (a part the model lacks, such as the dense arch without dense features,
    is skipped)."""
    done = []
    for name in DENSE_PARTS:
        part = getattr(model, name, None)
        if isinstance(part, nn.Module):
            part.compile()
            done.append(name)
    return done
