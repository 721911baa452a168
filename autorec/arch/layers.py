"""The configs of the interaction layers: one frozen dataclass per block kind, torch-free.

A config says what a layer is (its kind and sizes) and how wide its output is
(:meth:`BlockConfig.out_features`), so an ArchSpec sizes its whole stack without building the
blocks; ``autorec.blocks`` registers, per kind, how it is built and searched.

Example:
    >>> WukongConfig(n_fm=4, n_lcb=2, rank=4, mlp=(32,)).out_features(5, 16)
    6
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from autorec.arch.checks import (
    DHEN_ENSEMBLES,
    DHEN_MODULES,
    PRECISIONS,
    check_choice,
    check_int,
    check_sizes,
    fail,
)


@dataclass(frozen=True, kw_only=True)
class BlockConfig:
    """Base of every interaction-layer config. ``kind`` names the block in JSON."""

    kind: ClassVar[str] = ""
    precision: str = "fp32"

    def validate(self, path: str) -> None:
        check_choice(f"{path}.precision", self.precision, PRECISIONS)

    def out_features(self, num_in: int, dim: int) -> int:
        """F_out of the layer for input ``[B, num_in, dim]``, or a ValueError naming the field that
        does not fit. Torch-free, so an ArchSpec sizes its stack without building (or importing)
        the blocks."""
        raise NotImplementedError(f"{type(self).__name__} does not give its output width")


def num_dots(num_in: int, self_interaction: bool = False) -> int:
    """How many pairwise dots ``num_in`` vectors give (i < j, or i <= j with self-interaction)."""
    return num_in * (num_in + 1) // 2 if self_interaction else num_in * (num_in - 1) // 2


@dataclass(frozen=True, kw_only=True)
class SkipConfig(BlockConfig):
    """Identity layer: lets a search drop a layer without changing the stack's length."""

    kind: ClassVar[str] = "skip"

    def out_features(self, num_in: int, dim: int) -> int:
        return num_in


@dataclass(frozen=True, kw_only=True)
class DotConfig(BlockConfig):
    """DLRM pairwise dot-product interaction.

    The output holds the first ``n_passthrough`` input vectors (DLRM keeps the dense vector),
    then the F(F-1)/2 pairwise dots (plus F self-dots with ``self_interaction``), packed into
    D-wide rows, the last row zero-padded.
    """

    kind: ClassVar[str] = "dlrm"
    n_passthrough: int = 1
    self_interaction: bool = False

    def validate(self, path: str) -> None:
        super().validate(path)
        check_int(f"{path}.n_passthrough", self.n_passthrough, 0)
        if not isinstance(self.self_interaction, bool):
            fail(f"{path}.self_interaction", f"expected true or false, got {self.self_interaction!r}")

    def out_features(self, num_in: int, dim: int) -> int:
        self.validate(self.kind)
        if self.n_passthrough > num_in:
            raise ValueError(f"{self.kind}.n_passthrough: {self.n_passthrough} exceeds the "
                             f"{num_in} input vectors")
        values = self.n_passthrough * dim + num_dots(num_in, self.self_interaction)
        if values == 0:
            raise ValueError(f"{self.kind}: {num_in} input vector(s) give no dots and nothing to pass "
                             "through; set n_passthrough or self_interaction")
        return math.ceil(values / dim)


@dataclass(frozen=True, kw_only=True)
class CrossConfig(BlockConfig):
    """DCNv2 cross network on the flattened input; ``rank`` 0 is full rank, else low rank."""

    kind: ClassVar[str] = "dcnv2"
    num_layers: int = 2
    rank: int = 0

    def validate(self, path: str) -> None:
        super().validate(path)
        check_int(f"{path}.num_layers", self.num_layers, 1)
        check_int(f"{path}.rank", self.rank, 0)

    def out_features(self, num_in: int, dim: int) -> int:
        self.validate(self.kind)
        return num_in


@dataclass(frozen=True, kw_only=True)
class WukongConfig(BlockConfig):
    """One Wukong layer: factorization-machine block (n_fm outputs, rank-k optimised FM,
    MLP sizes ``mlp``) beside a linear compress block (n_lcb outputs)."""

    kind: ClassVar[str] = "wukong"
    n_fm: int = 8
    n_lcb: int = 8
    rank: int = 8
    mlp: tuple[int, ...] = (256,)

    def validate(self, path: str) -> None:
        super().validate(path)
        check_int(f"{path}.n_fm", self.n_fm, 1)
        check_int(f"{path}.n_lcb", self.n_lcb, 0)
        check_int(f"{path}.rank", self.rank, 1)
        check_sizes(f"{path}.mlp", self.mlp)

    def out_features(self, num_in: int, dim: int) -> int:
        self.validate(self.kind)
        return self.n_fm + self.n_lcb


@dataclass(frozen=True, kw_only=True)
class DhenConfig(BlockConfig):
    """One DHEN layer: an ensemble of interaction modules plus a shortcut, layer-normed.

    Each module maps [B, F, D] -> [B, n_out, D]; ``concat`` stacks them (F' = n_out * len),
    ``sum`` and ``weighted_sum`` add them (F' = n_out).
    """

    kind: ClassVar[str] = "dhen"
    modules: tuple[str, ...] = ("dot", "attention")
    ensemble: str = "concat"
    n_out: int = 8
    num_heads: int = 2
    dcn_layers: int = 1

    def validate(self, path: str) -> None:
        super().validate(path)
        if not isinstance(self.modules, tuple) or not self.modules:
            fail(f"{path}.modules", f"expected a non-empty list from {', '.join(DHEN_MODULES)}")
        for i, name in enumerate(self.modules):
            check_choice(f"{path}.modules[{i}]", name, DHEN_MODULES)
        if len(set(self.modules)) != len(self.modules):
            fail(f"{path}.modules", f"modules repeat: {list(self.modules)}")
        check_choice(f"{path}.ensemble", self.ensemble, DHEN_ENSEMBLES)
        check_int(f"{path}.n_out", self.n_out, 1)
        check_int(f"{path}.num_heads", self.num_heads, 1)
        check_int(f"{path}.dcn_layers", self.dcn_layers, 1)

    def out_features(self, num_in: int, dim: int) -> int:
        self.validate(self.kind)
        if "attention" in self.modules and dim % self.num_heads:
            raise ValueError(f"{self.kind}.num_heads: the attention module needs dim {dim} divisible "
                             f"by num_heads, got {self.num_heads}")
        if "dot" in self.modules and num_in < 2:
            raise ValueError(f"{self.kind}.modules: the dot module needs at least 2 input vectors, "
                             f"got {num_in}")
        return self.n_out * len(self.modules) if self.ensemble == "concat" else self.n_out


@dataclass(frozen=True, kw_only=True)
class MLPConfig(BlockConfig):
    """An MLP on the flattened input whose output is reshaped to [B, n_out, D]."""

    kind: ClassVar[str] = "mlp"
    hidden: tuple[int, ...] = (256,)
    n_out: int = 8

    def validate(self, path: str) -> None:
        super().validate(path)
        check_sizes(f"{path}.hidden", self.hidden)
        check_int(f"{path}.n_out", self.n_out, 1)

    def out_features(self, num_in: int, dim: int) -> int:
        self.validate(self.kind)
        return self.n_out


BLOCK_CONFIGS: dict[str, type[BlockConfig]] = {
    cls.kind: cls
    for cls in (SkipConfig, DotConfig, CrossConfig, WukongConfig, DhenConfig, MLPConfig)
}

