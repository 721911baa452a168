"""Embedding-table precision: no int8 training tables; int8 for inference through torchrec."""

import dataclasses

import pytest
import torch
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from autorec.arch import ArchSpec, ArchSpecError, TableSpec
from autorec.data import Schema, SparseFeature
from autorec.models import build_model
from autorec.precision.embeddings import quantize_tables, table_bytes
from autorec.presets import preset

SCHEMA = Schema(dense=("a",), sparse=(SparseFeature("user", 300), SparseFeature("item", 200)))


def batch(n: int = 64) -> tuple[torch.Tensor, KeyedJaggedTensor]:
    g = torch.Generator().manual_seed(0)
    ids = torch.cat([torch.randint(0, 300, (n,), generator=g), torch.randint(0, 200, (n,), generator=g)])
    kjt = KeyedJaggedTensor.from_lengths_sync(["user", "item"], ids, torch.ones(2 * n, dtype=torch.int32))
    return torch.randn(n, 1, generator=g), kjt


def test_an_int8_table_is_refused_with_the_reason_and_what_to_use():
    table = TableSpec(name="t", features=("user",), num_embeddings=10, dim=16, precision="int8")
    with pytest.raises(ArchSpecError, match=r"^tables\[0\]\.precision: int8 tables cannot be "
                                            r"trained: .*fp32 or fp16.*quantize_tables"):
        ArchSpec(dim=16, tables=(table,))


def test_int8_inference_tables_match_the_float_model_in_half_the_bytes_at_dim_16():
    torch.manual_seed(0)
    model = build_model(preset("dlrm", SCHEMA, dim=16)).eval()
    served = quantize_tables(model)
    weights = served.sparse_arch.state_dict()
    assert {w.dtype for w in weights.values()} == {torch.uint8}
    # 16 one-byte values a row plus fbgemm's per-row scale and bias (padded): 32 bytes, not 64.
    assert table_bytes(served) == 32 * 500 and table_bytes(model) == 64 * 500
    dense, kjt = batch()
    with torch.no_grad():
        want, got = model.sparse_arch(kjt).values(), served.sparse_arch(kjt).values()
        step = (want.abs().max() / 127).item()  # one int8 step of the largest entry
        assert 0 < (want - got).abs().max().item() <= step
        torch.testing.assert_close(served(dense, kjt), model(dense, kjt), rtol=0, atol=1e-3)
    assert model.sparse_arch.embedding_bags["t_user"].weight.dtype == torch.float32  # a copy


def test_fp16_trained_tables_quantise_too():
    spec = preset("dlrm", SCHEMA, dim=16)
    spec = dataclasses.replace(spec, tables=tuple(dataclasses.replace(t, precision="fp16")
                                                  for t in spec.tables))
    model = build_model(spec).eval()
    dense, kjt = batch()
    with torch.no_grad():
        torch.testing.assert_close(quantize_tables(model)(dense, kjt), model(dense, kjt),
                                   rtol=0, atol=1e-3)


def test_bad_inputs():
    model = build_model(preset("dlrm", SCHEMA, dim=16))
    with pytest.raises(ValueError, match="precision: expected one of int8, got 'int4'"):
        quantize_tables(model, "int4")
    with pytest.raises(TypeError, match="plain_model"):
        quantize_tables(torch.nn.Linear(2, 2))  # type: ignore[arg-type]
