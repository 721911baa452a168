"""The building bricks of the supernet: named categorical choices, Gumbel-softmax weights,
weight-shared width masks and the generic mixed op.

Every architecture decision of the supernet is a :class:`Choice`: a name (the Optuna parameter
name the space uses, e.g. ``layer0.kind``, ``layer0.wukong.n_fm``, ``emb.user``), its values and
one logit per value. Each training step draws one weight vector per choice
(:meth:`ChoiceSet.sample`); modules read the weights of the choices they own by name. So a new
kind of decision (per-layer precision, the tower count) is one more Choice and one more
:class:`MixedChoice` over named candidate transforms; nothing else changes.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torchrec.modules.mlp import MLP

Weights = Mapping[str, torch.Tensor]  # choice name -> weights over its values, summing to 1


class SupernetError(ValueError):
    """The space cannot be turned into a supernet (or derive found no valid architecture)."""


@dataclass(frozen=True)
class Choice:
    """One categorical architecture decision: ``values`` in the order the space lists them."""

    name: str
    values: tuple[Any, ...]


class ChoiceSet(nn.Module):
    """The architecture parameters: one logit vector per :class:`Choice`, zero (uniform) at start.

    Args:
        choices: the decisions, names unique.

    Example:
        >>> arch = ChoiceSet([Choice("layer0.kind", ("dlrm", "wukong"))])
        >>> w = arch.sample(tau=1.0, hard=True, generator=torch.Generator().manual_seed(0))
        >>> sorted(w["layer0.kind"].tolist())
        [0.0, 1.0]
        >>> arch.probs()["layer0.kind"]
        tensor([0.5000, 0.5000])
    """

    def __init__(self, choices: Sequence[Choice]) -> None:
        super().__init__()
        names = [c.name for c in choices]
        if len(set(names)) != len(names):
            raise ValueError(f"choice names repeat: {sorted(n for n in names if names.count(n) > 1)}")
        self.choices = {c.name: c for c in choices}
        # ParameterDict keys may not hold '.', which every choice name does: index by position.
        self.logits = nn.ParameterList(nn.Parameter(torch.zeros(len(c.values))) for c in choices)
        self._index = {name: i for i, name in enumerate(names)}

    def logit(self, name: str) -> nn.Parameter:
        return self.logits[self._index[name]]

    def probs(self) -> dict[str, torch.Tensor]:
        """softmax(logits) of every choice (detached)."""
        return {name: torch.softmax(self.logit(name).detach(), dim=0) for name in self.choices}

    def sample(
        self, tau: float, hard: bool, generator: torch.Generator | None = None, uniform: bool = False
    ) -> dict[str, torch.Tensor]:
        """Gumbel-softmax weights for every choice at temperature ``tau``.

        Soft: ``softmax((logits + g) / tau)``. Hard: the one-hot argmax of that, with the soft
        weights' gradient (straight-through), so a step runs one candidate per choice yet
        every logit of the choice gets a gradient.

        ``uniform``: the same draw with zero logits in place of the learned ones (no gradient to
        them): hard sampling then picks every value of a choice with equal probability, whatever
        the logits say (single-path one-shot weight training). It uses the generator exactly as
        the default does, so a seed gives the same noise either way.

        Example:
            >>> arch = ChoiceSet([Choice("k", ("a", "b"))])
            >>> with torch.no_grad():
            ...     _ = arch.logit("k").copy_(torch.tensor([10.0, -10.0]))
            >>> g = torch.Generator().manual_seed(0)
            >>> picks = [int(arch.sample(1.0, True, g, uniform=True)["k"].argmax()) for _ in range(400)]
            >>> 150 < sum(picks) < 250  # about half "b", although its probability is ~2e-9
            True
        """
        out = {}
        for name in self.choices:
            logits = self.logit(name)
            if uniform:
                logits = torch.zeros_like(logits.detach())
            u = torch.rand(logits.shape, generator=generator).clamp_(1e-9, 1 - 1e-9)
            soft = torch.softmax((logits - torch.log(-torch.log(u))) / tau, dim=0)
            if hard:
                one_hot = F.one_hot(soft.argmax(), soft.numel()).to(soft.dtype)
                soft = one_hot - soft.detach() + soft  # exactly 0 off the argmax (-a + a == 0)
            out[name] = soft
        return out

    def expected(self) -> dict[str, torch.Tensor]:
        """The plain softmax weights (no noise), with gradient: what E[cost] uses."""
        return {name: torch.softmax(self.logit(name), dim=0) for name in self.choices}

    def argmax(self) -> dict[str, Any]:
        """The most probable value of every choice."""
        return {name: c.values[int(self.logit(name).argmax())] for name, c in self.choices.items()}

    def ranked(self, name: str) -> list[Any]:
        """The values of choice ``name``, most probable first."""
        order = torch.argsort(self.logit(name).detach(), descending=True, stable=True)
        return [self.choices[name].values[int(i)] for i in order]


def width_mask(weights: torch.Tensor, widths: Sequence[int], size: int,
               offsets: Sequence[int] | None = None) -> torch.Tensor:
    """The weight-shared mask of a width choice: ``mask[j] = sum_c w_c * [o_c <= j < o_c + widths[c]]``
    with ``o_c = offsets[c]`` (None: all 0).

    One max-size op serves every width: choosing width ``v`` keeps its first ``v`` units (or,
    with offsets, its own ``v`` units from ``o_c``). With one-hot weights the mask is exactly
    those units; soft weights give the expected mask, whose gradient reaches the logits
    (FBNetV2-style channel masking).

    Shapes: weights [C], -> [size].

    Example:
        >>> width_mask(torch.tensor([0.25, 0.75]), (1, 3), 4)
        tensor([1.0000, 0.7500, 0.7500, 0.0000])
        >>> width_mask(torch.tensor([0.25, 0.75]), (1, 3), 4, offsets=(0, 1))
        tensor([0.2500, 0.7500, 0.7500, 0.7500])
    """
    units = torch.arange(size).unsqueeze(0)
    starts = torch.tensor(list(offsets) if offsets is not None else [0] * len(widths)).unsqueeze(1)
    steps = (units >= starts) & (units < starts + torch.tensor(list(widths)).unsqueeze(1))  # [C, size]
    return weights @ steps.to(weights.dtype)


def one_hot_index(w: torch.Tensor) -> int | None:
    """The index of the single 1 in ``w`` (a one-hot weight vector: a single path), else None.

    Example:
        >>> one_hot_index(torch.tensor([0.0, 1.0, 0.0])), one_hot_index(torch.tensor([0.5, 0.5]))
        (1, None)
    """
    nonzero = torch.nonzero(w.detach()).flatten()
    if len(nonzero) != 1 or float(w[nonzero[0]]) != 1.0:
        return None
    return int(nonzero[0])


def times_chosen(w: torch.Tensor, j: int, x: torch.Tensor) -> torch.Tensor:
    """``w[j] * x`` on a single path (``j = one_hot_index(w)``): the chosen value's weight, whose
    gradient reaches the architecture logits where ``w`` carries one (DNAS's straight-through
    steps). Where it carries none (uniform single-path training, scoring) ``w[j]`` is exactly 1.0
    and the product ``x`` to the bit, so ``x`` is returned as it is (about 150 multiplies and
    their backward a step of issue 20's ``scale`` supernet, none of which changed a value).

    Example:
        >>> x = torch.randn(2, 3)
        >>> times_chosen(torch.tensor([0.0, 1.0]), 1, x) is x
        True
        >>> logits = torch.zeros(2, requires_grad=True)
        >>> w = logits.softmax(0).detach() - logits.softmax(0) + torch.tensor([0.0, 1.0])  # straight-through
        >>> times_chosen(w, 1, x).sum().backward(); logits.grad.abs().sum() > 0
        tensor(True)
    """
    return w[j] * x if w.requires_grad else x


def projected_width(e: torch.Tensor, w: torch.Tensor, projection: nn.Linear, widths: Sequence[int],
                    dim: int, offsets: Sequence[int] | None = None) -> torch.Tensor:
    """One feature's X0 vector under its embedding-width choice: ``e`` [B, table width] (the
    feature's supernet row), of which width ``widths[c]`` reads the columns from ``offsets[c]``
    (None: from 0, a prefix; see :mod:`autorec.supernet.widths`), projected to ``dim`` (a width
    equal to ``dim`` passes unprojected, a width 0 drops the feature), mixed by ``w`` [C].

    On a single path (``w`` one-hot) only the chosen width is computed: its columns times the
    matching columns of the projection, no mask; soft weights mask one projection's input by
    the expected columns (:func:`width_mask`).

    Shapes: e [B, W], w [C] -> [B, dim].

    Example:
        >>> proj = nn.Linear(4, 2, bias=False)
        >>> e = torch.randn(3, 4)
        >>> torch.equal(projected_width(e, torch.tensor([1.0, 0.0]), proj, (2, 4), 2), e[:, :2])  # = dim
        True
        >>> torch.allclose(projected_width(e, torch.tensor([0.0, 1.0]), proj, (2, 4), 2), proj(e))
        True
        >>> soft = projected_width(e, torch.tensor([0.5, 0.5]), proj, (2, 4), 2)  # both, mixed
        >>> torch.allclose(soft, 0.5 * e[:, :2] + 0.5 * proj(e))
        True
        >>> own = nn.Linear(3, 2, bias=False)  # widths 1 and 2 in their own columns: 0 and 1-2
        >>> x = torch.randn(3, 3)
        >>> torch.allclose(projected_width(x, torch.tensor([0.0, 1.0]), own, (1, 2), 2, (0, 1)), x[:, 1:])
        True
    """
    offsets = offsets if offsets is not None else (0,) * len(widths)
    identity = widths.index(dim) if dim in widths else None
    j = one_hot_index(w)
    if j is not None:
        start, end = offsets[j], offsets[j] + widths[j]
        if j == identity:
            return times_chosen(w, j, e[:, start:end])
        if widths[j] == 0:
            return times_chosen(w, j, e.new_zeros(e.shape[0], dim))
        return times_chosen(w, j, F.linear(e[:, start:end], projection.weight[:, start:end]))
    others = [i for i in range(len(widths)) if i != identity]
    out = torch.zeros(()) if identity is None else \
        w[identity] * e[:, offsets[identity]:offsets[identity] + dim]
    if others:  # w_c * proj(e masked to width c's columns), summed: one projection, masked input
        mask = width_mask(w[others], [widths[i] for i in others], e.shape[1], [offsets[i] for i in others])
        out = out + projection(e * mask)
    return out


def pad_features(x: torch.Tensor, num: int) -> torch.Tensor:
    """Zero-pad [B, F, D] to [B, num, D]: a candidate with fewer outputs leaves the rest empty."""
    if x.shape[1] > num:
        raise ValueError(f"cannot pad {x.shape[1]} vectors down to {num}")
    return F.pad(x, (0, 0, 0, num - x.shape[1]))


def rms_rescale(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """``x`` divided by its root mean square over each sample's values (no learned scale).

    One scale per sample, so zero (absent or masked) vectors stay zero and the ratios between a
    sample's vectors, which the width masks set, are kept.

    Shapes: [B, F, D] -> [B, F, D].

    Example:
        >>> rms_rescale(torch.tensor([[[300.0, 0.0], [0.0, 400.0]]])).round(decimals=3)
        tensor([[[1.2000, 0.0000],
                 [0.0000, 1.6000]]])
    """
    return F.rms_norm(x, x.shape[1:], eps=eps)


class MixedChoice(nn.Module):
    """``sum_i w_i * candidate_i(x, weights)`` over named candidate transforms of one choice.

    Candidates are modules called as ``candidate(x, weights)`` that may read the weights of their
    own nested choices; their outputs are zero-padded along dim 1 to the widest. A candidate
    whose weight is exactly zero (hard sampling) is not run at all, so a hard step costs one
    candidate. Generic on purpose: per-layer precision or the tower count plug in as one more
    MixedChoice over their own candidates.

    Candidates named in ``rescale`` have their output divided by its root mean square per sample
    (:func:`rms_rescale`) before mixing. That is for ops without a norm of their own whose output
    scale is a power of their input's (DLRM's dots: s -> D s^2; DCNv2's x0 * (W x): s -> s^3). In
    a deep stack that interleaves them with LayerNorm-ed blocks (Wukong, DHEN, whose outputs are
    O(1) per element), a sampled chain such as norm, dot, dot, cross raises the scale to the
    16th power, and an 8-layer supernet overflowed to inf/NaN within 25 steps. Rescaling keeps
    every candidate's output at O(1), so their mix compares the ops' shapes, not their scales.

    Shapes: candidates map [B, F_in, D] -> [B, F_i, D]; the mix is [B, max F_i, D].

    Args:
        name: the Choice whose weights mix the candidates (values = candidate names).
        candidates: name -> module, in the order of the choice's values.
        num_out: max F_i, the width of the mix.
        rescale: names of the candidates whose output is RMS-rescaled.

    Example:
        >>> class Scale(nn.Module):
        ...     def __init__(self, s): super().__init__(); self.s = s
        ...     def forward(self, x, weights): return self.s * x
        >>> mix = MixedChoice("op", {"a": Scale(1.0), "b": Scale(3.0)}, num_out=2)
        >>> mix(torch.ones(1, 2, 1), {"op": torch.tensor([0.5, 0.5])}).flatten().tolist()
        [2.0, 2.0]
    """

    def __init__(
        self, name: str, candidates: Mapping[str, nn.Module], num_out: int, rescale: Collection[str] = ()
    ) -> None:
        super().__init__()
        self.name, self.num_out = name, num_out
        self.candidates = nn.ModuleDict(candidates)
        unknown = set(rescale) - set(candidates)
        if unknown:
            raise ValueError(f"choice {name!r}: rescale names unknown candidates {sorted(unknown)}")
        self.rescale = frozenset(rescale)

    def forward(self, x: torch.Tensor, weights: Weights) -> torch.Tensor:
        if self.name in weights:
            w = weights[self.name]
        elif len(self.candidates) == 1:  # a choice of one value is no choice: the space has no logit
            w = torch.ones(1, device=x.device)
        else:
            raise KeyError(f"choice {self.name!r}: no weights given for its "
                           f"{len(self.candidates)} candidates")
        out: torch.Tensor | None = None
        for i, (key, candidate) in enumerate(self.candidates.items()):
            if w[i].item() == 0.0:
                continue
            y = candidate(x, weights)
            if key in self.rescale:
                y = rms_rescale(y)
            y = w[i] * pad_features(y, self.num_out)
            out = y if out is None else out + y
        if out is None:  # all weights zero: cannot happen for a softmax, kept for safety
            raise ValueError(f"choice {self.name!r}: every candidate weight is zero")
        return out


class MaskedOverArch(nn.Module):
    """The over-arch MLP of several same-depth sizes at once: one MLP at the widest size of each
    layer, whose units past the chosen size are masked (FBNetV2-style, as :func:`width_mask`).

    With one-hot weights, the output is exactly that of ``MLP(in, sizes) -> Linear(sizes[-1], 1)``
    built from the first ``sizes[l]`` units of each layer; soft weights mix the masks.

    Shapes: [B, in_features] -> [B, 1].

    Args:
        name: the choice whose weights pick the sizes.
        in_features: the flattened input width.
        values: the candidate sizes, one tuple per value, all of one depth.

    Example:
        >>> head = MaskedOverArch("over_arch", 6, ((4, 2), (8, 4)))
        >>> x = torch.randn(3, 6)
        >>> small = head(x, {"over_arch": torch.tensor([1.0, 0.0])})
        >>> mlp = MLP(6, [4, 2])
        >>> with torch.no_grad():
        ...     for mine, full in zip(mlp._mlp, head.mlp._mlp):
        ...         n_out, n_in = mine._linear.weight.shape
        ...         _ = mine._linear.weight.copy_(full._linear.weight[:n_out, :n_in])
        ...         _ = mine._linear.bias.copy_(full._linear.bias[:n_out])
        >>> reference = mlp(x) @ head.out.weight[:, :2].T + head.out.bias
        >>> torch.allclose(small, reference, atol=1e-6)
        True
    """

    def __init__(self, name: str, in_features: int, values: tuple[tuple[int, ...], ...]) -> None:
        super().__init__()
        self.name, self.values = name, values
        self.sizes = tuple(max(sizes) for sizes in zip(*values, strict=True))
        self.mlp = MLP(in_features, list(self.sizes))
        self.out = nn.Linear(self.sizes[-1], 1)

    def forward(self, x: torch.Tensor, weights: Weights) -> torch.Tensor:
        w = weights[self.name]
        j = one_hot_index(w)
        if j is not None:  # a single path: the chosen sizes' slices of the weights, no mask
            for layer, size in zip(self.mlp._mlp, self.values[j], strict=True):
                linear = layer._linear
                x = times_chosen(w, j, layer._activation_fn(
                    F.linear(x, linear.weight[:size, : x.shape[1]], linear.bias[:size])))
            return F.linear(x, self.out.weight[:, : x.shape[1]], self.out.bias)
        for i, layer in enumerate(self.mlp._mlp):
            x = layer(x) * width_mask(w, [v[i] for v in self.values], self.sizes[i])
        return self.out(x)
