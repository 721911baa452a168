"""Issue 20: what scoring a path on inherited weights costs, batch by batch against joined.

Every read of the one-shot search (the kind heads' screen, the layer grid, the crossings, the
rescore, the finalists' drops, tau's draws) is a forward pass of the supernet on one path over
fixed validation samples. The samples come in batches of the supernet's training size (1024);
:meth:`~autorec.supernet.search.SupernetSearch.selection_batches` joins them into passes of
:data:`~autorec.supernet.search.SCORING_SAMPLES` (:mod:`autorec.data.merge`). This benchmark loads
a trained supernet of ``benchmarks/oneshot_vs_tpe.py`` (study ``oneshot<tag>_seed<seed>`` under
``--root``), takes the paths its search re-ranked (``record["rescored"]``, the finalists and the
rescore's pool), and scores each on the same ``--samples`` validation samples both ways, in
alternating rounds so a drift of the machine falls on both alike. Flat keys (``scoring_*``)
merged into ``benchmarks/results/oneshot_scoring.json``: the median seconds per path of each
way, their ratio, and the largest AUC difference between the two (the same samples: 0 expected).

    OMP_NUM_THREADS=2 .venv/bin/python -m benchmarks.oneshot_scoring --tag _k54 --seed 0
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks.oneshot_tpe_proxy import ROOT as CACHE
from benchmarks.oneshot_tpe_proxy import load_supernet
from benchmarks.results_file import RESULTS, merge_results


def measure(tag: str, seed: int, samples: int, paths: int, rounds: int, root: Path) -> dict[str, Any]:
    loaded = load_supernet(tag, seed, samples, root)
    record = loaded.oneshot.user_attrs.get("oneshot", {})
    numbers = [int(n) for n in record.get("rescored", {})][:paths]
    if not numbers:
        raise SystemExit(f"{loaded.name}: no rescored paths in its record (a study that ran its re-rank)")
    trials = {t.number: t for t in loaded.oneshot.get_trials(deepcopy=False)}
    candidate = loaded.search
    search = candidate.search
    alone = search.selection_batches(samples, join=search.config.batch_size)  # as the dataset gives them
    joined = search.selection_batches(samples)
    seconds: dict[str, list[float]] = {"alone": [], "joined": []}
    differences = []
    for number in numbers:
        values = candidate.values_of({n: str(trials[number].params[n]) for n in candidate.names})
        per: dict[str, list[float]] = {"alone": [], "joined": []}
        auc = {}
        for r in range(rounds):
            for way in (("alone", "joined") if r % 2 == 0 else ("joined", "alone")):
                start = time.perf_counter()
                auc[way] = search.path_scores(values, alone if way == "alone" else joined)["val_auc"]
                per[way].append(time.perf_counter() - start)
        for way in per:
            seconds[way].append(statistics.median(per[way]))
        differences.append(abs(auc["alone"] - auc["joined"]))
        print(f"path of trial {number}: {seconds['alone'][-1]:.3f} s batch by batch, "
              f"{seconds['joined'][-1]:.3f} s joined, AUC {auc['joined']:.6f} (difference "
              f"{differences[-1]:.1e})", flush=True)
    alone_s, joined_s = statistics.median(seconds["alone"]), statistics.median(seconds["joined"])
    return {"scoring_study": loaded.name, "scoring_paths": len(numbers), "scoring_rounds": rounds,
            "scoring_samples": samples, "scoring_batch_size": search.config.batch_size,
            "scoring_batches_alone": len(alone), "scoring_batches_joined": len(joined),
            "scoring_alone_s": alone_s, "scoring_joined_s": joined_s,
            "scoring_speedup": alone_s / joined_s, "scoring_auc_max_difference": max(differences)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tag", default="_k54", help="variant tag of the studies (default _k54)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--samples", type=int, default=32768, help="validation samples a path is scored on")
    parser.add_argument("--paths", type=int, default=8, help="rescored paths timed (default 8)")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds per path (default 5)")
    parser.add_argument("--root", type=Path, default=CACHE, help="the studies' folder")
    parser.add_argument("--json", type=Path, default=RESULTS / "oneshot_scoring.json")
    args = parser.parse_args()
    figures = measure(args.tag, args.seed, args.samples, args.paths, args.rounds, args.root)
    print({k: round(v, 4) if isinstance(v, float) else v for k, v in figures.items()})
    merge_results(args.json, figures)


if __name__ == "__main__":
    main()
