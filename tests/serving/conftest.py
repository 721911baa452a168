import pytest

from autorec.data import load_dataset
from autorec.export import export_trained
from autorec.presets import preset
from autorec.train.trainer import TrainConfig, Trainer


@pytest.fixture(scope="session")
def movielens():
    return load_dataset("movielens100k")


@pytest.fixture(scope="session")
def compiled_export(tmp_path_factory, movielens):
    """A DLRM trained for 20 steps on MovieLens-100K, exported with its AOTInductor package
    (one compile, some 20-40 s, shared by every test here)."""
    trainer = Trainer(preset("dlrm", movielens.schema, dim=8), movielens,
                      TrainConfig(epochs=1, max_steps_per_epoch=20, batch_size=256, progress=False))
    result = trainer.fit()
    return export_trained(trainer, tmp_path_factory.mktemp("serve") / "dlrm", metrics=result.to_dict(),
                          retrain_command="autorec train --arch dlrm", compile=True)
