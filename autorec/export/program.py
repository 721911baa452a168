"""The exported program: a RecModel taking plain tensors, traced by ``torch.export``.

The program's signature is ``(dense [B, n_dense] float32, values [N] int64, lengths [F, B]
int64) -> logits [B]``, with B and N dynamic; :func:`program_inputs` converts a batch's
(dense, KeyedJaggedTensor) pair into those tensors.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.export import Dim, ExportedProgram
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from autorec.arch import ArchSpec
from autorec.models import RecModel


class TensorInputs(nn.Module):
    """A RecModel taking (dense, values, lengths) tensors instead of a KeyedJaggedTensor.

    Shapes: dense [B, n_dense], values [N], lengths [F, B] (F = ``spec.feature_names``)
    -> logits [B].

    Args:
        model: the model to wrap.
    """

    def __init__(self, model: RecModel) -> None:
        super().__init__()
        self.model = model
        self.keys = list(model.spec.feature_names)

    def forward(self, dense: torch.Tensor, values: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        sparse = KeyedJaggedTensor(keys=self.keys, values=values, lengths=lengths.flatten())
        return self.model(dense, sparse)


def program_inputs(spec: ArchSpec, dense: torch.Tensor,
                   sparse: KeyedJaggedTensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dense, values, lengths) for the exported program from a batch's dense features and
    KeyedJaggedTensor (which may hold more features than ``spec`` uses, in any order)."""
    by_name = sparse.to_dict()
    missing = [f for f in spec.feature_names if f not in by_name]
    if missing:
        raise ValueError(f"the batch lacks features {missing}; the model needs {list(spec.feature_names)}")
    values = torch.cat([by_name[f].values() for f in spec.feature_names]).long()
    lengths = torch.stack([by_name[f].lengths() for f in spec.feature_names]).long()
    return dense.float(), values, lengths


def _tracing_inputs(spec: ArchSpec, batch: int = 5) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random inputs whose sizes avoid 0 and 1, which torch.export would specialise on."""
    g = torch.Generator().manual_seed(0)
    rows = [t.num_embeddings for t in spec.tables for _ in t.features]
    lengths = torch.randint(1, 4, (len(rows), batch), generator=g)
    values = torch.cat([torch.randint(0, n, (int(k.sum()),), generator=g) for n, k in zip(rows, lengths,
                                                                                          strict=True)])
    return torch.randn(batch, spec.n_dense, generator=g), values, lengths


def export_program(model: RecModel) -> ExportedProgram:
    """``torch.export`` of ``model`` (see the module docstring for its signature)."""
    batch, nnz = Dim("batch"), Dim("nnz")
    with torch.no_grad():
        return torch.export.export(TensorInputs(model.eval()), _tracing_inputs(model.spec),
                                   dynamic_shapes=({0: batch}, {0: nnz}, {1: batch}), strict=False)
