"""One trial in a worker process: propose an architecture, cost it, train it, record it.

:class:`TrialRunner` is the objective Optuna calls (the local runner) and the part of a trial
the Ray runner reuses: it loads the search space, the strategy and the dataset once per worker,
and records on each trial its ArchSpec (a user attribute and an Optuna artifact), its analytic
costs, its metrics and its best checkpoint.
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path
from typing import Any

import optuna

from autorec.arch import ArchSpec
from autorec.study.config import StudyConfig
from autorec.study.recovery import WORKER_ATTR, adopt_cut_training, mark_interrupted, worker_mark
from autorec.study.reuse import TRAINED_KEY_ATTR, reuse, trained_twin, training_key

OVERRIDES_ATTR = "train_overrides"  # trial user attr: what the strategy changed of the budget's training

FAIL_KIND_ATTR = "fail_kind"  # trial user attr: what kind of failure ended it (failure_kind)


def failure_kind(exc: BaseException) -> str:
    """What ended a failed trial: ``diverged`` (NaN or infinite loss), ``time_limit`` (past
    ``budget.trial_time_limit_s``), ``out_of_memory`` (an allocation failed) or ``error``."""
    from autorec.train.records import TrainingDiverged, TrainingTimeLimit

    if isinstance(exc, TrainingDiverged):
        return "diverged"
    if isinstance(exc, TrainingTimeLimit):
        return "time_limit"
    text = str(exc).lower()
    if isinstance(exc, MemoryError) or "out of memory" in text or "can't allocate memory" in text:
        return "out_of_memory"  # torch's CPU allocator raises a RuntimeError; CUDA's OutOfMemoryError
    return "error"


def cost_summary(spec: ArchSpec) -> dict[str, float]:
    """The analytic costs a study records and optimises (per-sample FLOPs and seconds; bytes)."""
    from autorec.costs import arch_cost

    return arch_cost(spec).summary()


class TrialRunner:
    """The objective one worker process runs: propose, cost, train, record."""

    def __init__(self, config: StudyConfig) -> None:
        from autorec.data import load_dataset
        from autorec.space import SearchSpace
        from autorec.strategies import make_strategy

        self.config = config
        self.space = SearchSpace.load(config.space) if config.space is not None else None
        self.strategy = make_strategy(config.strategy.name, config.seed, **config.strategy.options)
        self.dataset = load_dataset(config.data.name, path=config.data.path, seed=config.data.seed,
                                    **config.data.options)
        self.strategy.bind(self.dataset)
        self.strategy.bind_training(self.train_config(None))
        self.artifacts = optuna.artifacts.FileSystemArtifactStore(str(self.artifact_dir()))

    def artifact_dir(self) -> Path:
        path = self.config.directory / "artifacts"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def _latency(self, trainer: Any) -> float:
        """Median seconds of one inference batch (the study's batch size) of the trained model."""
        from autorec.costs import measure_latency

        batch = next(iter(self.dataset.batches("val", self.config.budget.batch_size, shuffle=False)))
        return measure_latency(trainer.model, batch, repeats=10)

    def train_config(self, checkpoint_dir: Path | None) -> Any:
        from autorec.train.trainer import TrainConfig

        b = self.config.budget
        return TrainConfig(epochs=b.epochs, batch_size=b.batch_size, seed=self.config.seed,
                           patience=b.patience, max_steps_per_epoch=b.max_steps_per_epoch, monitor=b.monitor,
                           checkpoint_dir=str(checkpoint_dir) if checkpoint_dir else None,
                           progress=False, **self.config.train.overrides())

    def training_settings(self) -> dict[str, Any]:
        """What decides a trial's training besides its architecture (the reuse key's part)."""
        from dataclasses import asdict

        settings = asdict(self.train_config(None))
        settings.pop("progress")
        return {**settings, "data": self.config.data.model_dump(mode="json"),
                "latency": "latency_ms" in self.config.objectives}

    def __call__(self, trial: optuna.Trial) -> float | list[float]:
        from autorec.train.checkpoints import drop_progress
        from autorec.train.trainer import Trainer

        trial.set_user_attr(WORKER_ATTR, worker_mark())
        spec = self.strategy.propose(trial, self.space, self.dataset.schema)
        spec = spec.replace(name=f"{self.config.name}-trial{trial.number}")
        trial.set_user_attr("arch", spec.to_dict())
        with tempfile.TemporaryDirectory() as tmp:
            arch_path = Path(tmp) / "arch.json"
            spec.save(arch_path)
            optuna.artifacts.upload_artifact(artifact_store=self.artifacts, file_path=str(arch_path),
                                             study_or_trial=trial, mimetype="application/json")
        costs = cost_summary(spec)
        trial.set_user_attr("costs", costs)
        single = len(self.config.objectives) == 1
        overrides = self.strategy.train_overrides(trial, self.config.budget.batch_size)
        if overrides:
            trial.set_user_attr(OVERRIDES_ATTR, overrides)
        if not self.strategy.warm_starts(trial):  # a warm start is its own training
            key = training_key(spec, {**self.training_settings(), **overrides})
            twin = trained_twin(trial.study, key)
            if twin is not None:
                values = reuse(trial, twin, free=not self.strategy.costly_proposals)
                return values[0] if single else values
            trial.set_user_attr(TRAINED_KEY_ATTR, key)

        def report(record: Any) -> None:
            if not single:  # Optuna reports (and prunes) single-objective trials only
                return
            trial.report(record.val["auc"], record.epoch)
            if trial.should_prune():
                trial.set_user_attr("pruned_at_epoch", record.epoch)
                raise optuna.TrialPruned(f"val AUC {record.val['auc']:.4f} at epoch {record.epoch}")

        checkpoint = self.config.directory / "trials" / str(trial.number)
        try:
            resume = adopt_cut_training(trial, checkpoint)  # a retry goes on from the cut trial's checkpoint
            limited = dataclasses.replace(self.train_config(checkpoint), resume=resume,
                                          time_limit_s=self.config.budget.trial_time_limit_s, **overrides)
            trainer = Trainer(spec, self.dataset, limited, on_epoch=report)
            self.strategy.prepare_trainer(trial, trainer)
            result = trainer.fit()
            if "latency_ms" in self.config.objectives:
                costs["latency_ms"] = 1e3 * self._latency(trainer)
                trial.set_user_attr("costs", costs)
        except optuna.TrialPruned:
            raise
        except KeyboardInterrupt:  # Ctrl-C: Optuna fails the trial; it is retried on the next run
            mark_interrupted(trial, "interrupted: Ctrl-C")
            raise
        except Exception as exc:
            trial.set_user_attr("fail_reason", f"{type(exc).__name__}: {exc}")
            trial.set_user_attr(FAIL_KIND_ATTR, failure_kind(exc))
            raise
        trial.set_user_attr("metrics", {"val": result.val, "test": result.test,
                                        "best_epoch": result.best_epoch,
                                        "train_samples_per_s": result.samples_per_s,
                                        "data_wait_share": result.data_wait_share,
                                        "train_samples": result.train_samples,
                                        "resumed_from": result.resumed_from,
                                        "seconds": result.seconds})
        trial.set_user_attr("checkpoint", str(checkpoint / "best"))
        drop_progress(checkpoint)  # a finished trial keeps its best checkpoint only
        values = {"val_auc": result.val["auc"], "val_logloss": result.val["logloss"], **costs}
        out = [float(values[o]) for o in self.config.objectives]
        return out[0] if single else out

