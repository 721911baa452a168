"""From a study to a model: the trials to export, their weights, and the command that retrains one.

An exported trial is the plain model of its best checkpoint (of its full training, when the study
retrained it in full: :mod:`autorec.study.final`) with its ArchSpec, its model card
(metrics, costs, the retrain command) and, for a growth trial, the schedule beside ``arch.json``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from autorec.study.config import StudyConfig
from autorec.study.final import FINAL_ATTR, validation_key
from autorec.study.results import select_trials, trial_arch
from autorec.study.storage import load_study
from autorec.study.trial import TrialRunner


def retrain_command(config: StudyConfig, arch_path: Path, epochs: int | None = None) -> str:
    """The `autorec train` command line that retrains ``arch_path`` on the study's data."""
    parts = ["autorec", "train", "--data", config.data.name, "--arch", str(arch_path),
             "--seed", str(config.seed), "--epochs", str(epochs or max(10, config.budget.epochs)),
             "--batch-size", str(config.budget.batch_size)]
    if config.data.path:
        parts += ["--data-path", config.data.path]
    for key, value in config.data.options.items():
        parts += ["--data-opt", f"{key}={json.dumps(value) if not isinstance(value, str) else value}"]
    return " ".join(parts)


def export_trials(config: StudyConfig, out_dir: Path, trial: int | None = None, best: int = 1,
                  log: Callable[[str], None] = print, compile: bool = False) -> list[Path]:
    """Export trials of the study (weights from their best checkpoint) into ``out_dir``.

    One trial goes to ``out_dir`` itself; several go to ``out_dir/trial-<N>``. ``compile`` also
    writes each program compiled by AOTInductor (``model.aoti.pt2``), for serving.
    """
    from autorec.export import export_trained
    from autorec.train.trainer import Trainer

    study = load_study(config)
    finals: dict[str, dict] = study.user_attrs.get(FINAL_ATTR, {})
    chosen = select_trials(study, trial, best)
    if trial is None and finals:  # the trials retrained in full come first, best validation first
        key = validation_key(config)
        order = sorted(finals, key=lambda n: key(finals[n]))
        by_number = {t.number: t for t in study.get_trials(deepcopy=False)}
        chosen = [by_number[int(n)] for n in order][:best]
    runner = TrialRunner(config)
    written = []
    for t in chosen:
        target = out_dir if len(chosen) == 1 else out_dir / f"trial-{t.number}"
        full = finals.get(str(t.number))  # its full training's weights and metrics, if any
        checkpoint = full["checkpoint"] if full else t.user_attrs.get("checkpoint")
        if not checkpoint or not Path(checkpoint).is_dir():
            raise ValueError(f"trial {t.number}: its checkpoint {checkpoint} is missing")
        trainer = Trainer(trial_arch(t), runner.dataset, runner.train_config(None))
        trainer.load_checkpoint(checkpoint, optimizer=False)
        metrics = {**full, "full_training": True} if full else t.user_attrs["metrics"]
        export_trained(trainer, target, metrics=metrics, costs=t.user_attrs.get("costs"),
                       retrain_command=retrain_command(config, target / "arch.json"), compile=compile)
        growth = t.user_attrs.get("growth")
        if isinstance(growth, dict) and growth.get("best"):  # the schedule lives beside arch.json
            from autorec.growth.schedule import GrowthSchedule

            GrowthSchedule.from_dict(growth["best"]["schedule"]).save(target / "schedule.json")
        log(f"trial {t.number} -> {target}")
        written.append(target)
    return written

