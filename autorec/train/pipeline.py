"""torchrec's TrainPipelineSparseDist driving the Trainer's model, unchanged.

The pipeline overlaps batch i + 1's input distribution (the KJT all-to-all) and batch i + 2's
host-to-device copy with batch i's forward and backward. It finds the sharded embedding
module's input by fx-tracing the model with the batch as input; our RecModel takes
``(dense, sparse)``, so :class:`TracedBatch` tells the tracer, through ``to_proxy_tuple``,
that the model's two arguments are the batch's ``dense_features`` and ``sparse_features``
(torch.fx ``PHWithMeta`` placeholders with those keys). The model, its state_dict and its
``model(dense, sparse)`` call stay as they are, so export and evaluation are not affected.

Example:
    >>> import torch
    >>> from torchrec.sparse.jagged_tensor import KeyedJaggedTensor
    >>> kjt = KeyedJaggedTensor(keys=["f"], values=torch.tensor([1]), lengths=torch.tensor([1]))
    >>> b = TracedBatch(dense_features=torch.zeros(1, 2), sparse_features=kjt, labels=torch.ones(1))
    >>> type(b.to(torch.device("cpu"))).__name__, [p.ph_key for p in b.to_proxy_tuple(None)]
    ('TracedBatch', ['dense_features', 'sparse_features'])
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import torch
from torch.fx._symbolic_trace import PHWithMeta
from torchrec.datasets.utils import Batch
from torchrec.distributed.train_pipeline import TrainPipelineSparseDist


@dataclass
class TracedBatch(Batch):
    """A torchrec Batch whose fx trace maps (dense, sparse) model arguments to its fields."""

    @staticmethod
    def of(batch: Batch) -> TracedBatch:
        return TracedBatch(dense_features=batch.dense_features, sparse_features=batch.sparse_features,
                           labels=batch.labels)

    def to(self, device: torch.device, non_blocking: bool = False) -> TracedBatch:
        return TracedBatch.of(super().to(device, non_blocking=non_blocking))

    def pin_memory(self) -> TracedBatch:
        return TracedBatch.of(super().pin_memory())

    def to_proxy_tuple(self, model: Any) -> tuple[PHWithMeta, PHWithMeta]:
        return PHWithMeta(ph_key="dense_features"), PHWithMeta(ph_key="sparse_features")


class SparseDistPipeline:
    """A TrainPipelineSparseDist over ``model`` whose step is ``step_loss(batch) -> (loss to
    backpropagate, output)``; :meth:`run` yields each step's output, every step (forward,
    backward, optimizer) run inside a fresh ``context()`` (the products' precision)."""

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, device: torch.device,
                 step_loss: Callable[[Batch], tuple[torch.Tensor, Any]],
                 context: Callable[[], AbstractContextManager[Any]] = contextlib.nullcontext) -> None:
        self.pipeline = TrainPipelineSparseDist(model, optimizer, device, execute_all_batches=True,
                                                custom_model_fwd=step_loss)
        self.context = context

    def run(self, batches: Iterable[Batch]) -> Iterator[Any]:
        it = (TracedBatch.of(b) for b in batches)
        while True:
            try:
                with self.context():
                    out = self.pipeline.progress(it)
            except StopIteration:
                return
            yield out

    def detach(self) -> None:
        """Give the sharded modules their own forward back (for evaluation outside the pipeline)."""
        self.pipeline.detach()
