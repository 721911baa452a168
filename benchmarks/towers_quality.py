"""DMT towers on planted feature groups: does the partitioner recover the groups from a trained
flat model, and does the tower model match the flat model's test AUC?

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/towers_quality.py            # groups4, 500k samples
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/towers_quality.py --num-samples 100000 --epochs 2

Steps (one process, the project's Trainer: torchrec DistributedModelParallel at world size 1):
1. train the flat DLRM (dot interaction over the dense vector and the 16 pooled embeddings);
2. ablation interaction statistics of the trained model on a validation batch, the table graph,
   K balanced towers (tolerance 10% on bytes and lookups); adjusted Rand index against the planted
   groups, beside round-robin and random partitions;
3. train the tower model on the found partition: each tower a DLRM dot block plus a linear
   compression to ``n_out`` vectors, the global stack a dot layer that passes its inputs through;
4. test AUCs (flat, towers, Bayes). Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import torch

from autorec.arch import DotConfig
from autorec.data import load_dataset
from autorec.data.synthetic import table_groups
from autorec.presets import preset
from autorec.towers.partition import (
    adjusted_rand_index,
    cut_fraction,
    feature_graph,
    imbalance,
    interaction_matrix,
    labels,
    partition,
    random_partition,
    round_robin_partition,
    table_loads,
    with_towers,
)
from autorec.train.partition import rank_batches
from autorec.train.trainer import TrainConfig, Trainer


def run(seed: int = 0, num_samples: int = 500_000, epochs: int = 4, dim: int = 16, k: int = 4,
        n_out: int = 2, batch_size: int = 1024, tolerance: float = 0.1) -> dict[str, Any]:
    torch.set_num_threads(1)
    ds = load_dataset("synthetic", preset="groups4", seed=seed, num_samples=num_samples)
    config = TrainConfig(epochs=epochs, batch_size=batch_size, seed=seed, patience=2, progress=False)
    flat = preset("dlrm", ds.schema, dim=dim)
    t0 = time.perf_counter()
    flat_trainer = Trainer(flat, ds, config)
    flat_result = flat_trainer.fit()
    flat_s = time.perf_counter() - t0

    batch = next(iter(rank_batches(ds, "val", 4096, shuffle=False, seed=seed, epoch=0, rank=0, world_size=1)))
    names, weights = interaction_matrix(flat_trainer.model, batch.dense_features, batch.sparse_features)
    graph = feature_graph(flat, names, weights, table_loads(flat, batch.sparse_features))
    parts = partition(graph, k, tolerance=tolerance)
    order = [t.name for t in flat.tables]
    truth = table_groups(ds.config, ds.seed)
    scores = {}
    for name, found in (("partitioner", parts), ("round_robin", round_robin_partition(graph, k)),
                        ("random", random_partition(graph, k, seed=seed))):
        scores[name] = {"ari": adjusted_rand_index(truth, labels(found, order)),
                        "cut_fraction": cut_fraction(graph, found), "imbalance": imbalance(graph, found)}

    towered = with_towers(flat, parts, DotConfig(n_passthrough=0), n_out=n_out)
    towered = towered.replace(name="dlrm_towers", layers=(DotConfig(n_passthrough=towered.num_inputs),))
    t0 = time.perf_counter()
    tower_result = Trainer(towered, ds, config).fit()
    tower_s = time.perf_counter() - t0
    out = {
        "data": {"preset": "groups4", "num_samples": num_samples, "seed": seed},
        "epochs": epochs, "batch_size": batch_size, "dim": dim, "k": k, "n_out": n_out,
        "partition": scores, "towers": [sorted(p) for p in parts],
        "auc": {"flat": flat_result.test["auc"], "towers": tower_result.test["auc"],
                "bayes": ds.bayes_auc("test")},
        "auc_gap_towers_minus_flat": tower_result.test["auc"] - flat_result.test["auc"],
        "best_epoch": {"flat": flat_result.best_epoch, "towers": tower_result.best_epoch},
        "seconds": {"flat": round(flat_s, 1), "towers": round(tower_s, 1)},
        "stack_inputs": {"flat": flat.num_inputs, "towers": towered.num_inputs},
    }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num-samples", type=int, default=500_000)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--dim", type=int, default=16)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--n-out", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=1024)
    args = parser.parse_args()
    result = run(seed=args.seed, num_samples=args.num_samples, epochs=args.epochs, dim=args.dim, k=args.k,
                 n_out=args.n_out, batch_size=args.batch_size)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
