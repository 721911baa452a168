"""The dense optimizers in torch's fused form: taken where torch has a kernel, same updates."""

from __future__ import annotations

import pytest
import torch

from autorec.train.records import DENSE_OPTIMIZERS, dense_optimizer


def _params(seed: int, dtype: torch.dtype = torch.float32) -> list[torch.nn.Parameter]:
    gen = torch.Generator().manual_seed(seed)
    shapes = [(64, 13), (64,), (1, 64)]
    return [torch.nn.Parameter(torch.randn(*shape, generator=gen).to(dtype)) for shape in shapes]


@pytest.mark.parametrize("name", sorted(DENSE_OPTIMIZERS))
def test_on_the_cpu_the_fused_form_steps_as_the_default_one(name: str) -> None:
    fused_params, plain_params = _params(0), _params(0)
    fused = dense_optimizer(name, fused_params, lr=1e-2, weight_decay=1e-3)
    plain = DENSE_OPTIMIZERS[name](plain_params, lr=1e-2, weight_decay=1e-3)
    assert fused.defaults["fused"] and not plain.defaults.get("fused")
    gen = torch.Generator().manual_seed(1)
    for _ in range(5):
        for a, b in zip(fused_params, plain_params, strict=True):
            a.grad = torch.randn(a.shape, generator=gen)
            b.grad = a.grad.clone()
        fused.step()
        plain.step()
    for a, b, start in zip(fused_params, plain_params, _params(0), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
        assert (a - start).abs().min() > 0  # every entry moved
    # a checkpoint of one form loads into the other
    plain.load_state_dict(fused.state_dict())


def test_parameters_without_a_fused_kernel_get_the_default_form() -> None:
    opt = dense_optimizer("adam", _params(0, torch.complex64), lr=1e-3)
    assert not opt.defaults["fused"]
    assert not dense_optimizer("adagrad", _params(0, torch.complex64), lr=1e-3).defaults["fused"]


def test_the_trainers_dense_optimizer_is_fused_on_the_cpu() -> None:
    from autorec.data import load_dataset
    from autorec.presets import preset
    from autorec.train.trainer import TrainConfig, Trainer

    data = load_dataset("synthetic", preset="tiny", num_samples=600)
    trainer = Trainer(preset("dlrm", data.schema), data, TrainConfig(batch_size=64, progress=False))
    adam = [g for g in trainer.optimizer.param_groups if "betas" in g]  # the dense parts' groups
    assert adam and all(g["fused"] for g in adam), trainer.optimizer.param_groups
