"""``train.autocast: bf16``: the forward's products run in bf16 while weights, tables and the
loss stay fp32; ``train.fp32_matmul: bf16``: fp32 products, forward and backward, at bf16 input
precision. Each trains a model to the fp32 one's quality; the settings reach the trainer from a
study file and the CLI, and a wrong value is refused by name."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest
import torch

from autorec.config.train import Autocast, Fp32Matmul, TrainSettings
from autorec.data import load_dataset
from autorec.presets import preset
from autorec.study.config import TrialTraining
from autorec.train.autocast import AUTOCAST, FP32_MATMUL, forward_autocast, fp32_matmul, native_bf16
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


def test_fp32_matmul_sets_the_backends_precision_inside_and_restores_it() -> None:
    cpu, mkldnn, cuda = torch.device("cpu"), torch.backends.mkldnn.matmul, torch.backends.cuda.matmul
    before = mkldnn.fp32_precision, cuda.fp32_precision
    with fp32_matmul("bf16", cpu):
        assert mkldnn.fp32_precision == "bf16"
    with fp32_matmul("tf32", cpu):
        assert cuda.fp32_precision == "tf32"
    with fp32_matmul("ieee", cpu):
        assert (mkldnn.fp32_precision, cuda.fp32_precision) == before
    with pytest.raises(RuntimeError, match="inside"), fp32_matmul("bf16", cpu):
        raise RuntimeError("inside")
    assert (mkldnn.fp32_precision, cuda.fp32_precision) == before
    with pytest.raises(ValueError, match="fp32_matmul: expected one of ieee, bf16, tf32, got 'fp16'"), \
            fp32_matmul("fp16", cpu):
        pass


def _precision_seen(trainer: Trainer) -> list[str]:
    """The oneDNN fp32 precision in force at every forward and backward of ``trainer``'s over-arch."""
    seen: list[str] = []
    over = trainer.model.module.over_arch
    over.register_forward_hook(lambda *_: seen.append(torch.backends.mkldnn.matmul.fp32_precision))
    over.register_full_backward_hook(lambda *_: seen.append(torch.backends.mkldnn.matmul.fp32_precision))
    return seen


@pytest.mark.parametrize("pipeline", [False, True])
def test_a_bf16_products_step_keeps_fp32_tensors_and_its_setting_to_itself(pipeline: bool) -> None:
    config = dict(batch_size=128, seed=0, progress=False, epochs=1, max_steps_per_epoch=3, pipeline=pipeline)
    ieee = Trainer(preset("dlrm", DATA.schema), DATA, TrainConfig(**config))
    bf16 = Trainer(preset("dlrm", DATA.schema), DATA, TrainConfig(**config, fp32_matmul="bf16"))
    seen = _precision_seen(bf16)
    batch = next(iter(ieee._batches("train", 128, False)))
    with bf16._products():
        rounded, _ = bf16._step_loss(batch)
    exact, _ = ieee._step_loss(batch)
    assert rounded.dtype == torch.float32 and rounded.item() != exact.item()  # the products rounded
    torch.testing.assert_close(rounded, exact, rtol=2e-2, atol=0)
    seen.clear()
    bf16.fit() if pipeline else bf16.train_step(batch)
    assert seen and set(seen) == {"bf16"}  # every forward and backward of the steps, validation too
    assert torch.backends.mkldnn.matmul.fp32_precision != "bf16"  # and none after them
    assert all(p.dtype == torch.float32 for p in bf16.model.parameters())


def test_a_model_trained_with_bf16_products_reaches_the_ieee_models_auc(planted_data) -> None:
    auc = {mode: Trainer(preset("dlrm", planted_data.schema), planted_data, TrainConfig(
        batch_size=128, seed=0, progress=False, fp32_matmul=mode, epochs=3)).fit().test["auc"]
           for mode in ("ieee", "bf16")}
    assert auc["ieee"] > 0.9
    assert abs(auc["bf16"] - auc["ieee"]) < 0.01


def test_fp32_matmul_reaches_the_trainer_from_a_study_and_the_cli() -> None:
    assert set(Fp32Matmul.__args__) == set(FP32_MATMUL)
    assert TrialTraining(fp32_matmul="bf16").overrides() == {"fp32_matmul": "bf16"}
    assert TrainSettings(fp32_matmul="tf32").to_kwargs()["fp32_matmul"] == "tf32"
    assert TrainConfig().fp32_matmul == "ieee"
    with pytest.raises(ValueError, match="fp32_matmul: expected one of ieee, bf16, tf32, got 'bf32'"):
        TrainConfig(fp32_matmul="bf32")
    with pytest.raises(ValueError, match="fp32_matmul"):
        TrialTraining(fp32_matmul="fp8")
