"""Learned gates for pruning: one scalar per prunable unit, trained with an L1 penalty.

:func:`add_gates` puts a gate vector g (initialised to 1) on every space of units whose
consumers all read it linearly through a weight (:func:`gated_consumers`): the hidden neurons
of every MLP (dense arch, over-arch, mlp layers, Wukong's FM MLP), the rank components of
low-rank cross layers, and the rows of Wukong and DHEN layers that feed the over-arch or a
DHEN layer without attention. The gate scales the weights reading each unit,
``W_next[:, j] * g_j`` (``torch.nn.utils.parametrize`` parametrizations sharing one gate
vector; a pairwise dot of units i and j is scaled by g_i g_j), which is the same as scaling
the unit's output by g: a unit whose gate reaches 0 contributes nothing, exactly. Train with
``loss + lam * gate_penalty(model)``; then ``prune(model, spec, target, method="gates")`` keeps
the units of largest |g| and folds the gates into the kept weights. The other spaces (read by
a LayerNorm or softmax, an identity shortcut or a cross network) are pruned by magnitude.

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
from autorec.growth.layout import Layout, Pairs, Product, Spaces
from autorec.growth.plan import build_plan

StateDict = dict[str, torch.Tensor]


class UnitGate(nn.Module):
    """Scales a weight's entries along one axis by the gates of the units they read.

    Position p of ``axis`` reads unit ``units[p]`` (-1: no gated unit, scale 1); with
    ``pairs``, position p reads the pairwise dot of units ``pairs[0][p]`` and ``pairs[1][p]``
    and is scaled by both gates (a unit scaled by g makes each of its dots g times larger).
    One gate vector may serve several weights: all the linear consumers of its units.

    Shapes: weight [..., N, ...] (N along ``axis``) -> the same; ``gate`` [units].

    Args:
        space: the name of the unit space (``over_arch[0]``, ``layers.1.n_fm``, ...).
        gate: the gate vector (shared by every weight reading the space).
        axis: the weight's axis that reads the units.
        units: [N] the unit at each position, or -1.
        pairs: ([N], [N]) units of a pairwise dot at each position, or None.

    Example:
        >>> gate = nn.Parameter(torch.tensor([1.0, 0.0, 2.0]))
        >>> UnitGate("h", gate, axis=1, units=torch.tensor([0, 1, 2, -1]))(torch.ones(2, 4))
        tensor([[1., 0., 2., 1.],
                [1., 0., 2., 1.]], grad_fn=<MulBackward0>)
    """

    def __init__(self, space: str, gate: nn.Parameter, axis: int, units: torch.Tensor,
                 pairs: tuple[torch.Tensor, torch.Tensor] | None = None) -> None:
        super().__init__()
        self.space, self.gate, self.axis = space, gate, axis
        self.register_buffer("units", units, persistent=False)
        self.register_buffer("left", pairs[0] if pairs else None, persistent=False)
        self.register_buffer("right", pairs[1] if pairs else None, persistent=False)

    def _scale(self, units: torch.Tensor) -> torch.Tensor:
        ones = torch.ones((), dtype=self.gate.dtype, device=self.gate.device)
        return torch.where(units >= 0, self.gate[units.clamp(min=0)], ones)

    def forward(self, weight: torch.Tensor) -> torch.Tensor:
        if self.left is not None:
            scale = self._scale(self.left) * self._scale(self.right)
        else:
            scale = self._scale(self.units)
        shape = [1] * weight.dim()
        shape[self.axis] = -1
        return weight * scale.view(shape)


def _split(key: str) -> tuple[str, str]:
    module, _, attr = key.rpartition(".")
    return module, attr


Consumer = tuple[str, int, Layout]


def gated_consumers(spec: ArchSpec) -> dict[str, list[Consumer]]:
    """Space name -> its consumers (parameter, axis, layout), for every space all of whose
    consumers read it linearly through a weight: so a gate of 0 takes the unit out exactly.

    Left out: spaces a LayerNorm or softmax reads (Wukong's FM rank; rows feeding a Wukong or
    attention layer), rows that pass an identity shortcut (no weight to scale) or enter a
    cross network (x0 * (W x + b) + x reads them multiplicatively as x0 and unweighted as x).
    Those are pruned by magnitude."""
    plan = build_plan(spec, spec)
    blocked = {s for name, space in plan.spaces.items() if space.stat for s in (name,)}
    for _, rows, _ in plan.identities:
        blocked.update(rows.spaces())
    consumers: dict[str, list[Consumer]] = {name: [] for name in plan.spaces}
    for key, axes in plan.rules.items():
        for axis, rule in enumerate(axes):
            if rule is None or rule[0] != "in":
                continue
            layout = rule[1]
            if ".cross." in key and isinstance(layout, Product):
                blocked.update(layout.spaces())
            for space in layout.spaces():
                consumers[space].append((key, axis, layout))
    return {name: found for name, found in consumers.items() if found and name not in blocked}


def _positions(layout: Layout, space: str, spaces: Spaces
               ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor] | None]:
    if isinstance(layout, Pairs):
        rows = layout.rows.unit_of(space, spaces)
        n = layout.rows.old_size(spaces)
        triu = torch.triu_indices(n, n, offset=0 if layout.diagonal else 1)
        return torch.full((triu.shape[1],), -1, dtype=torch.long), (rows[triu[0]], rows[triu[1]])
    return layout.unit_of(space, spaces), None


def add_gates(model: nn.Module, spec: ArchSpec) -> dict[str, nn.Parameter]:
    """Gate every gateable unit space of ``model`` (a model of ``spec``; see
    :func:`gated_consumers`); returns the gates by space. The gates are parameters of the
    model, so make its optimizer afterwards."""
    plan = build_plan(spec, spec)
    for space in plan.spaces.values():
        space.index = torch.arange(space.old)
    gates: dict[str, nn.Parameter] = {}
    for space, consumers in gated_consumers(spec).items():
        gate: nn.Parameter | None = None
        for key, axis, layout in consumers:
            module, attr = _split(key)
            owner = model.get_submodule(module)
            weight = getattr(owner, attr)
            if gate is None:
                gate = nn.Parameter(torch.ones(plan.spaces[space].old, device=weight.device))
            units, pairs = _positions(layout, space, plan.spaces)
            move = {"device": weight.device}
            parametrize.register_parametrization(
                owner, attr, UnitGate(space, gate, axis, units.to(**move),
                                      tuple(p.to(**move) for p in pairs) if pairs else None))
        assert gate is not None
        gates[space] = gate
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
