"""Embedding initialisation that does not depend on how the tables are sharded.

torchrec initialises each shard on its own rank from that rank's random stream, so the same seed
gives different starting tables at 1, 2 or 4 ranks (or under another plan) and the runs cannot
be compared. Here a table's rows are drawn in fixed blocks of :data:`BLOCK_ROWS`, each from a
generator seeded by (seed, table, block); a rank draws only the blocks its shards touch and
keeps its columns. The distribution is torchrec's default for EmbeddingBagConfig:
U(-sqrt(1 / rows), sqrt(1 / rows)).

Example:
    >>> a = table_rows(seed=0, table="t_user", num_embeddings=10, dim=4, rows=slice(2, 5))
    >>> b = table_rows(seed=0, table="t_user", num_embeddings=10, dim=4, rows=slice(0, 10))
    >>> bool((a == b[2:5]).all())
    True
"""

from __future__ import annotations

import hashlib
import math
import warnings

import torch
from torch import nn
from torch.distributed._shard.sharded_tensor import ShardedTensor

BLOCK_ROWS = 1 << 16
PREFIX, SUFFIX = "sparse_arch.embedding_bags.", ".weight"


def _block_seed(seed: int, table: str, block: int) -> int:
    digest = hashlib.blake2b(f"{seed}/{table}/{block}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & ((1 << 63) - 1)


def table_rows(seed: int, table: str, num_embeddings: int, dim: int, rows: slice) -> torch.Tensor:
    """Rows ``rows`` [stop - start, dim] float32 of table ``table``'s initial weights."""
    bound = math.sqrt(1.0 / num_embeddings)
    start, stop = rows.start or 0, min(rows.stop, num_embeddings)
    out = torch.empty(stop - start, dim)
    for block in range(start // BLOCK_ROWS, -(-stop // BLOCK_ROWS)):
        lo = block * BLOCK_ROWS
        n = min(BLOCK_ROWS, num_embeddings - lo)
        g = torch.Generator().manual_seed(_block_seed(seed, table, block))
        values = torch.empty(n, dim).uniform_(-bound, bound, generator=g)
        a, b = max(start, lo), min(stop, lo + n)
        out[a - start:b - start] = values[a - lo:b - lo]
    return out


def init_embeddings(model: nn.Module, seed: int) -> None:
    """Give every embedding table of a (sharded) RecModel its seed-determined initial weights.

    Every rank calls it for its own shards; replicated (data-parallel) tables get the whole
    table on every rank. No communication."""
    state = model.state_dict()
    for key, value in state.items():
        name = key.removeprefix("_dmp_wrapped_module.").removeprefix("module.")
        if not (name.startswith(PREFIX) and name.endswith(SUFFIX)):
            continue
        table = name[len(PREFIX):-len(SUFFIX)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            rows, dim = value.size()
        if isinstance(value, ShardedTensor):
            for shard in value.local_shards():
                (r0, c0), (nr, nc) = shard.metadata.shard_offsets, shard.metadata.shard_sizes
                full_cols = table_rows(seed, table, rows, dim, slice(r0, r0 + nr))
                shard.tensor.detach().copy_(full_cols[:, c0:c0 + nc])
        else:
            value.detach().copy_(table_rows(seed, table, rows, dim, slice(0, rows)))
    model.load_state_dict(state)
