"""The contract every interaction block meets (kinds register in :mod:`autorec.blocks.registry`).

A block is built from its config (autorec.arch), the number of input vectors F_in and the
shared width D, and maps ``[B, F_in, D] -> [B, F_out, D]`` where ``F_out`` is known before
building (``out_features``), so cost models and search spaces size a stack without torch work.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import torch
from torch import nn

from autorec.arch import BlockConfig


class InteractionBlock(nn.Module):
    """Base class: subclasses set ``config_type`` and implement ``forward``; the output width is the
    config's (``BlockConfig.out_features``)."""

    config_type: ClassVar[type[BlockConfig]]
    # Set by the model on its last block where the over-arch's first layer is a plain nn.Linear:
    # under autocast the block may then give its output in autocast's dtype, which that linear
    # casts its input to anyway (see :func:`autocast_output`).
    feeds_linear: bool = False
    # A block that reads the model's input vectors in the parts they come in (a list: the dense
    # vector [B, 1, D], then the pooled embeddings [B, F - 1, D]) with no concatenation; its
    # forward then takes such a list as well as one [B, F, D] tensor (see RecModel.forward).
    takes_parts: ClassVar[bool] = False

    @staticmethod
    def stack_forward(layers: Sequence[nn.Module],
                      x: torch.Tensor | list[torch.Tensor]) -> torch.Tensor | None:
        """A model's interaction stack ``layers`` (this kind first) on ``x`` run as one, where a
        kind can do better than block by block (Wukong: each layer's tail with the next one's
        head); None, the default, runs the blocks one by one (see RecModel)."""
        return None

    def __init__(self, config: BlockConfig, num_in: int, dim: int) -> None:
        super().__init__()
        if not isinstance(config, self.config_type):
            raise TypeError(f"{type(self).__name__} takes {self.config_type.__name__}, "
                            f"got {type(config).__name__}")
        self.config, self.num_in, self.dim = config, num_in, dim
        self.num_out = self.out_features(config, num_in, dim)

    @classmethod
    def out_features(cls, config: BlockConfig, num_in: int, dim: int) -> int:
        """F_out for input ``[B, num_in, dim]``: the config's own (torch-free) rule."""
        return config.out_features(num_in, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError


def global_forward_hooks() -> bool:
    """Whether any module-wide forward hook is registered: a block that computes a submodule's
    values by hand (Wukong's fused maps, DHEN's written-out attention) calls the submodule
    instead, so such a hook (a precision probe, say) sees every call."""
    module = nn.modules.module
    return bool(module._global_forward_hooks or module._global_forward_pre_hooks)


def autocast_output(x: torch.Tensor) -> torch.dtype | None:
    """The dtype a block that feeds a plain linear (``feeds_linear``) may give its output in:
    autocast's on ``x``'s device, or None outside autocast (or on a device without it, such as
    ``meta``) or while a module-wide forward hook is registered (a probe then sees that linear's
    input as before, in the block's dtype)."""
    device = x.device.type
    if (not torch.amp.is_autocast_available(device) or not torch.is_autocast_enabled(device)
            or global_forward_hooks()):
        return None
    return torch.get_autocast_dtype(device)


def first_linear(module: nn.Module) -> nn.Module | None:
    """The first ``nn.Linear`` (or subclass) among ``module``'s submodules, in order: the layer
    that takes ``module``'s input where ``module`` is an MLP."""
    return next((m for m in module.modules() if isinstance(m, nn.Linear)), None)
