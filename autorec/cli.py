"""The ``autorec`` command line: train, data describe (search, export, ... join here)."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from autorec.arch import ArchSpecError
from autorec.data.schema import DataError


class UsageError(ValueError):
    """A command-line value is wrong; the message names the flag."""


def parse_options(pairs: Sequence[str], flag: str = "--data-opt") -> dict[str, Any]:
    """``key=value`` pairs; values parsed as JSON when they parse, else kept as strings
    (``flag``: the option they came from, named in the error)."""
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"{flag}: expected key=value, got {pair!r}")
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    return options


def _load_data(args: argparse.Namespace) -> Any:
    from autorec.data import load_dataset

    return load_dataset(args.data, path=args.data_path, seed=args.seed, **parse_options(args.data_opt))


def _resolve_arch(value: str, schema: Any) -> Any:
    from autorec.arch import ArchSpec
    from autorec.presets import PRESETS, preset

    if value in PRESETS:
        return preset(value, schema)
    path = Path(value)
    if path.suffix == ".json" or path.exists():
        return ArchSpec.load(path)
    raise UsageError(f"--arch: {value!r} is neither a preset ({', '.join(PRESETS)}) "
                     "nor an arch.json file")


def _add_data_args(parser: argparse.ArgumentParser) -> None:
    from autorec.data import DATASETS

    parser.add_argument("--data", default="movielens100k", choices=sorted(DATASETS),
                        help="dataset (default: movielens100k)")
    parser.add_argument("--data-path",
                        help="the file a file-based dataset (criteo, libfm, csv, parquet) reads")
    parser.add_argument("--data-opt", action="append", default=[], metavar="KEY=VALUE",
                        help="a dataset option, e.g. hash_size=1000000 (repeatable)")
    parser.add_argument("--seed", type=int, default=0, help="seed for the split, init and shuffling")


def cmd_train(args: argparse.Namespace) -> int:
    from autorec.train.launch import launch, under_launcher
    from autorec.train.trainer import TrainConfig, Trainer

    if args.ray_workers and (args.nproc_per_node > 1 or args.nnodes != "1"):
        raise UsageError("--ray-workers: Ray Train starts the workers; drop --nproc-per-node/--nnodes")
    if (args.nproc_per_node > 1 or args.nnodes != "1" or args.max_restarts) and not under_launcher():
        return launch(args.argv, nproc_per_node=args.nproc_per_node, nnodes=args.nnodes,
                      rdzv_endpoint=args.rdzv_endpoint, rdzv_id=args.rdzv_id,
                      max_restarts=args.max_restarts, node_rank=args.node_rank)
    if under_launcher():  # join this attempt's group before anything that could fail or take long
        from autorec.train.distributed import ensure_process_group

        ensure_process_group()
    dataset = _load_data(args)
    spec = _resolve_arch(args.arch, dataset.schema)
    ray_workers = args.ray_workers and not under_launcher()
    config = TrainConfig(epochs=args.epochs, batch_size=args.batch_size, seed=args.seed,
                         dense_lr=args.lr, embedding_lr=args.embedding_lr,
                         dense_optimizer=args.optimizer, patience=args.patience,
                         checkpoint_dir=args.checkpoint_dir, num_workers=args.num_workers,
                         max_steps_per_epoch=args.max_steps_per_epoch,
                         progress=not args.json and sys.stderr.isatty(), plan=args.plan,
                         dense_parallel=args.dense_parallel, checkpoint_every=args.checkpoint_every,
                         resume=bool(args.checkpoint_dir) and not args.no_resume, pipeline=args.pipeline)
    if ray_workers:
        from autorec.train.ray_train import train_on_ray

        full = train_on_ray(spec, args.data, parse_options(args.data_opt), config,
                            num_workers=args.ray_workers, data_path=args.data_path, address=args.ray_address,
                            storage_path=args.ray_storage)
    else:
        trainer = Trainer(spec, dataset, config)
        if args.save_plan and trainer.rank == 0:
            from autorec.train.plan import save_plan

            save_plan(trainer.model.plan, trainer.world_size, args.save_plan)
        result = trainer.fit()
        if trainer.rank != 0:  # rank 0 speaks for the run; the metrics are the same on every rank
            return 0
        full = {**result.to_dict(), "world_size": trainer.world_size, "step_losses": result.step_losses}
    summary = {"data": dataset.name, "arch": spec.name, "best_epoch": full["best_epoch"],
               "val": full["val"], "test": full["test"], "world_size": full["world_size"],
               "resumed_from": full["resumed_from"], "train_samples_per_s": full["train_samples_per_s"],
               "seconds": round(full["seconds"], 1)}
    if args.output:
        Path(args.output).write_text(json.dumps(full))
    if args.json:
        print(json.dumps(summary))
    else:
        _print_metrics(summary)
    return 0


def _print_metrics(summary: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{summary['arch']} on {summary['data']} (best epoch {summary['best_epoch']})")
    for column in ("split", "AUC", "logloss", "NE", "rows"):
        table.add_column(column, justify="right")
    for split in ("val", "test"):
        m = summary[split]
        table.add_row(split, f"{m['auc']:.4f}", f"{m['logloss']:.4f}", f"{m['ne']:.4f}", str(m["n"]))
    console = Console()
    console.print(table)
    console.print(f"{summary['train_samples_per_s']:,.0f} training samples/s, {summary['seconds']:.1f} s")


def cmd_data_describe(args: argparse.Namespace) -> int:
    info = _load_data(args).describe()
    if args.json:
        print(json.dumps(info))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{info['name']}: {len(info['dense'])} dense, {len(info['sparse'])} sparse")
    table.add_column("feature")
    table.add_column("kind")
    table.add_column("ids", justify="right")
    for name in info["dense"]:
        table.add_row(name, "dense", "")
    for f in info["sparse"]:
        table.add_row(f["name"], "multi-hot" if f["multi_hot"] else "sparse", f"{f['num_embeddings']:,}")
    console = Console()
    console.print(table)
    rows = ", ".join(f"{k} {v:,}" if v is not None else f"{k} (streamed)" for k, v in info["rows"].items())
    console.print(f"rows: {rows}")
    for key, value in info.items():
        if key not in ("name", "dense", "sparse", "rows"):
            console.print(f"{key}: {value}")
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    import optuna
    from rich.console import Console

    from autorec.study import StudyConfig, dumps, finished_count, run_study

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    config = StudyConfig.load(args.study)
    console = Console(stderr=True)
    log = console.print if not args.json else (lambda *_: None)
    show = not args.json and sys.stderr.isatty()

    if args.backend == "ray":
        from autorec.ray_backend import run_study_ray

        summary = run_study_ray(config, address=args.ray_address, workers=args.workers, log=log)
    else:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), TextColumn("{task.fields[best]}"), console=console,
                            disable=not show)
        task = progress.add_task(f"search {config.name}", total=config.budget.trials, best="")

        def on_trial(study: Any, trial: Any) -> None:
            done = [t for t in study.get_trials(deepcopy=False) if t.user_attrs.get("metrics")]
            best = max(done, key=lambda t: t.user_attrs["metrics"]["val"]["auc"], default=None)
            text = (f"best val AUC {best.user_attrs['metrics']['val']['auc']:.4f} (trial {best.number})"
                    if best else "")
            progress.update(task, completed=finished_count(study), best=text)
            state = trial.state.name.lower()
            auc = trial.user_attrs.get("metrics", {}).get("val", {}).get("auc")
            log(f"trial {trial.number} {state}" + (f": val AUC {auc:.4f}" if auc is not None else "")
                + (f" ({trial.user_attrs['fail_reason']})" if trial.user_attrs.get("fail_reason") else ""))

        with progress:
            summary = run_study(config, workers=args.workers, on_trial=on_trial, log=log)
    if args.json:
        print(dumps(summary))
    else:
        _print_summary(summary)
    return 0


def _print_summary(summary: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"study {summary.name}: best trials by validation AUC")
    for column in ("trial", "val AUC", "test AUC", "MFLOPs/sample", "seconds"):
        table.add_column(column, justify="right")
    done = sorted((t for t in summary.trials if t["val_auc"] is not None), key=lambda t: -t["val_auc"])
    for t in done[:5]:
        flops = t["costs"].get("flops")
        table.add_row(str(t["number"]), f"{t['val_auc']:.4f}", f"{t['test_auc']:.4f}",
                      f"{flops / 1e6:.2f}" if flops is not None else "", f"{t['seconds'] or 0:.0f}")
    for name, b in summary.baselines.items():
        flops = b.get("costs", {}).get("flops")
        table.add_row(f"preset {name}", f"{b['val']['auc']:.4f}", f"{b['test']['auc']:.4f}",
                      f"{flops / 1e6:.2f}" if flops is not None else "", "")
    console = Console()
    console.print(table)
    console.print(summary.verdict())


def cmd_export(args: argparse.Namespace) -> int:
    from autorec.study import StudyConfig, export_trials

    config = StudyConfig.load(args.study)
    if args.trial is not None and args.best is not None:
        raise UsageError("--trial and --best exclude each other")
    export_trials(config, Path(args.output), trial=args.trial, best=args.best or 1,
                  log=lambda m: print(m, file=sys.stderr))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from autorec.report import write_report
    from autorec.study import StudyConfig, load_study

    path = write_report(load_study(StudyConfig.load(args.study)), args.output, top_k=args.top_k)
    print(f"report written to {path}", file=sys.stderr)
    return 0


def cmd_dashboard(args: argparse.Namespace) -> int:
    from autorec.dashboard import prepare_dashboard, serve_dashboard
    from autorec.study import StudyConfig, load_study

    config = StudyConfig.load(args.study)
    saved = prepare_dashboard(load_study(config))
    print(f"saved {len(saved)} figures into study {config.name!r}; serving optuna-dashboard on "
          f"http://{args.host}:{args.port}/ (Ctrl-C stops it)", file=sys.stderr)
    serve_dashboard(config.storage_url, host=args.host, port=args.port,
                    artifact_dir=config.directory / "artifacts")
    return 0


def _add_distributed_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("distributed (launched through torchrun when N > 1 or M > 1)")
    group.add_argument("--nproc-per-node", type=int, default=1, metavar="N", help="processes per node")
    group.add_argument("--nnodes", default="1", metavar="M", help="nodes, or MIN:MAX for elastic")
    group.add_argument("--rdzv-endpoint", metavar="HOST:PORT", help="rendezvous of a multi-node run")
    group.add_argument("--rdzv-id", help="the run's id, the same on every node")
    group.add_argument("--node-rank", type=int, help="this node's rank (static rendezvous)")
    group.add_argument("--max-restarts", type=int, default=0, metavar="K",
                       help="restart all workers up to K times after a failure (resumes from "
                            "--checkpoint-dir)")
    group.add_argument("--plan", help="sharding plan JSON: table -> sharding type and ranks")
    group.add_argument("--save-plan", metavar="FILE", help="write the plan in use as plan JSON")
    group.add_argument("--dense-parallel", default="ddp", choices=["ddp", "fsdp"],
                       help="dense parts under DDP or FSDP2 (fully_shard)")
    group.add_argument("--checkpoint-every", type=int, metavar="STEPS",
                       help="also write a resumable checkpoint every STEPS steps")
    group.add_argument("--no-resume", action="store_true",
                       help="start afresh even when --checkpoint-dir holds a checkpoint")
    group.add_argument("--pipeline", action="store_true",
                       help="train through torchrec's TrainPipelineSparseDist (overlaps input_dist)")
    group.add_argument("--ray-workers", type=int, metavar="N",
                       help="train on N Ray Train workers (TorchTrainer) instead of torchrun")
    group.add_argument("--ray-address", help="Ray cluster to join (default: RAY_ADDRESS, else a local one)")
    group.add_argument("--ray-storage", help="where Ray Train keeps the run (default: ~/ray_results)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="autorec", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    train = commands.add_parser("train", help="train a preset or an arch.json on a dataset")
    _add_data_args(train)
    train.add_argument("--arch", default="dlrm", help="a preset (dlrm, dcnv2, wukong, dhen) or an arch.json")
    train.add_argument("--epochs", type=int, default=10)
    train.add_argument("--batch-size", type=int, default=1024)
    train.add_argument("--lr", type=float, default=1e-3, help="dense learning rate")
    train.add_argument("--embedding-lr", type=float, default=0.05, help="row-wise Adagrad learning rate")
    train.add_argument("--optimizer", default="adam", choices=["adam", "adagrad"], help="dense optimizer")
    train.add_argument("--patience", type=int, default=2, help="epochs without val AUC gain before stopping")
    train.add_argument("--max-steps-per-epoch", type=int, help="cap on training steps per epoch")
    train.add_argument("--checkpoint-dir", help="keep checkpoints here (default: a temporary folder)")
    train.add_argument("--num-workers", type=int, default=0, help="DataLoader prefetch workers")
    train.add_argument("--json", action="store_true", help="print the final metrics as one JSON object")
    train.add_argument("--output", help="write the full result (history, per-step losses) as JSON here")
    _add_distributed_args(train)
    train.set_defaults(func=cmd_train)

    search = commands.add_parser("search", help="run (or resume) an architecture study")
    search.add_argument("study", help="a study file, e.g. studies/quickstart.yaml")
    search.add_argument("--workers", type=int, help="local worker processes (default: the study's)")
    search.add_argument("--backend", default="local", choices=["local", "ray"])
    search.add_argument("--ray-address", help="join this Ray cluster (default: start a local one)")
    search.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    search.set_defaults(func=cmd_search)

    export = commands.add_parser("export", help="export trained architectures of a study")
    export.add_argument("study", help="the study file")
    export.add_argument("--trial", type=int, help="this trial number")
    export.add_argument("--best", type=int, help="the K best trials by validation AUC (default 1)")
    export.add_argument("-o", "--output", required=True, help="output folder")
    export.set_defaults(func=cmd_export)

    report = commands.add_parser("report", help="write a self-contained HTML report of a study")
    report.add_argument("study", help="the study file")
    report.add_argument("-o", "--output", default="report.html")
    report.add_argument("--top-k", type=int, default=3, help="architectures drawn")
    report.set_defaults(func=cmd_report)

    dashboard = commands.add_parser("dashboard", help="serve the study in optuna-dashboard")
    dashboard.add_argument("study", help="the study file")
    dashboard.add_argument("--host", default="127.0.0.1")
    dashboard.add_argument("--port", type=int, default=8080)
    dashboard.set_defaults(func=cmd_dashboard)

    data = commands.add_parser("data", help="inspect datasets").add_subparsers(
        dest="data_command", required=True)
    describe = data.add_parser("describe", help="print a dataset's schema and sizes")
    describe.add_argument("data", metavar="DATASET")
    describe.add_argument("--data-path")
    describe.add_argument("--data-opt", action="append", default=[], metavar="KEY=VALUE")
    describe.add_argument("--seed", type=int, default=0)
    describe.add_argument("--json", action="store_true")
    describe.set_defaults(func=cmd_data_describe)

    from autorec.precision.command import add_parser as add_precision_parser

    add_precision_parser(commands)
    from autorec.costs.latency_command import add_parser as add_profile_latency_parser
    from autorec.sharding.profile_command import add_parser as add_profile_sharding_parser

    profile = commands.add_parser("profile", help="measure costs with the real kernels").add_subparsers(
        dest="profile_command", required=True)
    add_profile_sharding_parser(profile)
    add_profile_latency_parser(profile)
    from autorec.sharding.command import add_parser as add_shard_parser

    add_shard_parser(commands)
    from autorec.towers.command import add_parser as add_towers_parser

    add_towers_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    if not sys.warnoptions:  # torch/torchrec deprecation chatter drowns the output; -W brings it back
        warnings.simplefilter("ignore")
    # torchrec logs a warning per data-parallel table at every state_dict; keep errors only.
    logging.getLogger().setLevel(logging.ERROR)
    logging.getLogger("torchrec").setLevel(logging.ERROR)
    logging.getLogger("torch").setLevel(logging.ERROR)
    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # what torchrun's workers re-run
    try:
        return int(args.func(args))
    except (ArchSpecError, DataError, UsageError, KeyError, ValueError, ImportError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"autorec: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
