"""Supernet peak memory and step time at scale, against training the largest single architecture.

An 8-layer supernet over 5 kinds (wukong, dhen, dlrm, dcnv2, skip) with a per-feature embedding
width choice, on synthetic data shaped like Criteo (13 dense, 26 tables of ``--rows`` rows).
The reference is the largest architecture the supernet holds (every layer at its widest kind),
trained by the Trainer.

- Peak memory: the maximum resident set (ru_maxrss) of a process that runs only the supernet's
  ``--steps`` steps (and of one that runs only the reference's), so the two peaks do not mix.
- Step time: one more process holds both and alternates them (``--rounds`` rounds of a
  supernet step, weights + architecture, then a reference step), so that a shared machine's
  load falls on both alike; it reports the min and median wall and process-CPU seconds of each
  and their ratio.

    .venv/bin/python benchmarks/supernet_scale.py --rows 1000000 --steps 30     # the issue's size
    .venv/bin/python benchmarks/supernet_scale.py --rows 1000 --steps 3         # a smoke run
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
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


def _search(rows: int, samples: int, steps: int, batch: int):
    from autorec.space import SearchSpace
    from autorec.supernet import SupernetConfig, SupernetSearch

    space = SearchSpace.from_dict(SPACE)
    return SupernetSearch(space, _data(rows, samples), 16, (64,), (256, 128),
                          SupernetConfig(steps=steps, warmup_steps=1, batch_size=batch, record_every=steps))


def _trainer(rows: int, samples: int, batch: int):
    """The Trainer on the widest single architecture: 8 Wukong layers at n_fm 16 (the kind with
    the most FLOPs here), tables at full width."""
    from autorec.arch import ArchSpec, WukongConfig
    from autorec.presets import tables_for
    from autorec.supernet.search import forever  # the supernet's endless batch stream
    from autorec.train.trainer import TrainConfig, Trainer

    data = _data(rows, samples)
    spec = ArchSpec(dim=16, tables=tables_for(data.schema, 16), n_dense=data.schema.n_dense, dense_arch=(64,),
                    layers=(WukongConfig(n_fm=16, n_lcb=8, rank=8, mlp=(128,)),) * 8, over_arch=(256, 128))
    trainer = Trainer(spec, data, TrainConfig(epochs=1, batch_size=batch, progress=False))
    return trainer, forever(data, "train", batch, seed=0)


def supernet(rows: int, samples: int, steps: int, batch: int) -> dict:
    run = _search(rows, samples, steps, batch)
    params = sum(p.numel() for n, p in run.supernet.named_parameters() if "sparse_arch" not in n)
    result = run.fit()
    return {"layers": len(run.supernet.layers), "dense_params": params, "step_s": result.step_seconds,
            "max_loss": max(result.losses), "final_loss": result.losses[-1],
            "peak_rss_gib": _peak_gib(), "derived": [layer.kind for layer in result.spec.layers]}


def largest(rows: int, samples: int, steps: int, batch: int) -> dict:
    trainer, batches = _trainer(rows, samples, batch)
    trainer.train_step(next(batches))
    t0 = time.perf_counter()
    for _ in range(steps):
        trainer.train_step(next(batches))
    return {"step_s": (time.perf_counter() - t0) / steps, "peak_rss_gib": _peak_gib()}


def paired(rows: int, samples: int, steps: int, batch: int) -> dict:
    """Both in one process, alternating one supernet step and one reference step per round."""
    run = _search(rows, samples, steps, batch)
    train, val = run.batches()
    trainer, batches = _trainer(rows, samples, batch)
    run.step(0, train, val)  # warm-up of both (first-call allocations), past the arch warm-up
    trainer.train_step(next(batches))
    times: dict[str, list[tuple[float, float]]] = {"supernet": [], "largest": []}
    for i in range(steps):
        for name in times:
            wall, cpu = time.perf_counter(), time.process_time()
            if name == "supernet":
                run.step(i + 1, train, val)
            else:
                trainer.train_step(next(batches))
            times[name].append((time.perf_counter() - wall, time.process_time() - cpu))
    out: dict = {}
    for name, pairs in times.items():
        walls, cpus = [w for w, _ in pairs], [c for _, c in pairs]
        out[name] = {"wall_min_s": min(walls), "wall_median_s": statistics.median(walls),
                     "cpu_min_s": min(cpus), "cpu_median_s": statistics.median(cpus)}
    for key in ("wall_min_s", "wall_median_s", "cpu_min_s", "cpu_median_s"):
        out[f"ratio_{key[:-2]}"] = out["supernet"][key] / out["largest"][key]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--samples", type=int, default=50_000)
    parser.add_argument("--steps", type=int, default=30, help="steps per measurement (rounds when paired)")
    parser.add_argument("--batch", type=int, default=2048)
    parser.add_argument("--part", choices=("all", "supernet", "largest", "paired"), default="all")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    parts = {"supernet": supernet, "largest": largest, "paired": paired}
    if args.part != "all":  # one measurement per process, so the peaks do not mix
        print(json.dumps(parts[args.part](args.rows, args.samples, args.steps, args.batch)))
        return
    out = {}
    for part in parts:
        cmd = [sys.executable, __file__, "--part", part, "--rows", str(args.rows), "--samples",
               str(args.samples), "--steps", str(args.steps), "--batch", str(args.batch)]
        lines = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()
        out[part] = json.loads(lines[-1])
    sup, ref, pair = out["supernet"], out["largest"], out["paired"]
    print(f"26 tables x {args.rows} rows, batch {args.batch}: supernet ({sup['layers']} layers x 5 kinds, "
          f"{sup['dense_params'] / 1e6:.2f}M dense parameters) peak RSS {sup['peak_rss_gib']:.2f} GiB, "
          f"max loss {sup['max_loss']:.3f} over {args.steps} steps; largest single architecture peak "
          f"{ref['peak_rss_gib']:.2f} GiB. Paired steps (supernet weights + architecture / largest): "
          f"wall min {pair['supernet']['wall_min_s']:.3f} / {pair['largest']['wall_min_s']:.3f} s "
          f"(ratio {pair['ratio_wall_min']:.2f}), median ratio {pair['ratio_wall_median']:.2f}; "
          f"process CPU min ratio {pair['ratio_cpu_min']:.2f}, median {pair['ratio_cpu_median']:.2f}")
    print(json.dumps({"rows": args.rows, "batch": args.batch, **out}))


if __name__ == "__main__":
    main()
