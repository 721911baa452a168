"""int8 embedding tables for inference, through torchrec's quantized EmbeddingBagCollection.

Tables train in fp32 or fp16 only: fbgemm's fused embedding kernel takes no int8 weights (see
:data:`autorec.arch.INT8_TABLES`). A trained model's tables are quantised afterwards, row by row
with a per-row scale and bias (fbgemm's fused 8-bit row-wise format: each row of D values takes
D bytes plus its scale and bias, padded), and served by torchrec's quantized collection, which
runs on CPU. The dense parts are untouched.

Example:
    >>> from autorec.data import Schema, SparseFeature
    >>> from autorec.models import build_model
    >>> from autorec.presets import preset
    >>> spec = preset("dlrm", Schema(dense=("a",), sparse=(SparseFeature("user", 50),)), dim=16)
    >>> served = quantize_tables(build_model(spec))
    >>> served.sparse_arch.state_dict()["embedding_bags.t_user.weight"].dtype
    torch.uint8
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

import torch
from torchrec.inference.modules import quantize_embeddings
from torchrec.modules.embedding_modules import EmbeddingBagCollection

if TYPE_CHECKING:  # models build on precision's layers: a runtime import would be a circle
    from autorec.models import RecModel

# Inference table formats: the name -> the weight dtype torchrec's quantizer takes.
INFERENCE_TABLE_PRECISIONS = {"int8": torch.qint8}


def quantize_tables(model: RecModel, precision: str = "int8") -> RecModel:
    """A copy of ``model`` for inference with its embedding tables in ``precision``.

    Args:
        model: an unsharded RecModel with fp32 or fp16 tables (after training under
            DistributedModelParallel: ``autorec.export.plain_model(trainer.model, spec)``, or
            ``autorec.export.load_model(out_dir)``).
        precision: one of :data:`INFERENCE_TABLE_PRECISIONS`.
    """
    if precision not in INFERENCE_TABLE_PRECISIONS:
        raise ValueError(f"precision: expected one of {', '.join(INFERENCE_TABLE_PRECISIONS)}, "
                         f"got {precision!r}")
    if not isinstance(getattr(model, "sparse_arch", None), EmbeddingBagCollection):
        raise TypeError(f"expected an unsharded RecModel (its sparse_arch a torchrec "
                        f"EmbeddingBagCollection), got {type(model).__name__}; a sharded model "
                        f"becomes one through autorec.export.plain_model(model, spec)")
    served = copy.deepcopy(model).eval()
    quantize_embeddings(served, dtype=INFERENCE_TABLE_PRECISIONS[precision], inplace=True)
    return served


def table_bytes(model: RecModel) -> int:
    """Bytes the embedding tables of ``model`` (unsharded, float or quantised) take."""
    return sum(t.numel() * t.element_size() for t in model.sparse_arch.state_dict().values())
