"""``autorec serve-bench``: latency percentiles, throughput and AUC of an export's forms.

    autorec serve-bench EXPORT_DIR [--data movielens100k ...] [--batch-sizes 1,64,512]
        [--forms eager,exported,compiled,int8] [--repeats 200] [--split val] [--json FILE]

Serves real rows of the dataset's split (the data flags as for ``autorec train``) to every form
of the export (:mod:`autorec.serving`): eager Python, the torch.export program, the AOTInductor
package (exports made with ``autorec export --compile``) and a dynamic-int8 copy, one request
at a time; prints p50/p99 milliseconds and samples/s per batch size, and each form's AUC change
against eager.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from autorec.cli.common import UsageError, add_data_args, load_data, require_counts


def add_parser(commands: Any) -> None:
    parser = commands.add_parser("serve-bench", help="latency and AUC of an exported model's serving forms")
    parser.add_argument("export", help="an export directory (autorec export)")
    add_data_args(parser)
    parser.add_argument("--batch-sizes", default="1,64,512", help="comma-separated request sizes")
    parser.add_argument("--forms", default="eager,exported,compiled,int8",
                        help="forms to serve (compiled is skipped when the export has no package)")
    parser.add_argument("--repeats", type=int, default=200, help="timed requests per form and size")
    parser.add_argument("--warmup", type=int, default=20, help="untimed requests first")
    parser.add_argument("--split", default="val", choices=["train", "val", "test"],
                        help="the rows served and scored")
    parser.add_argument("--json", help="also write the full result here")
    parser.set_defaults(func=cmd_serve_bench)


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(part) for part in text.split(",")]
    except ValueError:
        raise UsageError(f"--batch-sizes: expected comma-separated integers, got {text!r}") from None
    if not sizes or min(sizes) < 1:
        raise UsageError(f"--batch-sizes: expected positive integers, got {text!r}")
    return sizes


def cmd_serve_bench(args: argparse.Namespace) -> int:
    from autorec.serving import FORMS, serve_bench

    require_counts(args, positive=["repeats"], non_negative=["warmup"])
    sizes = _sizes(args.batch_sizes)
    forms = tuple(f for f in args.forms.split(",") if f)
    unknown = [f for f in forms if f not in FORMS]
    if unknown or not forms:
        raise UsageError(f"--forms: unknown {', '.join(unknown) or '(none given)'}; expected some of "
                         f"{', '.join(FORMS)}")
    if not Path(args.export).is_dir():
        raise UsageError(f"{args.export}: no such export directory")
    result = serve_bench(args.export, load_data(args), sizes, forms, args.repeats, args.warmup, args.split)
    print(f"{args.export}: {result['threads']} threads, requests from the {args.split} split")
    print("| form | batch | p50 ms | p99 ms | samples/s | AUC change |")
    print("|---|---|---|---|---|---|")
    for form, rows in result["latency"].items():
        change = result["quality"][form]["auc_change"]
        for row in rows.values():
            print(f"| {form} | {row['batch_size']} | {row['p50_ms']:.3f} | {row['p99_ms']:.3f} | "
                  f"{row['samples_per_s']:,.0f} | {change:+.5f} |")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    return 0
