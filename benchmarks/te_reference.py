"""Issue 20: the training-equivalent under both of its readings, timed now on one machine.

The issue measures a one-shot search in training-equivalents, "wall time / one full training of
the median architecture". Every report so far divided by one training on TPE's *trial* budget (one
epoch, patience 1); the benchmark's own *full* training is the final one that both methods' winners
get (``--final-epochs`` epochs, patience 2). This trains the median-FLOPs architecture of a one-shot
study's uniform draws from the space (``oneshot_reference.sampled_reference``) both ways, back to
back, and records both seconds and their ratio with the machine and commit, so a search's seconds
measured on the same machine can be read under either::

    .venv/bin/python -m benchmarks.te_reference --tag _o3t --seed 0   # -> results/te_reference.json

Both trainings are cached in the study (``reference``, ``reference_full``): a rerun reads them.
"""

from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path

import optuna

from autorec.study import StudyConfig
from benchmarks.oneshot_reference import sampled_reference
from benchmarks.oneshot_vs_tpe import _load, arguments, study_file
from benchmarks.results_file import commit, machine

ROOT = Path(__file__).resolve().parents[1]


def readings(args: argparse.Namespace, seed: int) -> dict[str, float | int | str]:
    """Seconds of the median draw of ``oneshot<tag>_seed<seed>`` on the trial and the final budget."""
    loaded = _load(args, "oneshot", seed)
    if loaded is None:
        raise SystemExit(f"--tag {args.tag} --seed {seed}: no one-shot study under {args.out}")
    tpe = StudyConfig.load(study_file(args, "tpe"))
    trial = sampled_reference(loaded, tpe)
    full = sampled_reference(loaded, tpe, args.final_epochs)
    return {"study": loaded[1].study_name, "architecture": trial["architecture"],
            "trial_budget_s": trial["seconds"], "final_budget_s": full["seconds"],
            "final_epochs": args.final_epochs, "full_over_trial": full["seconds"] / trial["seconds"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tag", required=True, help="the one-shot run's tag, e.g. _o3t")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "te_reference.json")
    own, rest = parser.parse_known_args()
    args = arguments().parse_args(["--stage", "report", "--tag", own.tag, *rest])  # its --out, --final-epochs
    warnings.filterwarnings("ignore")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    row = {**readings(args, own.seed), "machine": machine(), "commit": commit()}
    own.json.parent.mkdir(parents=True, exist_ok=True)
    own.json.write_text(json.dumps(row, indent=1) + "\n")
    print(json.dumps(row, indent=1))


if __name__ == "__main__":
    main()
