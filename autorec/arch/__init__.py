"""ArchSpec: the one frozen, JSON-serialisable description of a complete model.

Every part of autorec meets at an :class:`ArchSpec`: search strategies produce one,
``build_model`` turns one into an ``nn.Module``, cost models and sharding planners read one,
and export writes one as ``arch.json``.

A model described by an ArchSpec is::

    dense [B, n_dense] --dense_arch MLP--> [B, 1, D] --+
    sparse KJT --EmbeddingBagCollection--> [B, F, D] --+--> X0 [B, F0, D]
    X0 --layers[0]--> [B, F1, D] --layers[1]--> ... --> flatten --over_arch--> logit [B]

Every interaction layer maps ``[B, F_in, D] -> [B, F_out, D]``, so block kinds mix freely.
With DMT towers (``towers``, a :class:`TowerSpec`), the pooled embeddings ``[B, F, D]`` first go
through K tower modules, each compressing its features to ``n_out`` vectors, so that
X0 is ``[B, 1 + K * n_out, D]``.

Example:
    >>> spec = ArchSpec(
    ...     dim=16, n_dense=2, dense_arch=(32,),
    ...     tables=(TableSpec(name="t_user", features=("user",), num_embeddings=100, dim=16),),
    ...     layers=(WukongConfig(n_fm=4, n_lcb=4, rank=4, mlp=(64,)),), over_arch=(64,))
    >>> ArchSpec.from_json(spec.to_json()) == spec
    True
"""

from autorec.arch.checks import (
    DHEN_ENSEMBLES,
    DHEN_MODULES,
    EMBEDDING_PRECISIONS,
    FORMAT_VERSION,
    INT8_TABLES,
    PRECISIONS,
    TABLE_WIDTH_MULTIPLE,
    ArchSpecError,
)
from autorec.arch.layers import (
    BLOCK_CONFIGS,
    BlockConfig,
    CrossConfig,
    DhenConfig,
    DotConfig,
    MLPConfig,
    SkipConfig,
    WukongConfig,
    num_dots,
)
from autorec.arch.spec import ArchSpec, TableSpec, TowerSpec

__all__ = [
    "BLOCK_CONFIGS", "DHEN_ENSEMBLES", "DHEN_MODULES", "EMBEDDING_PRECISIONS", "FORMAT_VERSION",
    "INT8_TABLES", "PRECISIONS", "TABLE_WIDTH_MULTIPLE", "ArchSpec", "ArchSpecError", "BlockConfig",
    "CrossConfig", "DhenConfig", "DotConfig", "MLPConfig", "SkipConfig", "TableSpec", "TowerSpec",
    "WukongConfig", "num_dots",
]
