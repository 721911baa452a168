"""DotInteraction: the DLRM interaction, checked against torchrec's InteractionArch."""

from __future__ import annotations

import pytest
import torch
from torchrec.models.dlrm import InteractionArch

from autorec.arch import DotConfig
from autorec.blocks.dlrm import DotInteraction, PairwiseDots


@pytest.mark.parametrize(("num_in", "dim"), [(2, 3), (4, 4), (6, 8), (9, 2)])
def test_matches_torchrec_interaction_arch(num_in: int, dim: int) -> None:
    x = torch.randn(5, num_in, dim)
    expected = InteractionArch(num_sparse_features=num_in - 1)(x[:, 0], x[:, 1:])
    out = DotInteraction(DotConfig(n_passthrough=1), num_in, dim)(x)
    n_values = dim + num_in * (num_in - 1) // 2
    assert expected.shape == (5, n_values)
    flat = out.flatten(1)
    torch.testing.assert_close(flat[:, :n_values], expected)
    assert torch.equal(flat[:, n_values:], torch.zeros(5, flat.shape[1] - n_values))
    assert flat.shape[1] - n_values < dim  # padded only up to the next row


@pytest.mark.parametrize("self_interaction", [False, True])
def test_dots_follow_triu_order(self_interaction: bool) -> None:
    x = torch.randn(2, 4, 3)
    expected = torch.stack([(x[:, i] * x[:, j]).sum(-1)
                            for i in range(4) for j in range(4)
                            if j > i or (self_interaction and j == i)], dim=1)
    torch.testing.assert_close(PairwiseDots(4, self_interaction)(x), expected)


@pytest.mark.parametrize(("n_passthrough", "self_interaction", "num_out"),
                         [(0, False, 2), (1, False, 3), (2, False, 4), (0, True, 3), (4, True, 7)])
def test_layout_of_passthrough_dots_and_padding(n_passthrough: int, self_interaction: bool,
                                                num_out: int) -> None:
    # F=4, D=4: 6 dots (10 with the diagonal) after n_passthrough * 4 copied values.
    config = DotConfig(n_passthrough=n_passthrough, self_interaction=self_interaction)
    block = DotInteraction(config, num_in=4, dim=4)
    assert block.num_out == num_out
    x = torch.randn(3, 4, 4)
    flat = block(x).flatten(1)
    n_copied = 4 * n_passthrough
    torch.testing.assert_close(flat[:, :n_copied], x[:, :n_passthrough].flatten(1))
    dots = PairwiseDots(4, self_interaction)(x)
    torch.testing.assert_close(flat[:, n_copied : n_copied + dots.shape[1]], dots)
    assert not flat[:, n_copied + dots.shape[1] :].any()


def test_has_no_parameters_and_no_persistent_state() -> None:
    block = DotInteraction(DotConfig(), 5, 4)
    assert list(block.parameters()) == []
    assert block.state_dict() == {}


def test_too_many_passthrough_vectors_names_the_field() -> None:
    with pytest.raises(ValueError, match=r"dlrm\.n_passthrough"):
        DotInteraction.out_features(DotConfig(n_passthrough=4), num_in=3, dim=4)


def test_nothing_to_output_is_an_error() -> None:
    with pytest.raises(ValueError, match="no dots"):
        DotInteraction(DotConfig(n_passthrough=0), num_in=1, dim=4)
    assert DotInteraction.out_features(DotConfig(n_passthrough=0, self_interaction=True), 1, 4) == 1


def test_negative_passthrough_names_the_field() -> None:
    with pytest.raises(ValueError, match=r"dlrm\.n_passthrough"):
        DotInteraction(DotConfig(n_passthrough=-1), num_in=3, dim=4)
