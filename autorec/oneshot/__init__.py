"""One-shot architecture search that pays for itself: train one supernet, search many candidates
on its inherited weights, re-rank a few by short trainings, train the winner in full.

- :mod:`~autorec.oneshot.fair`: strictly fair single-path sampling (FairNAS);
- :mod:`~autorec.oneshot.train`: the supernet's training, checkpointed and resumable;
- :mod:`~autorec.oneshot.search`: candidates proposed by an Optuna sampler, scored on inherited weights;
- :mod:`~autorec.oneshot.run`: the study's stages (supernet, search, re-rank, final) and Kendall's tau;
- :mod:`~autorec.oneshot.parts`: tau split into the proxy's layers part and its embeddings part.
"""

from autorec.oneshot.fair import fair_paths
from autorec.oneshot.train import OneShotTrainConfig, SupernetTraining, TrainState

__all__ = ["OneShotTrainConfig", "SupernetTraining", "TrainState", "fair_paths"]
