"""Supernet peak memory and step time at scale, against training the largest single architecture.

An 8-layer supernet over 5 kinds (wukong, dhen, dlrm, dcnv2, skip) with a per-feature embedding
width choice, on synthetic data shaped like Criteo (13 dense, 26 tables of ``--rows`` rows).
Peak memory is the process's maximum resident set (ru_maxrss) after the supernet steps; the
reference is the largest architecture the supernet holds (every layer at its widest kind),
trained by the Trainer in a fresh process.

    .venv/bin/python benchmarks/supernet_scale.py --rows 1000000 --steps 30     # the issue's size
    .venv/bin/python benchmarks/supernet_scale.py --rows 1000 --steps 3         # a smoke run
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
import warnings

SPACE = {
    "name": "scale", "dim": [16], "dense_arch": [[64]], "over_arch": [[256, 128]],
    "embedding": {"dim_ratio": [1, 0.5]},
    "layers": {
        "num": {"low": 1, "high": 8}, "kinds": ["wukong", "dhen", "dlrm", "dcnv2", "skip"],
        "wukong": {"n_fm": [8, 16], "n_lcb": [8], "rank": [8], "mlp": [[128]]},
        "dhen": {"modules": [["dot", "dcn"], ["dot", "attention", "dcn"]], "ensemble": ["concat"],
                 "n_out": [4], "num_heads": [2], "dcn_layers": [1]},
        "dlrm": {"n_passthrough": [1], "self_interaction": [False]},
        "dcnv2": {"num_layers": {"low": 1, "high": 2}, "rank": [0]},
    },
}


def _peak_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


def _data(rows: int, samples: int):
    from autorec.data import load_dataset

    return load_dataset("synthetic", preset="criteo_like", rows=rows, num_samples=samples)


def supernet(rows: int, samples: int, steps: int, batch: int) -> dict:
    from autorec.space import SearchSpace
    from autorec.supernet import SupernetConfig, SupernetSearch

    data = _data(rows, samples)
    space = SearchSpace.from_dict(SPACE)
    run = SupernetSearch(space, data, 16, (64,), (256, 128),
                         SupernetConfig(steps=steps, warmup_steps=1, batch_size=batch, record_every=steps))
    params = sum(p.numel() for n, p in run.supernet.named_parameters() if "sparse_arch" not in n)
    result = run.fit()
    return {"layers": len(run.supernet.layers), "dense_params": params, "step_s": result.step_seconds,
            "peak_rss_gib": _peak_gib(), "derived": [layer.kind for layer in result.spec.layers]}


def largest(rows: int, samples: int, steps: int, batch: int) -> dict:
    """The Trainer on the widest single architecture: 8 Wukong layers at n_fm 16 (the kind with
    the most FLOPs here), tables at full width."""
    from autorec.arch import ArchSpec, WukongConfig
    from autorec.presets import tables_for
    from autorec.train.trainer import TrainConfig, Trainer

    data = _data(rows, samples)
    spec = ArchSpec(dim=16, tables=tables_for(data.schema, 16), n_dense=data.schema.n_dense, dense_arch=(64,),
                    layers=(WukongConfig(n_fm=16, n_lcb=8, rank=8, mlp=(128,)),) * 8, over_arch=(256, 128))
    trainer = Trainer(spec, data, TrainConfig(epochs=1, batch_size=batch, progress=False))
    batches = iter(data.batches("train", batch, shuffle=True))
    trainer.train_step(next(batches))
    t0 = time.perf_counter()
    for _ in range(steps):
        trainer.train_step(next(batches))
    return {"step_s": (time.perf_counter() - t0) / steps, "peak_rss_gib": _peak_gib()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--samples", type=int, default=50_000)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch", type=int, default=2048)
    parser.add_argument("--part", choices=("both", "supernet", "largest"), default="both")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    if args.part != "both":  # one measurement per process, so the peaks do not mix
        fn = supernet if args.part == "supernet" else largest
        print(json.dumps(fn(args.rows, args.samples, args.steps, args.batch)))
        return
    out = {}
    for part in ("supernet", "largest"):
        cmd = [sys.executable, __file__, "--part", part, "--rows", str(args.rows), "--samples",
               str(args.samples), "--steps", str(args.steps), "--batch", str(args.batch)]
        lines = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()
        out[part] = json.loads(lines[-1])
    out["step_ratio"] = out["supernet"]["step_s"] / out["largest"]["step_s"]
    layers = out["supernet"]["layers"]
    print(f"26 tables x {args.rows} rows, batch {args.batch}: supernet ({layers} layers x 5 kinds) "
          f"{out['supernet']['step_s']:.3f} s/step (weights + architecture), peak RSS "
          f"{out['supernet']['peak_rss_gib']:.2f} GiB; largest single architecture "
          f"{out['largest']['step_s']:.3f} s/step, peak {out['largest']['peak_rss_gib']:.2f} GiB; "
          f"ratio {out['step_ratio']:.2f}")
    print(json.dumps({"rows": args.rows, "batch": args.batch, **out}))


if __name__ == "__main__":
    main()
