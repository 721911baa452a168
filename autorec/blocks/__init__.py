"""Interaction blocks; importing this package registers every built-in kind (one module each).

The lookups live here, not in ``registry``, so that they run after every kind module has
registered itself (a kind module imports ``registry``; nothing there imports the kinds back).
"""

from __future__ import annotations

from autorec.arch import BlockConfig
from autorec.blocks import dcn, dhen, dlrm, mlp, skip, wukong  # noqa: F401  (registers each kind)
from autorec.blocks.base import InteractionBlock
from autorec.blocks.registry import (
    KINDS,
    BlockKind,
    ScalingRule,
    SearchRules,
    default_kind,
    identity_kind,
    kind,
    kind_names,
    register_kind,
    unregister_kind,
)
from autorec.blocks.skip import SkipBlock

__all__ = ["KINDS", "BlockKind", "InteractionBlock", "ScalingRule", "SearchRules", "SkipBlock", "block_class",
           "build_block",
           "default_kind", "identity_kind", "kind", "kind_names", "out_features", "register_kind",
           "unregister_kind"]


def block_class(config: BlockConfig) -> type[InteractionBlock]:
    """The block class registered for ``config``'s kind."""
    return kind(config.kind).block


def build_block(config: BlockConfig, num_in: int, dim: int) -> InteractionBlock:
    """The block for ``config`` taking ``[B, num_in, dim]``."""
    return block_class(config)(config, num_in, dim)


def out_features(config: BlockConfig, num_in: int, dim: int) -> int:
    """F_out of ``config``'s block for input ``[B, num_in, dim]`` (the kind must be registered)."""
    return block_class(config).out_features(config, num_in, dim)
