"""Learned gates for pruning: one scalar per prunable unit, trained with an L1 penalty.

:func:`add_gates` puts a gate vector g (initialised to 1) on every space of units that has one
linear consumer: the hidden neurons of each MLP (dense arch, over-arch, mlp layers, Wukong's FM
MLP) and the rank components of low-rank cross layers. The gate scales the unit's outgoing
weights, ``W_next[:, j] * g_j`` (a ``torch.nn.utils.parametrize`` parametrization, so the
model's forward is unchanged in form), which is exact for any g: a unit whose gate reaches 0
contributes nothing. Train with ``loss + lam * gate_penalty(model)``; then
``prune(model, spec, target, method="gates")`` keeps the units of largest |g| and folds the
gates into the kept weights. Other spaces (rows, the FM rank) are pruned by magnitude.

Example:
    >>> from autorec.arch import ArchSpec, TableSpec
    >>> from autorec.models import build_model
    >>> spec = ArchSpec(dim=4, tables=(TableSpec(name="t", features=("f",), num_embeddings=10, dim=4),),
    ...                 over_arch=(8,))
    >>> model = build_model(spec)
    >>> gates = add_gates(model, spec)
    >>> sorted(gates), gates["over_arch[0]"].shape
    (['over_arch[0]'], torch.Size([8]))
    >>> float(gate_penalty(model))
    8.0
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils import parametrize

from autorec.arch import ArchSpec
from autorec.growth.layout import Units
from autorec.growth.plan import build_plan

StateDict = dict[str, torch.Tensor]


class UnitGate(nn.Module):
    """Scales the columns of a weight (its input units) by a learned gate.

    Shapes: weight [out, units] -> [out, units]; ``gate`` [units].

    Args:
        space: the name of the unit space (``over_arch[0]``, ``layers.0.rank.1``, ...).
        units: how many units.

    Example:
        >>> gate = UnitGate("h", 3)
        >>> with torch.no_grad():
        ...     _ = gate.gate.copy_(torch.tensor([1.0, 0.0, 2.0]))
        >>> gate(torch.ones(2, 3))
        tensor([[1., 0., 2.],
                [1., 0., 2.]], grad_fn=<MulBackward0>)
    """

    def __init__(self, space: str, units: int) -> None:
        super().__init__()
        self.space = space
        self.gate = nn.Parameter(torch.ones(units))

    def forward(self, weight: torch.Tensor) -> torch.Tensor:
        return weight * self.gate


def _split(key: str) -> tuple[str, str]:
    module, _, attr = key.rpartition(".")
    return module, attr


def gated_params(spec: ArchSpec) -> dict[str, str]:
    """Space name -> the parameter whose columns its gate scales (its one linear consumer)."""
    plan = build_plan(spec, spec)
    consumers: dict[str, list[str]] = {name: [] for name in plan.spaces}
    for key, axes in plan.rules.items():
        for rule in axes:
            if rule is not None and rule[0] == "in":
                for space in rule[1].spaces():
                    consumers[space].append(key if rule[1] == Units(space) else "")
    return {space: keys[0] for space, keys in consumers.items()
            if len(keys) == 1 and keys[0] and plan.rules[keys[0]][1] == ("in", Units(space))}


def add_gates(model: nn.Module, spec: ArchSpec) -> dict[str, nn.Parameter]:
    """Gate every gateable unit space of ``model`` (a model of ``spec``); returns the gates by
    space. The gates are parameters of the model, so its optimizer must be made afterwards."""
    gates: dict[str, nn.Parameter] = {}
    for space, key in gated_params(spec).items():
        module, attr = _split(key)
        owner = model.get_submodule(module)
        units = getattr(owner, attr).shape[1]
        gate = UnitGate(space, units).to(getattr(owner, attr).device)
        parametrize.register_parametrization(owner, attr, gate)
        gates[space] = gate.gate
    return gates


def gates_of(model: nn.Module) -> dict[str, nn.Parameter]:
    """The gates :func:`add_gates` put on ``model``, by space."""
    return {m.space: m.gate for m in model.modules() if isinstance(m, UnitGate)}


def gate_penalty(model: nn.Module) -> torch.Tensor:
    """L1 norm of all the gates (add ``lam * gate_penalty(model)`` to the training loss)."""
    gates = list(gates_of(model).values())
    if not gates:
        raise ValueError("gate_penalty: the model has no gates; call add_gates(model, spec) first")
    return torch.stack([g.abs().sum() for g in gates]).sum()


def gated_state(model: nn.Module) -> tuple[StateDict, dict[str, torch.Tensor]]:
    """(state_dict with each gate folded into its weight, the gate values by space)."""
    scores = {space: g.detach().clone() for space, g in gates_of(model).items()}
    if not scores:
        raise ValueError("prune(method='gates'): the model has no gates; call "
                         "autorec.growth.gates.add_gates(model, spec) and train it first")
    state = {k: v.detach() if k.startswith("sparse_arch.") else v.detach().clone()
             for k, v in model.state_dict().items() if ".parametrizations." not in k}
    # Read each gated weight through its parametrization (weight * gate) under its plain name;
    # the model itself keeps its gates (removing them from a copy would also strip the
    # parametrized class the copy shares with the model).
    for name, module in model.named_modules():
        if parametrize.is_parametrized(module):
            for attr in module.parametrizations:
                state[f"{name}.{attr}" if name else attr] = getattr(module, attr).detach().clone()
    return state, scores
