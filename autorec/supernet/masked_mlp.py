"""An MLP over a choice of hidden sizes, for the supernet's ops (:mod:`autorec.supernet.ops`)."""

from __future__ import annotations

import itertools

import torch
from torch import nn

from autorec.precision.layers import quant_linear
from autorec.supernet.mixed import one_hot_index, times_chosen, width_mask


class MaskedMLP(nn.Module):
    """An MLP whose hidden sizes are a choice among ``options`` (tuples of sizes, ReLU after each),
    then a plain linear to ``out_size``, as :func:`autorec.blocks.mlp.mlp_to_rows` builds.

    Options of equal depth share one max-width chain (a width mask per hidden layer); each depth
    has its own chain, since layers of different depth do not line up.

    Shapes: [B, in_size] -> [B, out_size].

    Example:
        >>> mlp = MaskedMLP("m", ((64,), (128,), (128, 64)), in_size=10, out_size=4)
        >>> len(mlp.chains)  # depth 1 (64 and 128 share one 128-wide layer) and depth 2
        2
        >>> mlp(torch.randn(3, 10), torch.tensor([0.0, 1.0, 0.0])).shape
        torch.Size([3, 4])
    """

    def __init__(self, name: str, options: tuple[tuple[int, ...], ...], in_size: int, out_size: int) -> None:
        super().__init__()
        self.name, self.options = name, options
        depths = sorted({len(o) for o in options})
        self.groups = {d: [i for i, o in enumerate(options) if len(o) == d] for d in depths}
        self.widths = {d: [max(options[i][j] for i in self.groups[d]) for j in range(d)] for d in depths}
        self.chains = nn.ModuleDict()
        for d in depths:
            sizes = [in_size, *self.widths[d]]
            layers = [nn.Linear(a, b) for a, b in itertools.pairwise(sizes)]
            self.chains[str(d)] = nn.ModuleList([*layers, nn.Linear(sizes[-1], out_size)])

    def forward(self, x: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        j = one_hot_index(weights)
        if j is not None:  # a single path: the chosen widths' slices of the chain, no mask
            # (in the layer's precision: under as_precision the Linears are QuantLinears)
            chain, h = self.chains[str(len(self.options[j]))], x
            for layer, size in zip(chain, self.options[j], strict=False):
                h = torch.relu(quant_linear(h, layer.weight[:size, : h.shape[1]], layer.bias[:size],
                                            getattr(layer, "precision", "fp32")))
            last = chain[-1]
            return times_chosen(weights, j, quant_linear(h, last.weight[:, : h.shape[1]], last.bias,
                                                         getattr(last, "precision", "fp32")))
        out: torch.Tensor | None = None
        for d, members in self.groups.items():
            group = weights[members]
            total = group.sum()
            if total.item() == 0.0:
                continue
            chain, h = self.chains[str(d)], x
            for j in range(d):
                mask = width_mask(group / total, [self.options[i][j] for i in members], self.widths[d][j])
                h = torch.relu(chain[j](h)) * mask
            y = total * chain[d](h)
            out = y if out is None else out + y
        assert out is not None, f"{self.name}: every MLP option has weight zero"
        return out
