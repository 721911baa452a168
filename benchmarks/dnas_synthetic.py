"""Which blocks the supernet picks on planted 2nd/3rd-order teachers, and the derived model's AUC
against the presets trained with the same budget.

    .venv/bin/python benchmarks/dnas_synthetic.py --data order2
    .venv/bin/python benchmarks/dnas_synthetic.py --data order3 --epochs 0   # the supernet alone
    # single-path one-shot: uniform paths (no architecture step), chosen by validation AUC
    .venv/bin/python benchmarks/dnas_synthetic.py --data order3 --warmup 4000 --selection validation
    # any other SupernetConfig field: soft architecture steps on single-path weight steps
    .venv/bin/python benchmarks/dnas_synthetic.py --data order3 --opt hard=false --opt weight_hard=true

Prints the final kind probabilities per layer, the derived layers, and test AUCs (derived,
presets, Bayes), then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from typing import Any

from autorec.cli import parse_options
from autorec.data import load_dataset
from autorec.presets import preset
from autorec.space import SPACES_DIR, SearchSpace
from autorec.supernet import SupernetConfig, SupernetSearch
from autorec.train.trainer import TrainConfig, Trainer

PAIRWISE = ("dlrm", "dcnv2")  # what a 2nd-order teacher should make the supernet pick
HIGHER = ("wukong", "dhen")  # what a 3rd-order teacher should


def run(data: str, seed: int = 0, space: str = "quickstart", dim: int = 16, steps: int = 4000,
        warmup: int = 2000, batch_size: int = 512, epochs: int = 8, patience: int = 2,
        presets: tuple[str, ...] = ("dlrm", "dcnv2", "wukong", "dhen"), selection: str = "argmax",
        rescale: bool = True, supernet: dict[str, Any] | None = None, **data_options: Any) -> dict:
    dataset = load_dataset("synthetic", preset=data, seed=seed, **data_options)
    loaded = SearchSpace.load(space)
    t0 = time.perf_counter()
    search = SupernetSearch(loaded, dataset, dim, loaded.dense_arch[0], loaded.over_arch[0],
                            SupernetConfig(steps=steps, warmup_steps=warmup, batch_size=batch_size,
                                           seed=seed, selection=selection,
                                           rescale=rescale, **(supernet or {})))
    result = search.fit()
    supernet_s = time.perf_counter() - t0
    models = {"derived": result.spec, **{name: preset(name, dataset.schema, dim=dim) for name in presets}}
    rows = {}
    for name, spec in models.items() if epochs else ():  # epochs 0: only which kinds it picks
        train = TrainConfig(epochs=epochs, batch_size=1024, seed=seed, patience=patience, progress=False)
        t1 = time.perf_counter()
        fit = Trainer(spec, dataset, train).fit()
        rows[name] = {"test_auc": fit.test["auc"], "val_auc": fit.val["auc"],
                      "seconds": time.perf_counter() - t1}
    final = [probs[-1] for probs in result.arch_probs]
    return {"data": data, "options": data_options, "seed": seed, "space": space, "steps": steps,
            "bayes_test_auc": dataset.bayes_auc("test"), "kind_probs": final,
            "derived_layers": [layer.kind for layer in result.spec.layers], "arch": result.spec.to_dict(),
            "selection": selection, "rescale": rescale, "supernet_options": supernet or {},
            "argmax_layers": [layer.kind for layer in result.argmax_spec.layers],
            "scored_paths": result.selection, "selection_seconds": result.selection_seconds,
            "supernet_seconds": supernet_s, "step_seconds": result.step_seconds, "models": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", default="order3", help="synthetic preset: order2, order3")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--space", default=str(SPACES_DIR / "quickstart.yaml"))
    parser.add_argument("--dim", type=int, default=16)
    parser.add_argument("--steps", type=int, default=4000)
    parser.add_argument("--warmup", type=int, default=2000)
    parser.add_argument("--epochs", type=int, default=8, help="0: only run the supernet")
    parser.add_argument("--presets", default="dlrm,dcnv2,wukong,dhen")
    parser.add_argument("--selection", default="argmax", help="argmax or validation (SupernetConfig)")
    parser.add_argument("--no-rescale", action="store_true",
                        help="no RMS rescale of dlrm/dcnv2 outputs in the supernet (SupernetConfig.rescale)")
    parser.add_argument("--data-opt", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--opt", action="append", default=[], metavar="KEY=VALUE",
                        help="a SupernetConfig field, e.g. hard=false, weight_hard=true, arch_every=4")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    out = run(args.data, args.seed, args.space, args.dim, args.steps, args.warmup, epochs=args.epochs,
              presets=tuple(p for p in args.presets.split(",") if p), selection=args.selection,
              rescale=not args.no_rescale, supernet=parse_options(args.opt, "--opt"),
              **parse_options(args.data_opt))
    print(f"synthetic {out['data']} (seed {out['seed']}): Bayes test AUC {out['bayes_test_auc']:.4f}; "
          f"supernet {out['steps']} steps in {out['supernet_seconds']:.0f} s")
    for i, probs in enumerate(out["kind_probs"]):
        ranked = sorted(probs.items(), key=lambda kv: -kv[1])
        print(f"layer {i}: " + ", ".join(f"{k} {p:.2f}" for k, p in ranked))
    for path in out["scored_paths"]:
        print(f"  scored: layer {path['layer']} {path['kind']} {path['fields']}: "
              f"val AUC {path['val_auc']:.4f}")
    print(f"derived layers ({out['selection']}): {out['derived_layers']}; argmax: {out['argmax_layers']}")
    for name, row in out["models"].items():
        print(f"  {name}: test AUC {row['test_auc']:.4f} ({row['seconds']:.0f} s)")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
