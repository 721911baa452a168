"""Interaction blocks; importing this package registers every kind in ``BLOCKS``."""

from autorec.blocks import dcn, dhen, dlrm, mlp, skip, wukong  # noqa: F401
from autorec.blocks.base import BLOCKS, InteractionBlock, build_block, out_features, register

__all__ = ["BLOCKS", "InteractionBlock", "build_block", "out_features", "register"]
