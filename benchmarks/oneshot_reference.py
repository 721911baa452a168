"""Issue 20's benchmark when TPE's studies are gone: its recorded figures, and a reference training.

The TPE studies are the benchmark's costliest part (hours) and live in ``~/.cache``, which a new
machine may not keep. ``report --tpe-record FILE`` then takes TPE's figures from an earlier report
of this benchmark (flat numbers, with the machine and commit they were measured on), and the
training-equivalent is measured again now, on this machine, by :func:`sampled_reference`: the
one-shot study's architectures drawn uniformly from the space for Kendall's tau, the one of median
training FLOPs trained on TPE's trial budget. (The TPE study's own reference, its trial of median
duration, cannot be found without the study.)

Two readings of the issue's training-equivalent ("one full training of the median architecture")
are measured: on the trial budget (one TPE trial: what every report so far divided by) and, with
``final_epochs``, on the final-training budget that both methods' winners get (``--final-epochs``
epochs, patience 2: the "full training" of the benchmark's own wording).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.results_file import read_json

if TYPE_CHECKING:
    import optuna

    from autorec.study import StudyConfig

RECORDED_TPE_KEYS = ("tpe_best_test_auc", "tpe_wall_s", "tpe_stage", "median_training_s")


def tpe_record(path: Path | None) -> dict[str, Any] | None:
    """TPE's figures from the report at ``path`` (None: no record asked for). Exits with the file
    and the missing keys named when it is not such a report."""
    if path is None:
        return None
    recorded: dict[str, Any] = read_json(path, dict, "a JSON object", "--tpe-record")
    missing = [key for key in (*RECORDED_TPE_KEYS, "machine", "commit") if key not in recorded]
    if missing:
        raise SystemExit(f"--tpe-record {path}: no {', '.join(missing)}; expected a report of this "
                         "benchmark with TPE's figures (benchmarks/results/oneshot*.json)")
    return recorded


def sampled_reference(loaded: tuple[StudyConfig, optuna.Study] | None, tpe: StudyConfig,
                      final_epochs: int | None = None) -> dict[str, Any]:
    """One training, timed now, of the median-FLOPs architecture among the one-shot study's
    uniform draws from the space (stage ``sample``), on the trial budget of the TPE study file
    ``tpe`` (with ``final_epochs``: on the final-training budget, see the module docstring);
    cached in the one-shot study's ``reference`` (``reference_full``) attribute."""
    if loaded is None:
        raise SystemExit("report: no TPE study and no one-shot study to draw a reference architecture from")
    _, study = loaded
    drawn = sorted((t for t in study.get_trials(deepcopy=False) if t.user_attrs.get("stage") == "sample"),
                   key=lambda t: (t.user_attrs["costs"]["train_flops"], t.number))
    if not drawn:
        raise SystemExit(f"report: {study.study_name} has no architectures drawn from the space (its "
                         "calibration has not run) to take a reference training from")
    median = drawn[len(drawn) // 2]
    attr = "reference" if final_epochs is None else "reference_full"
    cached = study.user_attrs.get(attr)
    if cached is None or cached.get("architecture") != median.number or cached.get("epochs") != final_epochs:
        cached = {"architecture": median.number, "epochs": final_epochs,
                  "seconds": timed_training(tpe, median.user_attrs["arch"], final_epochs)}
        study.set_user_attr(attr, cached)
    return cached


def timed_training(config: StudyConfig, arch: dict[str, Any], final_epochs: int | None = None) -> float:
    """Seconds of one training of ``arch`` (an ArchSpec dict) on ``config``'s trial budget, now:
    the training-equivalent both references measure; with ``final_epochs``, on the final
    training's budget instead (those epochs, patience 2, as TPE's winner is trained)."""
    from autorec.arch import ArchSpec
    from autorec.study import TrialRunner
    from autorec.train.trainer import Trainer

    runner = TrialRunner(config)
    train_config = final_budget(runner.train_config(None), final_epochs)
    start = time.perf_counter()
    Trainer(ArchSpec.from_dict(arch), runner.dataset, train_config).fit()
    return time.perf_counter() - start


def final_budget(train_config: Any, final_epochs: int | None) -> Any:
    """A trial's training settings, or with ``final_epochs`` those of the benchmark's final
    training: that many epochs of every step (a one-shot study's re-rank cap dropped), patience 2,
    no checkpoints (what ``tpe_figures`` trains)."""
    if final_epochs is None:
        return train_config
    import dataclasses

    return dataclasses.replace(train_config, epochs=final_epochs, patience=2, checkpoint_dir=None,
                               max_steps_per_epoch=None)
