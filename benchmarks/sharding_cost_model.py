"""Fit the sharding cost model on measured shard profiles and report its held-out error.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/sharding_cost_model.py \
        [--profiles cost_models/cpu/profiles.jsonl] [--out cost_models/cpu] [--test-fraction 0.2]
        [--steps 800] [--hidden 16] [--weight-decay 1e-3] [--seed 0] [--max-correction 1.0]
        [--kind auto] [--retest 60] [--additivity 6]
        [--width] [--evaluate PROFILES --model DIR]

The profiles (``autorec profile sharding``) are shuffled with ``--seed`` and split into training
and held-out shards; every shard was drawn from its own generated table set, so the held-out
shards' tables were never seen in training. The model fits on the training shards only; the
script fits both cost models (``additive``: shard cost = overhead + sum of table costs;
``shard-mlp``: that times a bounded learned per-shard factor) and prints each one's held-out mean
absolute percentage error (MAPE) per head (forward, backward, comm), of the total and per
shard-size bucket, next to a reference fitted on the same split: a least-squares linear
model per head on hand-made shard features (tables, lookups x dim, sum of dims, bytes). With
``--out`` it saves one of the two (``--kind``; by default the shard-mlp model if its held-out
total is no worse and its backward better, else the additive one) fitted on the training split
(so the recorded error is that model's), with the numbers and the split in its ``model.json``
metadata. ``--retest N`` re-measures N profiled shards (the measurement noise under the current
load); ``--additivity N`` compares N shards' costs with the sum of their tables' costs measured
alone; ``--width`` how one table's backward grows with its shard's total width. ``--evaluate
FILE`` only scores the saved model (``--model``) on another profile file, e.g. shards with tables
larger than any it was fitted on.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time

import torch

from autorec.sharding.cost_model import HEADS, ShardCostModel, fit, mape, predict_shards
from autorec.sharding.profiler import ShardProfile, load_profiles, measure_compute, random_shards
from autorec.sharding.tables import TableSet

SIZE_BUCKETS = ((1, 1), (2, 3), (4, 8), (9, 20), (21, 10**6))


def shard_summary(shard: TableSet, batch_size: int) -> list[float]:
    """Hand-made features of a shard for the linear reference: 1, tables, B * sum(pooling * dim),
    sum of dims, bytes."""
    t = shard.tables
    return [1.0, float(len(t)), batch_size * sum(x.pooling * x.dim for x in t) / 1e6,
            sum(x.dim for x in t) / 1e3, shard.total_bytes / 1e9]


def linear_reference(train: list[ShardProfile], test: list[ShardProfile]) -> torch.Tensor:
    """Per head least squares on :func:`shard_summary`, weighted by 1/cost (relative error);
    predictions [S_test, 3] floored at 1 microsecond."""
    x = torch.tensor([shard_summary(p.tables, p.batch_size) for p in train], dtype=torch.float64)
    y = torch.stack([p.targets for p in train]).double()
    xt = torch.tensor([shard_summary(p.tables, p.batch_size) for p in test], dtype=torch.float64)
    preds = []
    for h in range(len(HEADS)):
        w = 1.0 / y[:, h:h + 1]
        coef = torch.linalg.lstsq(x * w, y[:, h:h + 1] * w).solution
        preds.append((xt @ coef).squeeze(-1).clamp_min(1e-3))
    return torch.stack(preds, dim=-1).float()


def retest(profiles: list[ShardProfile], n: int, seed: int) -> None:
    """Measure ``n`` random profiled shards again (other batches) and print how far the two
    measurements lie apart: the noise floor any model's error sits on."""
    picked = random.Random(seed).sample(profiles, min(n, len(profiles)))
    rows = []
    for p in picked:
        fwd, bwd = measure_compute(p.tables, p.batch_size, p.repeats, seed=seed + 12345)
        rows.append((len(p.tables), abs(fwd / p.forward_ms - 1), abs(bwd / p.backward_ms - 1)))
    print(f"\nre-measured {len(rows)} profiled shards: forward differs by "
          f"{100 * sum(r[1] for r in rows) / len(rows):.1f}%, backward by "
          f"{100 * sum(r[2] for r in rows) / len(rows):.1f}% (mean absolute, % of the profile)")


def additivity(n: int, seed: int, batch_size: int) -> None:
    """For ``n`` shards of 6..12 tables: the shard's measured cost against the sum of its
    tables' costs measured alone."""
    print("\n| tables | forward: shard / sum alone | backward: shard / sum alone |")
    print("|---|---|---|")
    shards = [s for s in random_shards(20 * n, seed=seed + 77, max_tables=12) if len(s) >= 6][:n]
    for shard in shards:
        fwd, bwd = measure_compute(shard, batch_size, 7, seed=1)
        alone = [measure_compute(TableSet((t,)), batch_size, 7, seed=1) for t in shard.tables]
        print(f"| {len(shard)} | {fwd / sum(a[0] for a in alone):.2f} | "
              f"{bwd / sum(a[1] for a in alone):.2f} |")


def width_effect(batch_size: int) -> None:
    """One busy table (200k rows, dim 128, pooling 8) in shards widened by k nearly idle tables
    (dim 256, pooling 0.02): its backward against the shard's total width. fbgemm's CPU backward
    gathers each looked-up row's gradient from the shard's whole [B, sum of dims] output
    gradient, so a table's backward depends on its neighbours' dims."""
    from dataclasses import replace

    from autorec.sharding.tables import TableInfo

    reuse = (1.0,) + (0.0,) * 7
    busy = TableInfo("busy", 200_000, 128, 8.0, 4, reuse, access_exponent=0.5)
    idle = TableInfo("idle", 1000, 256, 0.02, 4, reuse)
    print("\n| shard width | busy table's backward (ms, idle tables' own subtracted) | forward (same) |")
    print("|---|---|---|")
    for k in (0, 2, 4, 8, 16):
        idles = tuple(replace(idle, name=f"idle{i}") for i in range(k))
        fwd, bwd = measure_compute(TableSet((busy, *idles)), batch_size, 9, seed=1)
        own = measure_compute(TableSet(idles), batch_size, 9, seed=1) if k else (0.0, 0.0)
        print(f"| {128 + 256 * k} | {bwd - own[1]:.2f} | {fwd - own[0]:.2f} |")


def evaluate(model_dir: str, path: str) -> None:
    """The saved model's MAPE on another profile file, split by whether a shard holds a table
    larger than any the model was fitted on (its inputs are clamped to the fitted range)."""
    model = ShardCostModel.load(model_dir)
    profiles = load_profiles(path)
    fitted_rows = float(10 ** model.hi[0])
    print(f"\n{model_dir} on {path} ({len(profiles)} shards; fitted up to {fitted_rows:.3g} rows):")
    print("| shards | n | forward | backward | comm | total |")
    print("|---|---|---|---|---|---|")
    groups = {"all": profiles,
              f"a table > {fitted_rows:.3g} rows": [
                  p for p in profiles if max(t.rows for t in p.tables.tables) > fitted_rows * 1.01],
              f"all tables <= {fitted_rows:.3g} rows": [
                  p for p in profiles if max(t.rows for t in p.tables.tables) <= fitted_rows * 1.01]}
    for name, group in groups.items():
        if group:
            with torch.no_grad():
                e = mape(predict_shards(model, [p.tables for p in group]),
                         torch.stack([p.targets for p in group]))
            print(f"| {name} | {len(group)} | " + " | ".join(f"{e[h]:.1f}%" for h in [*HEADS, "total"])
                  + " |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--profiles", default="cost_models/cpu/profiles.jsonl")
    parser.add_argument("--out", help="save the fitted model into this directory (e.g. cost_models/cpu)")
    parser.add_argument("--test-fraction", type=float, default=0.2)
    parser.add_argument("--steps", type=int, default=800)
    parser.add_argument("--hidden", type=int, default=16)
    parser.add_argument("--weight-decay", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-correction", type=float, default=1.0,
                        help="bound c of the shard-mlp model's log factor")
    parser.add_argument("--kind", choices=("auto", "additive", "shard-mlp"), default="auto",
                        help="which fitted model --out saves (auto: shard-mlp if better)")
    parser.add_argument("--retest", type=int, default=0, metavar="N",
                        help="also re-measure N profiled shards (measurement noise)")
    parser.add_argument("--additivity", type=int, default=0, metavar="N",
                        help="also compare N shards' costs with the sum of their tables' alone")
    parser.add_argument("--width", action="store_true",
                        help="also measure how a table's backward grows with the shard's width")
    parser.add_argument("--evaluate", metavar="PROFILES",
                        help="only score the model saved in --model on this profile file")
    parser.add_argument("--model", default="cost_models/cpu", help="the model --evaluate scores")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    if args.evaluate:
        evaluate(args.model, args.evaluate)
        return 0
    profiles = load_profiles(args.profiles)
    kinds = {(p.batch_size, p.device, p.world_size) for p in profiles}
    if len(kinds) != 1:
        sys.exit(f"{args.profiles}: profiles of several (batch size, device, world size): {sorted(kinds)}")
    batch_size, device, world_size = kinds.pop()
    order = list(range(len(profiles)))
    random.Random(args.seed).shuffle(order)
    n_test = max(1, round(len(order) * args.test_fraction))
    test = [profiles[i] for i in order[:n_test]]
    train = [profiles[i] for i in order[n_test:]]
    targets = torch.stack([p.targets for p in train])
    test_targets = torch.stack([p.targets for p in test])

    train_shards, test_shards = [p.tables for p in train], [p.tables for p in test]
    reference = mape(linear_reference(train, test), test_targets)
    print(f"{len(profiles)} profiles ({len(train)} train, {len(test)} held out), batch {batch_size}, "
          f"{device}, comm at {world_size} processes; {args.steps} fitting steps")
    models, results = {}, {}
    for kind in ("additive", "shard-mlp"):
        torch.manual_seed(args.seed)
        model = ShardCostModel(args.hidden, batch_size=batch_size, world_size=world_size,
                               device_kind=device, kind=kind, max_correction=args.max_correction)
        start = time.perf_counter()
        fit(model, train_shards, targets, steps=args.steps, weight_decay=args.weight_decay,
            seed=args.seed)
        fit_s = time.perf_counter() - start
        with torch.no_grad():
            held_out = mape(predict_shards(model, test_shards), test_targets)
            in_train = mape(predict_shards(model, train_shards), targets)
        by_size = {}
        for lo, hi in SIZE_BUCKETS:
            picked = [i for i, p in enumerate(test) if lo <= len(p.tables) <= hi]
            if picked:
                with torch.no_grad():
                    e = mape(predict_shards(model, [test_shards[i] for i in picked]),
                             test_targets[picked])
                label = f"{lo}-{hi}" if hi < 10**6 else f"{lo}+"
                by_size[label] = {"shards": len(picked), **{k: round(v, 2) for k, v in e.items()}}
        models[kind] = model
        results[kind] = {"heldout": held_out, "train": in_train, "by_size": by_size, "fit_s": fit_s}
    print("\nfit seconds: " + ", ".join(f"{k} {r['fit_s']:.0f}" for k, r in results.items()))
    print("| head | held-out MAPE, shard-mlp | held-out MAPE, additive | train MAPE, shard-mlp "
          "| train MAPE, additive | held-out MAPE, linear reference |")
    print("|---|---|---|---|---|---|")
    for h in [*HEADS, "total"]:
        s, a = results["shard-mlp"], results["additive"]
        print(f"| {h} | {s['heldout'][h]:.1f}% | {a['heldout'][h]:.1f}% | {s['train'][h]:.1f}% | "
              f"{a['train'][h]:.1f}% | {reference[h]:.1f}% |")
    print("\nheld-out MAPE by shard size (tables on the device), shard-mlp / additive:")
    print("| tables | shards | forward | backward | comm | total |")
    print("|---|---|---|---|---|---|")
    for label, s in results["shard-mlp"]["by_size"].items():
        a = results["additive"]["by_size"][label]
        print(f"| {label} | {s['shards']} | " + " | ".join(f"{s[h]:.1f}% / {a[h]:.1f}%"
                                                           for h in [*HEADS, "total"]) + " |")
    s, a = results["shard-mlp"]["heldout"], results["additive"]["heldout"]
    adopt = "shard-mlp" if s["total"] <= a["total"] and s["backward"] < a["backward"] else "additive"
    if args.kind != "auto":
        adopt = args.kind
    print(f"\nsaved kind: {adopt} (auto adopts shard-mlp when its held-out total is no worse and "
          f"its backward is better than the additive model's)")
    model, held_out = models[adopt], results[adopt]["heldout"]
    by_size = results[adopt]["by_size"]
    if args.retest:
        retest(profiles, args.retest, args.seed)
    if args.additivity:
        additivity(args.additivity, args.seed, batch_size)
    if args.width:
        width_effect(batch_size)
    if args.out:
        model.metadata = {
            "profiles": str(args.profiles), "n_profiles": len(profiles), "n_train": len(train),
            "n_test": len(test), "split_seed": args.seed, "steps": args.steps,
            "weight_decay": args.weight_decay,
            "heldout_mape": {k: round(v, 2) for k, v in held_out.items()},
            "heldout_mape_by_shard_size": by_size, "kind": adopt,
            "max_correction": args.max_correction,
            "other_kind_heldout_mape": {
                k: {h: round(v, 2) for h, v in r["heldout"].items()}
                for k, r in results.items() if k != adopt},
            "linear_reference_heldout_mape": {k: round(v, 2) for k, v in reference.items()},
            "command": "benchmarks/sharding_cost_model.py " + " ".join(argv or sys.argv[1:])}
        path = model.save(args.out)
        print(f"saved to {path}: {json.dumps(model.metadata['heldout_mape'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
