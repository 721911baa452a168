"""Preset architectures (dlrm, dcnv2, wukong, dhen), each an ArchSpec for a dataset's schema.

A preset is a function of the schema because the embedding tables are the dataset's features.
Their sizes were chosen on movielens100k's validation split (see BENCHMARKS.md).
"""

from __future__ import annotations

from collections.abc import Callable

from autorec.arch import ArchSpec, BlockConfig, CrossConfig, DhenConfig, DotConfig, TableSpec, WukongConfig
from autorec.data.schema import Schema


def tables_for(schema: Schema, dim: int) -> tuple[TableSpec, ...]:
    """One table per sparse feature, ``dim`` wide."""
    return tuple(TableSpec(name=f"t_{f.name}", features=(f.name,), num_embeddings=f.num_embeddings,
                           dim=dim) for f in schema.sparse)


def _spec(name: str, schema: Schema, dim: int, layers: tuple[BlockConfig, ...],
          over_arch: tuple[int, ...], dense_arch: tuple[int, ...] = (64,)) -> ArchSpec:
    return ArchSpec(name=name, dim=dim, tables=tables_for(schema, dim), n_dense=schema.n_dense,
                    dense_arch=dense_arch if schema.n_dense else (), layers=layers,
                    over_arch=over_arch)


def dlrm(schema: Schema, dim: int = 16) -> ArchSpec:
    """DLRM: dense MLP, pairwise dot interaction, over-arch MLP."""
    return _spec("dlrm", schema, dim, (DotConfig(),), (256, 128))


def dcnv2(schema: Schema, dim: int = 16) -> ArchSpec:
    """DCNv2: a full-rank cross network of 3 layers on the concatenated embeddings."""
    return _spec("dcnv2", schema, dim, (CrossConfig(num_layers=3, rank=0),), (256, 128))


def wukong(schema: Schema, dim: int = 16) -> ArchSpec:
    """Wukong: two stacked FMB+LCB layers."""
    layer = WukongConfig(n_fm=8, n_lcb=8, rank=8, mlp=(128,))
    return _spec("wukong", schema, dim, (layer, layer), (256, 128))


def dhen(schema: Schema, dim: int = 16) -> ArchSpec:
    """DHEN: two hierarchical layers ensembling dot, self-attention and DCN modules."""
    layer = DhenConfig(modules=("dot", "attention", "dcn"), ensemble="concat", n_out=4)
    return _spec("dhen", schema, dim, (layer, layer), (256, 128))


PRESETS: dict[str, Callable[..., ArchSpec]] = {"dlrm": dlrm, "dcnv2": dcnv2, "wukong": wukong,
                                               "dhen": dhen}


def preset(name: str, schema: Schema, **kwargs: int) -> ArchSpec:
    """The preset ``name`` for ``schema``.

    Example:
        >>> from autorec.data import Schema, SparseFeature
        >>> preset("dlrm", Schema(dense=("x",), sparse=(SparseFeature("u", 10),))).layers[0].kind
        'dlrm'
    """
    if name not in PRESETS:
        raise KeyError(f"unknown preset {name!r}; expected one of {', '.join(PRESETS)}")
    return PRESETS[name](schema, **kwargs)
