"""Issue 23's serving figures: eager, exported, AOTInductor-compiled and dynamic-int8 forms.

    .venv/bin/python -m benchmarks.serving [--presets dlrm,dcnv2,wukong,dhen] [--samples 300000]
    # -> the serving keys of benchmarks/results/claims.json

Each preset is trained for one epoch on the Criteo-like ``scale`` workload (26 tables up to 10^6
rows, 13 dense features; ``--samples`` rows, sequential 80/10/10), exported with its AOTInductor
package (``export_trained(..., compile=True)``, as ``autorec export --compile`` does), and served
by :func:`autorec.serving.serve_bench`: single-stream requests of real validation rows at batch
1, 64 and 512, every call timed, after a warm-up. The int8 form's quality is its validation AUC
against the eager form's.

Keys (flat): ``<preset>_<form>_b<B>_p50_ms`` / ``_p99_ms`` / ``_samples_per_s``,
``<preset>_compiled_p50_ratio`` (compiled p50 / eager p50 at batch 64), ``<preset>_int8_auc_drop``,
and the headline ``compiled_p50_ratio`` (the worst preset's), ``compiled_p99_ms`` (DLRM at batch
64), ``int8_auc_drop`` (the worst preset's), with the machine and commit. Nothing else may run
on the machine while it measures.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

from autorec.data import load_dataset
from autorec.export import export_trained
from autorec.presets import preset
from autorec.serving import serve_bench
from autorec.train.trainer import TrainConfig, Trainer
from benchmarks.results_file import merge_results

ROOT = Path(__file__).resolve().parents[1]
BATCHES = (1, 64, 512)


def preset_figures(name: str, data: Any, out: Path, repeats: int) -> dict[str, float]:
    start = time.perf_counter()
    trainer = Trainer(preset(name, data.schema), data, TrainConfig(epochs=1, batch_size=1024, progress=False))
    result = trainer.fit()
    folder = export_trained(trainer, out / name, metrics=result.to_dict(),
                            retrain_command=f"autorec train --arch {name}", compile=True)
    print(f"{name}: trained and compiled in {time.perf_counter() - start:.0f} s", flush=True)
    bench = serve_bench(folder, data, BATCHES, repeats=repeats)
    row: dict[str, float] = {}
    for form, sizes in bench["latency"].items():
        for b in BATCHES:
            lat = sizes[f"batch_{b}"]
            for key in ("p50_ms", "p99_ms", "samples_per_s"):
                row[f"{name}_{form}_b{b}_{key}"] = lat[key]
    eager_p50 = bench["latency"]["eager"]["batch_64"]["p50_ms"]
    for form in ("compiled", "exported", "int8"):
        row[f"{name}_{form}_p50_ratio"] = bench["latency"][form]["batch_64"]["p50_ms"] / eager_p50
    row[f"{name}_int8_auc_drop"] = -bench["quality"]["int8"]["auc_change"]
    row[f"{name}_eager_val_auc"] = bench["quality"]["eager"]["auc"]
    row["threads"] = bench["threads"]
    print(f"{name}: compiled/eager p50 at 64 = {row[f'{name}_compiled_p50_ratio']:.3f}, int8 AUC drop "
          f"{row[f'{name}_int8_auc_drop']:.5f}", flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presets", default="dlrm,dcnv2,wukong,dhen")
    parser.add_argument("--samples", type=int, default=300_000)
    parser.add_argument("--repeats", type=int, default=300)
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "claims.json")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    data = load_dataset("synthetic", seed=0, preset="scale", num_samples=args.samples, split="sequential")
    presets = args.presets.split(",")
    row: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="autorec-serving-") as out:
        for name in presets:
            row.update(preset_figures(name, data, Path(out), args.repeats))
    row["compiled_p50_ratio"] = max(row[f"{p}_compiled_p50_ratio"] for p in presets)
    row["int8_auc_drop"] = max(row[f"{p}_int8_auc_drop"] for p in presets)
    if "dlrm" in presets:
        row["compiled_p99_ms"] = row["dlrm_compiled_b64_p99_ms"]
    merge_results(args.json, {**row, "serving_samples": args.samples, "serving_presets": ",".join(presets)},
                  prefix="serving")
    print(json.dumps({k: v for k, v in row.items() if "_b" not in k}, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
