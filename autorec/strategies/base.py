"""The one base class every search strategy implements.

A strategy turns an Optuna trial into an ArchSpec. Most strategies differ only in the Optuna
sampler that picks the space's parameters; DNAS (a supernet run per trial) overrides
:meth:`Strategy.propose` and returns its derived ArchSpec the same way.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import ConfigDict, validate_call

if TYPE_CHECKING:
    import optuna

    from autorec.arch import ArchSpec
    from autorec.data import RecDataset
    from autorec.data.schema import Schema
    from autorec.space import SearchSpace


# A strategy's options are the keyword arguments of its ``__init__``; decorated with this, their
# type hints are checked (strictly, as YAML gives them) when it is built, so a wrong option type in
# a study file fails on load, as one line naming the option, not in the middle of a study.
checked_options = validate_call(config=ConfigDict(strict=True, arbitrary_types_allowed=True))


class Strategy(ABC):
    """Proposes architectures from a SearchSpace, one per Optuna trial.

    Args:
        seed: makes the sampler's choices reproducible.
        options: strategy-specific settings from the study file (unknown ones are errors).
    """

    name: ClassVar[str]
    multi_objective: ClassVar[bool] = True  # whether it can optimise several objectives
    uses_space: ClassVar[bool] = True  # False: it builds its architectures without a search space

    def __init__(self, seed: int = 0, **options: Any) -> None:
        if options:
            raise ValueError(f"strategy {self.name!r}: unknown options {sorted(options)}")
        self.seed = seed

    @abstractmethod
    def sampler(self, num_objectives: int) -> optuna.samplers.BaseSampler:
        """The Optuna sampler this strategy searches with."""

    def propose(self, trial: optuna.Trial, space: SearchSpace, schema: Schema) -> ArchSpec:
        """The architecture to evaluate in ``trial``."""
        return space.suggest(trial, schema)

    def bind(self, dataset: RecDataset) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Give the strategy the study's data (DNAS trains a supernet on it); others ignore it."""

    def bind_training(self, recipe: Any) -> None:  # noqa: B027 - optional hook, as bind
        """Give the strategy the study's training recipe (a TrainConfig; growth searches its
        schedules under it); others ignore it."""

    def bound_dataset(self, schema: Schema, why: str) -> RecDataset:
        """The dataset :meth:`bind` gave a strategy that trains on the study's data (``why`` says
        what it trains); a clear error if none was bound or it has another schema."""
        dataset = getattr(self, "dataset", None)
        if dataset is None:
            raise ValueError(f"strategy {self.name!r} {why} on the study's data: "
                             "call bind(dataset) first")
        if dataset.schema != schema:
            raise ValueError(f"strategy {self.name!r}: the bound dataset {dataset.name!r} has another "
                             "schema than the one proposed for")
        return dataset

    # Whether a proposal is itself costly (a supernet or schedule search per trial): then a trial
    # that reuses an earlier training still uses the budget (autorec.study.reuse).
    costly_proposals = False

    def warm_starts(self, trial: optuna.Trial) -> bool:
        """Whether ``trial``'s training starts from weights the strategy holds (asked after
        :meth:`propose`): such a training is its own, never taken from or given to another trial."""
        return False

    def train_overrides(self, trial: optuna.Trial, batch_size: int) -> dict[str, Any]:
        """Fields of ``trial``'s :class:`~autorec.train.trainer.TrainConfig` that differ from the
        study budget's (asked after :meth:`propose`; ``batch_size``: the budget's): a scaling
        ladder's data budget per rung. None by default."""
        return {}

    def requeue_lost(self, study: optuna.Study) -> list[dict[str, Any]]:
        """Queue again the proposals a resumed study would otherwise never make (called after
        interrupted trials are recovered); returns the parameters queued. None by default."""
        return []

    def prepare_trainer(self, trial: optuna.Trial, trainer: Any) -> None:  # noqa: B027 - as bind
        """Called with the trainer of ``trial``'s proposal before it trains (DNAS warm start)."""
