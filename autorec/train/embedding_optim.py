"""Row-wise Adagrad on the embedding tables with one weight-decay meaning on every kernel.

A table is trained either inside fbgemm's TBE (the fused kernels) or, when the planner replicates
it (data_parallel, the "dense" kernel), by a Python row-wise Adagrad after backward. Weight decay
(``TrainConfig.embedding_weight_decay``) meant three different things across them:

- fbgemm applies a weight decay only under a ``weight_decay_mode``; torchrec passes
  ``weight_decay`` without one, so the TBE kept its default mode, NONE, and ignored it.
  :func:`fused_optimizer_kwargs` asks for L2 (``g + wd * w`` before the row-wise Adagrad step,
  on the rows the batch looked up), which fbgemm's CUDA kernels apply by its documentation (not
  run here: no GPU on the machines this was written on). Its CPU kernels apply no
  weight decay in any mode (measured: a CPU TBE's update is the same bit for bit with L2 or
  DECOUPLE as with none), so :func:`check_embedding_weight_decay` refuses the setting where a
  table is on a fused kernel on the CPU, rather than train it as if there were none.
- torchrec's Python ``RowWiseAdagrad`` adds ``wd * w`` to every row's gradient, rows the batch
  never looked up included; row-wise Adagrad then divides that by its own square root, so an
  unseen row shrinks by about the learning rate every step whatever ``wd`` is (a wd of 1e-5
  moved the 20- and 50-row tables of the order-3 teacher by up to 0.21 and 0.37 in five steps).
  :class:`RowSparseAdagrad` decays and updates only the rows that have a gradient, as fbgemm does.

Example:
    >>> table = torch.nn.Parameter(torch.ones(4, 2))
    >>> opt = RowSparseAdagrad([table], lr=0.1, weight_decay=0.5)
    >>> table.grad = torch.tensor([[1.0, 1.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]])
    >>> _ = opt.step()
    >>> table[1:].eq(1.0).all().item(), round(table[0, 0].item(), 4)  # only row 0 was looked up
    (True, 0.9)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from fbgemm_gpu.tbe.config.optimizer_config import WeightDecayMode
from torchrec.distributed.types import ShardingPlan
from torchrec.optim.keyed import KeyedOptimizerWrapper
from torchrec.optim.optimizers import in_backward_optimizer_filter
from torchrec.optim.rowwise_adagrad import RowWiseAdagrad

from autorec.train.distributed import FUSED_KERNELS, table_shardings
from autorec.train.records import TrainConfig, dense_optimizer

# The row-wise Adagrad's epsilon on every kernel: fbgemm's TBE default. torchrec's Python
# RowWiseAdagrad defaults to 1e-10, so a table's update depended on the plan: a row steps by
# lr * g / (rms(g) + eps), so for a row whose gradient is near 1e-8 or below the two differ up to 100x.
EPS = 1e-8


def fused_optimizer_kwargs(lr: float, weight_decay: float) -> dict[str, Any]:
    """The in-backward row-wise Adagrad's arguments for fbgemm's TBE: ``weight_decay`` as L2,
    ``eps`` as every kernel's (:data:`EPS`).

    Example:
        >>> fused_optimizer_kwargs(0.2, 0.0)
        {'lr': 0.2, 'weight_decay': 0.0, 'eps': 1e-08}
        >>> fused_optimizer_kwargs(0.2, 1e-5)["weight_decay_mode"].name
        'L2'
    """
    kwargs: dict[str, Any] = {"lr": lr, "weight_decay": weight_decay, "eps": EPS}
    if weight_decay > 0:  # (torchrec's RowWiseAdagrad takes and ignores it; the TBE reads it)
        kwargs["weight_decay_mode"] = WeightDecayMode.L2
    return kwargs


def fused_tables(plan: ShardingPlan) -> list[str]:
    """The tables ``plan`` puts on one of fbgemm's fused kernels, sorted."""
    return sorted(name for name, ps in table_shardings(plan).items() if ps.compute_kernel in FUSED_KERNELS)


def check_embedding_weight_decay(weight_decay: float, plan: ShardingPlan, device: torch.device) -> None:
    """Refuse a weight decay that fbgemm's CPU kernels would silently not apply (module docstring)."""
    if weight_decay <= 0 or device.type != "cpu":
        return
    tables = fused_tables(plan)
    if tables:
        shown = ", ".join(tables[:6]) + (f" and {len(tables) - 6} more" if len(tables) > 6 else "")
        raise ValueError(
            f"embedding_weight_decay={weight_decay:g}: fbgemm's CPU kernels apply no weight decay, and "
            f"the plan trains {len(tables)} table(s) on them ({shown}); set embedding_weight_decay "
            "to 0 on the CPU, or train on a GPU, where it is applied as L2 on the rows each batch "
            "looks up")


def fusable_alone(weight_decay: float, device: torch.device) -> bool:
    """Whether a one-process training may put every table on fbgemm's fused kernels
    (:func:`autorec.train.distributed.planner_constraints`): not on the CPU with a weight decay,
    which those kernels do not apply there; the planner's replicated tables do."""
    return weight_decay <= 0 or device.type != "cpu"


class RowSparseAdagrad(RowWiseAdagrad):
    """torchrec's row-wise Adagrad, but a row without gradient this step is left alone: no
    weight decay, no accumulator change (fbgemm's semantics; see the module docstring). With
    ``weight_decay`` 0 it equals ``RowWiseAdagrad`` (a zero-gradient row does not move there
    either). Tables are [rows, dim]; the accumulator is one value per row, [rows, 1]. Its ``eps``
    defaults to fbgemm's (:data:`EPS`), not torchrec's 1e-10."""

    def __init__(self, params: Any, lr: float = 1e-2, eps: float = EPS, **options: Any) -> None:
        super().__init__(params, lr=lr, eps=eps, **options)

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:  # type: ignore[override]
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    self._update(p, p.grad, group)
        return loss

    def _update(self, p: torch.Tensor, grad: torch.Tensor, group: dict[str, Any]) -> None:
        if grad.is_sparse:
            raise RuntimeError("RowSparseAdagrad: expected a dense [rows, dim] gradient, got a sparse one")
        state = self.state[p]
        state["step"] += 1
        lr = group["lr"] / (1 + (state["step"].item() - 1) * group["lr_decay"])
        grad = -grad if group["maximize"] else grad
        rows = grad.ne(0).any(dim=1).nonzero().squeeze(1)  # the rows this batch looked up
        if rows.numel() == 0:
            return
        g = grad.index_select(0, rows)
        if group["weight_decay"]:
            g = g.add(p.index_select(0, rows), alpha=group["weight_decay"])
        total = state["sum"].index_select(0, rows) + g.pow(2).mean(dim=1, keepdim=True)
        state["sum"].index_copy_(0, rows, total)
        p.index_add_(0, rows, g / total.sqrt().add_(group["eps"]), alpha=-lr)


def unfused_optimizers(model: torch.nn.Module, cfg: TrainConfig) -> list[KeyedOptimizerWrapper]:
    """The optimizers a Trainer steps after backward: ``dense_optimizer`` on the dense parts, and
    row-wise Adagrad (``embedding_lr``, as the fused kernels apply) on the tables the planner
    replicated (data_parallel), left as plain parameters by torchrec; without it they would fall
    to the dense optimizer and ``embedding_lr`` would depend on the plan."""
    dense: dict[str, torch.nn.Parameter] = {}
    tables: dict[str, torch.nn.Parameter] = {}
    for name, param in in_backward_optimizer_filter(model.named_parameters()):
        (tables if name.startswith("sparse_arch.") else dense)[name] = param
    unfused = [KeyedOptimizerWrapper(dense, lambda params: dense_optimizer(
        cfg.dense_optimizer, params, lr=cfg.dense_lr, weight_decay=cfg.dense_weight_decay))]
    if tables:
        unfused.append(KeyedOptimizerWrapper(tables, lambda params: RowSparseAdagrad(
            params, lr=cfg.embedding_lr, weight_decay=cfg.embedding_weight_decay)))
    return unfused
