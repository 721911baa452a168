"""CrossBlock: a DCNv2 cross network on the flattened input."""

from __future__ import annotations

import pytest
import torch
from torchrec.modules.crossnet import CrossNet, LowRankCrossNet

from autorec.arch import CrossConfig
from autorec.blocks.dcn import CrossBlock


def test_full_rank_equals_torchrec_crossnet_on_the_flat_input() -> None:
    block = CrossBlock(CrossConfig(num_layers=3, rank=0), num_in=3, dim=4)
    reference = CrossNet(in_features=12, num_layers=3)
    reference.load_state_dict(block.cross.state_dict())
    with torch.no_grad():  # non-zero biases, so they are compared too
        for bias in reference.bias:
            bias.normal_()
        block.cross.load_state_dict(reference.state_dict())
    x = torch.randn(5, 3, 4)
    torch.testing.assert_close(block(x), reference(x.flatten(1)).view(5, 3, 4))


def test_low_rank_equals_torchrec_low_rank_crossnet() -> None:
    block = CrossBlock(CrossConfig(num_layers=2, rank=3), num_in=3, dim=4)
    assert isinstance(block.cross, LowRankCrossNet)
    reference = LowRankCrossNet(in_features=12, num_layers=2, low_rank=3)
    reference.load_state_dict(block.cross.state_dict())
    x = torch.randn(5, 3, 4)
    torch.testing.assert_close(block(x), reference(x.flatten(1)).view(5, 3, 4))


@pytest.mark.parametrize("rank", [0, 2])
def test_one_layer_is_the_dcnv2_formula(rank: int) -> None:
    block = CrossBlock(CrossConfig(num_layers=1, rank=rank), num_in=2, dim=3)
    x = torch.randn(4, 2, 3)
    x0 = x.flatten(1)
    cross = block.cross
    if rank == 0:
        weight, bias = cross.kernels[0], cross.bias[0].squeeze(1)
    else:
        weight, bias = cross.W_kernels[0] @ cross.V_kernels[0], cross.bias[0]
        assert torch.linalg.matrix_rank(weight) == rank
    expected = x0 * (x0 @ weight.T + bias) + x0
    torch.testing.assert_close(block(x).flatten(1), expected)


def test_parameter_counts_follow_the_rank() -> None:
    n = 4 * 8
    full = CrossBlock(CrossConfig(num_layers=2, rank=0), num_in=4, dim=8)
    low = CrossBlock(CrossConfig(num_layers=2, rank=5), num_in=4, dim=8)
    assert sum(p.numel() for p in full.parameters()) == 2 * (n * n + n)
    assert sum(p.numel() for p in low.parameters()) == 2 * (2 * n * 5 + n)


def test_bad_num_layers_names_the_field() -> None:
    with pytest.raises(ValueError, match=r"dcnv2\.num_layers"):
        CrossBlock(CrossConfig(num_layers=0), num_in=2, dim=4)
