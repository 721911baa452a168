"""Issue 21's benchmark: scaling ladders of wukong, dlrm and dcnv2 (dhen with ``--families``) on
the ``scale`` workload, each family's law ``L(C) = E + A C^-alpha`` fitted with E the Bayes
logloss, and the largest rung predicted from the others.

    .venv/bin/python -m benchmarks.scaling                     # run (or resume) the ladders, fit
    .venv/bin/python -m benchmarks.scaling --families wukong,dlrm,dcnv2,dhen --rungs 5
    .venv/bin/python -m benchmarks.scaling --fit-only          # refit what has finished

Data budget: ``--samples FIRST,LAST`` (default 250k to 2M) grows it with the rung,
geometrically from FIRST training samples at rung 0 to LAST at the top rung (the ladder's
``samples`` option); ``--samples N`` gives every rung the same N (fixed samples: the rungs then
differ in model size only). A rung's compute is its training FLOPs per sample times the samples
it trained on. The study is ``scaling`` in ``--out`` (default
``~/.cache/autorec-bench/scaling_grow``, outside the work tree): it resumes where a run was cut,
across sessions, a cut rung from its last checkpoint (``--checkpoint-every`` steps). The flat numbers go to
``benchmarks/results/scaling.json`` with the machine and the commit; the page and the full fits
to ``--out``/scaling/.
"""

from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path

import yaml

from autorec.cli import main as autorec
from benchmarks.results_file import commit, machine

ROOT = Path(__file__).resolve().parents[1]


def study_file(args: argparse.Namespace) -> Path:
    """The ladder study of the benchmark, written to ``--out``/study.yaml."""
    config = {
        "name": "scaling",
        "data": {"name": "synthetic", "options": {"preset": "scale"}, "seed": 0},
        "strategy": {"name": "ladder",
                     "options": {"families": args.families.split(","), "rungs": args.rungs, "dim": args.dim,
                                 "samples": list(args.samples)}},
        "objectives": ["val_auc"],
        "budget": {"epochs": 1, "batch_size": args.batch_size},
        # dense weight decay 0: the recipe the recorded ladders (benchmarks/results/scaling*.json)
        # and the GPU ladder (scaling_gpu) train under, from before its default became 1e-4
        "train": {"checkpoint_every": args.checkpoint_every, "dense_weight_decay": 0.0},
        "pruner": "none",
        "seed": 0,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "study.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def run(args: argparse.Namespace) -> dict:
    path = study_file(args)
    command = ["scale", str(path), "--bootstrap", str(args.bootstrap), "--out", str(args.out / "scaling")]
    code = autorec(command + (["--fit-only"] if args.fit_only else []))
    if code:
        raise SystemExit(code)
    fits = json.loads((args.out / "scaling" / "scaling.json").read_text())
    flat = {k: v for k, v in fits.items() if not isinstance(v, (dict, list))}
    return {**flat, **rung_figures(fits), "samples_first_rung": args.samples[0],
            "samples_top_rung": args.samples[1],
            "batch_size": args.batch_size, "dim": args.dim,
            "machine": machine(), "commit": commit()}


def rung_figures(fits: dict) -> dict[str, float]:
    """Flat per-rung figures (``<family>_r<k>_test_logloss`` and ``_test_auc``, ``_mflops`` per
    sample, ``_seconds``), and the held-out check's simplest baseline: the top rung's excess
    logloss predicted as the rung below's (``<family>_holdout_carry_rel_err``, beside the fit's
    ``<family>_holdout_rel_err``)."""
    out: dict[str, float] = {}
    floor = fits.get("bayes_logloss")
    for family, rows in fits.get("rungs", {}).items():
        rows = sorted(rows, key=lambda r: r["rung"])
        for r in rows:
            key = f"{family}_r{r['rung']}"
            out.update({f"{key}_test_logloss": r["logloss"], f"{key}_test_auc": r["auc"],
                        f"{key}_mflops": r["flops"] / 1e6, f"{key}_seconds": r["seconds"]})
        if floor is not None and len(rows) >= 2:
            top, below = rows[-1]["logloss"] - floor, rows[-2]["logloss"] - floor
            out[f"{family}_holdout_carry_rel_err"] = abs(below - top) / top
    return out


def _samples(text: str) -> tuple[int, int]:
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        values = []
    if len(values) not in (1, 2):
        raise argparse.ArgumentTypeError(f"expected N or FIRST,LAST (numbers of samples), got {text!r}")
    return values[0], values[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--families", default="wukong,dlrm,dcnv2")
    parser.add_argument("--rungs", type=int, default=5)
    parser.add_argument("--dim", type=int, default=16, help="embedding width of every rung")
    parser.add_argument("--samples", type=_samples, default=(250_000, 2_000_000),
                        help="FIRST,LAST: the training samples of rung 0 and of the top rung; or N")
    parser.add_argument("--checkpoint-every", type=int, default=100,
                        help="steps between a rung's resumable checkpoints")
    parser.add_argument("--batch-size", type=int, default=2048)
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=Path.home() / ".cache" / "autorec-bench" / "scaling_grow")
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "scaling.json")
    parser.add_argument("--fit-only", action="store_true", help="refit the finished rungs, train nothing")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    record = run(args)
    args.json.write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(record))


if __name__ == "__main__":
    main()
