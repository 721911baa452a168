"""``autorec profile latency``: time the dense parts of sampled architectures, fit the latency model.

    autorec profile latency [--out cost_models/cpu] [--space zoo] [--specs 200]
        [--batch-size 512] [--repeats 7] [--seed 0]

Writes ``<out>/latency_profiles.jsonl`` (one timed part per line) and ``<out>/latency.json``
(the fitted :class:`~autorec.costs.latency.LatencyModel`), and prints the held-out error per
kind. The supernet's ``cost_metric: latency`` reads ``cost_models/cpu/latency.json``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from autorec.cli.common import UsageError, require_counts


def add_parser(group: Any) -> None:
    """Register ``latency`` on the ``profile`` subcommands."""
    parser = group.add_parser("latency",
                              help="forward + backward time of the dense parts of architectures")
    parser.add_argument("--out", default="cost_models/cpu",
                        help="directory of latency.json (default %(default)s)")
    parser.add_argument("--space", default="zoo", help="a space name under search_spaces/ or a YAML path")
    parser.add_argument("--specs", type=int, default=200, help="architectures sampled from the space")
    parser.add_argument("--batch-size", type=int, default=512, help="samples per timed step")
    parser.add_argument("--repeats", type=int, default=7, help="timed runs per part (min taken)")
    parser.add_argument("--seed", type=int, default=0)
    parser.set_defaults(func=cmd_profile_latency)


def cmd_profile_latency(args: argparse.Namespace) -> int:
    import torch

    from autorec.costs.latency import LATENCY_FILE, fit_latency_model, profile_parts, sample_specs
    from autorec.space import SPACES_DIR, SearchSpace

    require_counts(args, positive=["specs", "batch_size", "repeats"])
    path = Path(args.space)
    if not path.suffix:
        path = SPACES_DIR / f"{args.space}.yaml"
    if not path.is_file():
        raise UsageError(f"--space {args.space!r}: no such space file ({path})")
    space = SearchSpace.load(path)
    torch.set_num_threads(1)  # one core's time, as the study's trials run
    records = profile_parts(sample_specs(space, args.specs, seed=args.seed), batch_size=args.batch_size,
                            repeats=args.repeats, seed=args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "latency_profiles.jsonl", "w") as f:
        for record in records:
            f.write(json.dumps(record) + "\n")
    model = fit_latency_model(records, device="cpu", batch_size=args.batch_size, seed=args.seed)
    model.save(out / LATENCY_FILE)
    errors = ", ".join(f"{k} {v:.1%}" for k, v in model.heldout_mape.items())
    print(f"{len(records)} parts of {args.specs} architectures timed; held-out MAPE: {errors}; "
          f"wrote {out / LATENCY_FILE}")
    return 0
