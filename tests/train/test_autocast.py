"""``train.autocast: bf16``: the forward's products run in bf16 while weights, tables and the
loss stay fp32; a model trains to the fp32 one's quality; the setting reaches the trainer from a
study file and the CLI, and a wrong value is refused by name."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest
import torch

from autorec.config.train import Autocast, TrainSettings
from autorec.data import load_dataset
from autorec.presets import preset
from autorec.study.config import TrialTraining
from autorec.train.autocast import AUTOCAST, forward_autocast, native_bf16
from autorec.train.trainer import TrainConfig, Trainer

DATA = load_dataset("synthetic", preset="tiny", num_samples=1200)


def _trainer(name: str, autocast: str) -> Trainer:
    return Trainer(preset(name, DATA.schema), DATA,
                   TrainConfig(batch_size=128, seed=0, progress=False, autocast=autocast, epochs=3))


@pytest.mark.parametrize("name", ["dlrm", "dcnv2", "wukong", "dhen"])
def test_a_bf16_step_is_the_fp32_step_to_bf16_rounding(name: str) -> None:
    fp32, bf16 = _trainer(name, "off"), _trainer(name, "bf16")
    batch = next(iter(fp32._batches("train", 128, False)))
    exact, _ = fp32._step_loss(batch)
    rounded, _ = bf16._step_loss(batch)
    assert rounded.dtype == torch.float32  # the loss is taken from fp32 logits
    assert rounded.item() != exact.item()  # the products did run in bf16
    torch.testing.assert_close(rounded, exact, rtol=2e-2, atol=0)
    rounded.backward()
    grads = [p.grad for p in bf16.model.parameters() if p.grad is not None]
    assert grads and all(g.dtype == torch.float32 and torch.isfinite(g).all() for g in grads)


def test_a_model_trained_in_bf16_reaches_the_fp32_models_auc(planted_data) -> None:
    """On the planted clicks the fp32 model's test AUC moves by 0.012 over seeds 0-2 and the bf16
    one stays within 0.004 of it at each seed."""
    auc = {mode: Trainer(preset("dlrm", planted_data.schema), planted_data, TrainConfig(
        batch_size=128, seed=0, progress=False, autocast=mode, epochs=3)).fit().test["auc"]
           for mode in AUTOCAST}
    assert auc["off"] > 0.9
    assert abs(auc["bf16"] - auc["off"]) < 0.01


def test_forward_autocast_casts_products_only_under_bf16() -> None:
    x, layer = torch.ones(2, 3), torch.nn.Linear(3, 2)
    with forward_autocast("bf16", torch.device("cpu")):
        assert layer(x).dtype == torch.bfloat16
    with forward_autocast("off", torch.device("cpu")):
        assert layer(x).dtype == torch.float32
    with pytest.raises(ValueError, match="autocast: expected one of off, bf16, got 'fp8'"):
        forward_autocast("fp8", torch.device("cpu"))


def test_the_setting_reaches_the_trainer_from_a_study_and_the_cli() -> None:
    assert set(Autocast.__args__) == set(AUTOCAST)
    assert TrialTraining(autocast="bf16").overrides() == {"autocast": "bf16"}
    assert TrainSettings(autocast="bf16").to_kwargs()["autocast"] == "bf16"
    assert TrainConfig().autocast == "off"
    with pytest.raises(ValueError, match="autocast: expected one of off, bf16, got 'fp16'"):
        TrainConfig(autocast="fp16")
    with pytest.raises(ValueError, match="autocast"):
        TrialTraining(autocast="fp16")


@pytest.mark.skipif(platform.machine() != "x86_64" or not Path("/proc/cpuinfo").exists(),
                    reason="reads the x86 CPU flags from /proc/cpuinfo")
def test_native_bf16_is_the_cpus_avx512_bf16_or_amx_flag() -> None:
    flags = set(Path("/proc/cpuinfo").read_text().split())
    assert native_bf16("cpu") == bool({"avx512_bf16", "amx_tile"} & flags)
    assert native_bf16("meta") is False
