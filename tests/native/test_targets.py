"""Every kernel's AVX2 and plain x86-64 builds give the values of the build this CPU picks: each
run in a process of its own under ``AUTOREC_NATIVE_ISA`` (the choice is made once per process)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from autorec.native import build

# Fixed inputs through each kernel: dots (F 27, D 16; F 5, D 20), LayerNorm (D 16, 20, 64),
# the tables' lookup and update (D 16 and 20), Wukong's layer (D 16 and 48, projecting and not).
# Saved as one dict of tensors.
SCRIPT = """
import sys, torch
from autorec.blocks import gram
from autorec.arch import WukongConfig
from autorec.blocks.layout import FloatLayerNorm
from autorec.blocks.wukong import WukongLayer
from autorec.train import cpu_lookup
from tests.train.test_cpu_lookup import _batch, _tbe
torch.manual_seed(0)
out = {}
for f, d in ((27, 16), (5, 20)):
    x = torch.randn(33, f, d, requires_grad=True)
    first, second = torch.triu_indices(f, f, offset=1)
    y = gram.pair_dots(x, first, second, passthrough=1)
    y.backward(torch.randn(y.shape))
    out[f"dots{f}_{d}"], out[f"dots{f}_{d}_grad"] = y.detach(), x.grad
for d in (16, 20, 64):
    norm, x = FloatLayerNorm(d), torch.randn(41, d, requires_grad=True)
    y = norm(x)
    y.backward(torch.randn(y.shape))
    out[f"norm{d}"], out[f"norm{d}_grad"], out[f"norm{d}_wgrad"] = y.detach(), x.grad, norm.weight.grad
for d in (16, 20):
    tbe = _tbe([(50, d), (300, d)])
    cpu_lookup.switch(tbe)
    indices, offsets = _batch([50, 300], 37, torch.Generator().manual_seed(d), True)
    y = tbe(indices, offsets)
    out[f"lookup{d}"] = y.detach()
    y.backward(torch.randn(y.shape))
    out[f"update{d}"] = tbe.weights_host.detach().clone()
for f, d in ((27, 16), (16, 48)):
    layer = WukongLayer(WukongConfig(n_fm=8, n_lcb=8, rank=8, mlp=(32,)), f, d)
    x = torch.randn(29, f, d, requires_grad=True)
    y = layer(x)
    y.backward(torch.randn(y.shape))
    out[f"wukong{f}_{d}"], out[f"wukong{f}_{d}_grad"] = y.detach(), x.grad
    out[f"wukong{f}_{d}_proj_grad"] = layer.fmb.proj.grad
torch.save(out, sys.argv[1])
"""


def _run(tmp_path: Path, isa: str | None) -> dict[str, torch.Tensor]:
    path = tmp_path / f"{isa or 'best'}.pt"
    env = {k: v for k, v in os.environ.items() if k != "AUTOREC_NATIVE_ISA"}
    if isa is not None:
        env["AUTOREC_NATIVE_ISA"] = isa
    root = Path(__file__).resolve().parents[2]
    env["PYTHONPATH"] = os.pathsep.join([str(root), env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(path)], env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return torch.load(path)


@pytest.mark.parametrize("isa", ["avx2", "plain"])
def test_each_build_gives_the_values_of_the_best(tmp_path: Path, isa: str) -> None:
    assert all(build.library(n) is not None for n in ("pair_dots", "layer_norm", "pooled_lookup",
                                                      "rowwise_adagrad", "wukong_layer"))
    best, other = _run(tmp_path, None), _run(tmp_path, isa)
    assert best.keys() == other.keys()
    for key in best:
        torch.testing.assert_close(other[key], best[key], rtol=1e-5, atol=1e-5, msg=key)
