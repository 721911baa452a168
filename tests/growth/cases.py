"""Specs of every block kind and real batches, shared by the growth operation tests."""

from __future__ import annotations

import functools

import torch
from torch import nn
from torchrec.datasets.utils import Batch

from autorec.arch import (
    ArchSpec,
    BlockConfig,
    CrossConfig,
    DhenConfig,
    DotConfig,
    MLPConfig,
    SkipConfig,
    TableSpec,
    WukongConfig,
)
from autorec.data import load_dataset

DIM = 8
TABLES = tuple(TableSpec(name=f"t_cat_{i}", features=(f"cat_{i}",), num_embeddings=50, dim=DIM)
               for i in range(4))


def spec(*layers: BlockConfig, over_arch: tuple[int, ...] = (32, 16),
         dense_arch: tuple[int, ...] = (16,)) -> ArchSpec:
    return ArchSpec(dim=DIM, n_dense=3, dense_arch=dense_arch, tables=TABLES, layers=layers,
                    over_arch=over_arch)


ALL_DHEN = ("dot", "attention", "dcn", "linear", "conv")
# Every block kind, each as it appears in a full-size model.
SPECS: dict[str, ArchSpec] = {
    "dlrm": spec(DotConfig()),
    "dcnv2_full": spec(CrossConfig(num_layers=2, rank=0)),
    "dcnv2_low": spec(CrossConfig(num_layers=2, rank=8)),
    "mlp": spec(MLPConfig(hidden=(32, 16), n_out=3), SkipConfig()),
    "wukong": spec(WukongConfig(n_fm=4, n_lcb=4, rank=4, mlp=(32,)),
                   WukongConfig(n_fm=4, n_lcb=4, rank=4, mlp=(32,))),
    "dhen_concat": spec(DhenConfig(modules=ALL_DHEN, ensemble="concat", n_out=2),
                        DhenConfig(modules=ALL_DHEN, ensemble="concat", n_out=2)),
    "dhen_sum": spec(DhenConfig(modules=("dot", "linear", "conv"), ensemble="sum", n_out=4),
                     DhenConfig(modules=("dot", "linear", "conv"), ensemble="sum", n_out=4)),
    "dhen_weighted": spec(DhenConfig(modules=("dot", "dcn"), ensemble="weighted_sum", n_out=4),
                          DhenConfig(modules=("dot", "dcn"), ensemble="weighted_sum", n_out=4)),
    "mixed": spec(WukongConfig(n_fm=4, n_lcb=4, rank=4, mlp=(16,)), CrossConfig(num_layers=1, rank=4),
                  DhenConfig(modules=("attention", "linear"), n_out=4)),
}


@functools.cache
def _dataset():
    return load_dataset("synthetic", num_samples=2000, num_dense=3, num_tables=4, rows=50,
                        pooling=(1.0, 2.5, 1.0, 1.0), seed=0)


def batch(size: int = 64, index: int = 0) -> Batch:
    """A real batch of the small synthetic dataset (4 tables of 50 rows, one multi-hot)."""
    for i, b in enumerate(_dataset().batches("train", size, shuffle=False)):
        if i == index:
            return b
    raise IndexError(index)


def outputs(model: nn.Module, b: Batch) -> torch.Tensor:
    model.eval()
    with torch.no_grad():
        return model(b.dense_features, b.sparse_features)


def scramble(model: nn.Module, seed: int = 0) -> nn.Module:
    """Every parameter drawn anew (biases and LayerNorms included), so no default init hides
    a mistake: a zero bias or a unit LayerNorm weight copied wrongly would go unnoticed."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            scale = p[0].numel() ** -0.5 if p.dim() > 1 else 0.3
            p.copy_(torch.randn(p.shape, generator=g) * scale)
    return model
