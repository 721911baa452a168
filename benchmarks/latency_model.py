"""Does the learned latency model rank whole architectures by their measured step time better
than FLOPs do?

Architectures are sampled from a space (default: the zoo) on a schema the profiles never saw
(``--features`` sparse features, 13 dense), with another seed than ``autorec profile latency``
used. Each is built as the trainer builds it (``build_model``) and timed whole: forward and
backward of the dense model on random pooled embeddings (the embedding lookup is left out, as
the latency model prices dense parts only), min over ``--repeats`` at batch ``--batch-size``,
one thread. Reported: the mean absolute percentage error of ``spec_seconds`` against the
measured time, and the Spearman rank correlation with the measured time of the model's
prediction and of forward FLOPs.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/latency_model.py --specs 60
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import time
import warnings

import torch
from scipy.stats import spearmanr
from torch import nn
from torchrec.sparse.jagged_tensor import KeyedTensor

from autorec.arch import ArchSpec
from autorec.costs import arch_cost
from autorec.costs.latency import LatencyModel, default_path, sample_specs
from autorec.models import build_model
from autorec.space import SPACES_DIR, SearchSpace


class _Pooled(nn.Module):
    """Stands in for the embedding tables: random pooled embeddings of every feature, so the
    model's own forward runs from them on and the lookup is left out of the timing."""

    def __init__(self, spec: ArchSpec, batch_size: int) -> None:
        super().__init__()
        self.keys = list(spec.feature_names)
        self.dims = [t.dim for t in spec.tables for _ in t.features]
        self.values = torch.randn(batch_size, sum(self.dims))

    def forward(self, _: object) -> KeyedTensor:
        return KeyedTensor(keys=self.keys, length_per_key=self.dims,
                           values=self.values.clone().requires_grad_(True))


def step_seconds(spec: ArchSpec, batch_size: int, repeats: int) -> float:
    """Min over ``repeats`` of forward + backward of ``spec``'s dense model (after 2 warm-ups)."""
    model = build_model(spec)
    model.sparse_arch = _Pooled(spec, batch_size)
    dense = torch.randn(batch_size, spec.n_dense)
    best = math.inf
    for i in range(repeats + 2):
        model.zero_grad(set_to_none=True)
        start = time.perf_counter()
        model(dense, None).sum().backward()
        if i >= 2:
            best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--space", default="zoo")
    parser.add_argument("--specs", type=int, default=60)
    parser.add_argument("--features", type=int, nargs="+", default=[12, 20, 30])
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--seed", type=int, default=1000)
    parser.add_argument("--model", default=str(default_path("cpu")))
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    model = LatencyModel.load(args.model)
    space = SearchSpace.load(SPACES_DIR / f"{args.space}.yaml")
    rows = []
    # No projections: the profiles time interaction layers and MLPs, and the zoo's embedding
    # width choices would add per-feature projections that no profile covers.
    for spec in sample_specs(space, args.specs, seed=args.seed, num_features=args.features):
        spec = spec.replace(tables=tuple(dataclasses.replace(t, dim=spec.dim) for t in spec.tables))
        measured = step_seconds(spec, args.batch_size, args.repeats)
        rows.append({"layers": [layer.kind for layer in spec.layers], "features": len(spec.tables),
                     "dim": spec.dim, "flops": arch_cost(spec).forward_flops,
                     "predicted_s": model.spec_seconds(spec), "measured_s": measured})
        print(f"{'+'.join(rows[-1]['layers']) or 'none':40s} F {len(spec.tables):2d} D {spec.dim:3d}: "
              f"measured {measured * 1e3:7.2f} ms, predicted {rows[-1]['predicted_s'] * 1e3:7.2f} ms, "
              f"{rows[-1]['flops'] / 1e6:7.2f} MFLOPs", flush=True)
    measured = [r["measured_s"] for r in rows]
    mape = sum(abs(r["predicted_s"] - r["measured_s"]) / r["measured_s"] for r in rows) / len(rows)
    rho_model = spearmanr([r["predicted_s"] for r in rows], measured).statistic
    rho_flops = spearmanr([r["flops"] for r in rows], measured).statistic
    print(f"{len(rows)} architectures of {args.space}: whole-model MAPE {mape:.1%}; Spearman with the "
          f"measured time: latency model {rho_model:.3f}, FLOPs {rho_flops:.3f}")
    print(json.dumps({"mape": mape, "spearman_model": rho_model, "spearman_flops": rho_flops, "rows": rows}))


if __name__ == "__main__":
    main()
