"""One MovieLens-100K supernet per cost weight: which kinds the architecture logits end at.

The settings of the DNAS variant H in BENCHMARKS.md (800 steps, 400 of them with an
architecture step, uniform weight sampling, no rescale) at trial 1's sampled D 32, over-arch
256-128 and target ratio 0.47, seed 1; ``--sampling soft`` runs the same with soft
Gumbel-softmax weights (``hard: false``); ``--weight-hard`` keeps the weight steps on one
uniformly drawn path while the architecture steps are soft, and ``--arch-every K`` runs an
architecture step after every K-th weight step past the warm-up; ``--search-over-arch`` lets
the supernet choose the over-arch (256-128 or 512-256) instead of fixing 256-128.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/dnas_lambda_probe.py --sampling hard --lambdas 0 0.3
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/dnas_lambda_probe.py --sampling soft --lambdas 0 0.3
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/dnas_lambda_probe.py --sampling soft --weight-hard \
        --arch-every 4 --lambdas 0 0.3

Prints, per lambda, E[cost] over the target, the argmax layers, the final kind probabilities
per layer and the process CPU seconds.
"""

from __future__ import annotations

import argparse
import time

from autorec.data import load_dataset
from autorec.space import SPACES_DIR, SearchSpace
from autorec.supernet import SupernetConfig, SupernetSearch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sampling", choices=("hard", "soft"), default="hard")
    parser.add_argument("--lambdas", type=float, nargs="+", default=[0.0, 0.3])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--weight-hard", action="store_true",
                        help="one uniformly drawn path per weight step, whatever --sampling says")
    parser.add_argument("--arch-every", type=int, default=1)
    parser.add_argument("--search-over-arch", action="store_true")
    args = parser.parse_args()
    space = SearchSpace.load(SPACES_DIR / "quickstart.yaml")
    data = load_dataset("movielens100k", seed=0)
    dense = space.dense_arch[0] if data.schema.n_dense else ()
    for lam in args.lambdas:
        config = SupernetConfig(steps=800, warmup_steps=400, batch_size=512, rescale=False,
                                weight_sampling="uniform", hard=args.sampling == "hard",
                                weight_hard=True if args.weight_hard else None, arch_every=args.arch_every,
                                cost_lambda=lam, cost_target_ratio=0.47, seed=args.seed)
        t0 = time.process_time()
        over = None if args.search_over_arch else (256, 128)
        result = SupernetSearch(space, data, 32, dense, over, config).fit()
        kinds = {name: {k: round(p, 2) for k, p in probs.items()}
                 for name, probs in result.final_probs.items() if "kind" in name or name == "over_arch"}
        variant = f"{args.sampling} (weight_hard {args.weight_hard}, arch_every {args.arch_every})"
        print(f"{variant} lambda {lam}: E[cost]/target {result.expected_cost / result.cost_target:.2f} "
              f"argmax {[layer.kind for layer in result.spec.layers]} probs {kinds} "
              f"cpu {time.process_time() - t0:.0f}s", flush=True)


if __name__ == "__main__":
    main()
