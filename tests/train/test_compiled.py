"""``train.compile``: the dense parts compiled in place train as the eager model does, keep their
parameter names (checkpoints), and the setting reaches the trainer from a study file and the CLI."""

from __future__ import annotations

import pytest
import torch

from autorec.config.train import TrainSettings
from autorec.data import load_dataset
from autorec.presets import preset
from autorec.study.config import TrialTraining
from autorec.train.compiled import compile_dense
from autorec.train.trainer import TrainConfig, Trainer

DATA = load_dataset("synthetic", preset="tiny", num_samples=1200)


def _losses(name: str, compiled: bool, steps: int = 4) -> tuple[list[float], Trainer]:
    trainer = Trainer(preset(name, DATA.schema), DATA,
                      TrainConfig(batch_size=128, seed=0, progress=False, compile=compiled))
    batches = trainer._batches("train", 128, True, 0)
    return [trainer.train_step(b)[0] for b, _ in zip(batches, range(steps), strict=False)], trainer


@pytest.mark.slow  # Inductor compiles each model: about half a minute on two cores
@pytest.mark.parametrize("name", ["dlrm", "wukong"])
def test_a_compiled_model_trains_as_the_eager_one(name: str) -> None:
    eager, plain = _losses(name, False)
    compiled, fast = _losses(name, True)
    torch.testing.assert_close(compiled, eager, rtol=1e-4, atol=1e-5)
    assert all(getattr(fast.model.module, part)._compiled_call_impl is not None
               for part in ("layers", "over_arch"))
    assert fast.model.state_dict().keys() == plain.model.state_dict().keys()  # checkpoints unchanged


def test_a_model_without_dense_features_compiles_what_it_has() -> None:
    from autorec.arch import ArchSpec, DotConfig, TableSpec
    from autorec.models import build_model

    table = TableSpec(name="t", features=("f", "g"), num_embeddings=10, dim=4)
    model = build_model(ArchSpec(dim=4, n_dense=0, over_arch=(8,), layers=(DotConfig(),), tables=(table,)))
    assert compile_dense(model) == ["layers", "over_arch"]


def test_the_setting_reaches_the_trainer_from_a_study_and_the_cli() -> None:
    assert TrialTraining(compile=True).overrides() == {"compile": True}
    assert TrainSettings(compile=True).to_kwargs()["compile"] is True
    assert TrainConfig().compile is False
    with pytest.raises(ValueError, match="compile"):
        TrialTraining(compile="fast")
