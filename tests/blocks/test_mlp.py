"""MLPBlock and FeatureLinear."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from autorec.arch import MLPConfig
from autorec.blocks.mlp import FeatureLinear, MLPBlock


def test_mlp_block_is_relu_mlp_then_linear_reshaped() -> None:
    torch.manual_seed(0)
    block = MLPBlock(MLPConfig(hidden=(5, 4), n_out=2), num_in=3, dim=2)
    first, second, last = [m for m in block.modules() if isinstance(m, nn.Linear)]
    assert (first.in_features, first.out_features, last.out_features) == (6, 5, 4)
    x = torch.randn(7, 3, 2)
    h = torch.relu(x.flatten(1) @ first.weight.T + first.bias)
    h = torch.relu(h @ second.weight.T + second.bias)
    expected = (h @ last.weight.T + last.bias).view(7, 2, 2)
    torch.testing.assert_close(block(x), expected)


def test_no_hidden_layers_is_one_linear() -> None:
    block = MLPBlock(MLPConfig(hidden=(), n_out=3), num_in=2, dim=4)
    (linear,) = [m for m in block.modules() if isinstance(m, nn.Linear)]
    assert (linear.in_features, linear.out_features) == (8, 12)
    assert sum(p.numel() for p in block.parameters()) == 8 * 12 + 12


def test_feature_linear_mixes_vectors_not_positions() -> None:
    layer = FeatureLinear(3, 2)
    x = torch.randn(4, 3, 5)
    expected = torch.einsum("of,bfd->bod", layer.linear.weight, x)
    torch.testing.assert_close(layer(x), expected)
    assert layer.linear.bias is None


def test_bad_n_out_names_the_field() -> None:
    with pytest.raises(ValueError, match=r"mlp\.n_out"):
        MLPBlock(MLPConfig(n_out=0), num_in=2, dim=4)
