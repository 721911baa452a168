"""Interaction blocks; importing this package registers every kind in ``BLOCKS``.

The lookups live here, not in ``base``, so that they run after every kind module has registered
itself (a kind module imports ``base``; nothing in ``base`` imports the kinds back).
"""

from __future__ import annotations

from autorec.arch import BlockConfig
from autorec.blocks import dcn, dhen, dlrm, mlp, skip, wukong  # noqa: F401  (registers each kind)
from autorec.blocks.base import BLOCKS, InteractionBlock, register

__all__ = ["BLOCKS", "InteractionBlock", "block_class", "build_block", "out_features", "register"]


def block_class(config: BlockConfig) -> type[InteractionBlock]:
    """The block class registered for ``config``'s kind."""
    try:
        return BLOCKS[config.kind]
    except KeyError:
        raise KeyError(f"no block registered for kind {config.kind!r}; known: {', '.join(BLOCKS)}") from None


def build_block(config: BlockConfig, num_in: int, dim: int) -> InteractionBlock:
    """The block for ``config`` taking ``[B, num_in, dim]``."""
    return block_class(config)(config, num_in, dim)


def out_features(config: BlockConfig, num_in: int, dim: int) -> int:
    """F_out of ``config``'s block for input ``[B, num_in, dim]`` (the kind must be registered)."""
    return block_class(config).out_features(config, num_in, dim)
