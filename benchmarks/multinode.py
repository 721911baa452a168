"""Issue 26's figures: two nodes emulated on this machine (:mod:`benchmarks.localhost_nodes`).

    .venv/bin/python -m benchmarks.multinode                    # every part, to results/multinode.json
    .venv/bin/python -m benchmarks.multinode --parts ray,raytrain

Parts:
  torchrun  per preset (DLRM, Wukong), one training on 1 node x 4 processes, then on 2 x 2 (two
            ``autorec train --nnodes 2`` launchers, c10d rendezvous on 127.0.0.1), both with the
            plan ``autorec shard`` makes for 4 ranks: test AUC difference, samples/s of each.
  kill      an elastic 2-node job (``--nnodes 1:2 --max-restarts 3``) whose second node is killed
            with -9 after its first checkpoint: does it re-form on the first and resume from the
            4-rank checkpoint, and how far is its test AUC from the same job uncut.
  ray       a search of TRIALS trials on a two-node Ray cluster (``ray start --head`` and
            ``ray start --address``, one CPU each); the second node is killed with -9 after the
            first trial completes: trials lost (budget minus distinct completed trials), repeated
            (a cut trial completed as well as its retry, or more completed than the budget), and
            the nodes the trials ran on.
  raytrain  one Ray Train training (``trainers/ray_job.sh``, STRICT_SPREAD) on the two-node
            cluster: the nodes its workers ran on, and its test AUC against one process.

The nodes share this machine's cores and talk over loopback, so samples/s compare the two
launch layouts here, not a network: on a cluster the 2 x 2 layout pays for the inter-node links.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from benchmarks.localhost_nodes import (
    ROOT,
    RayCluster,
    finish,
    free_port,
    lose_node,
    start_nodes,
    wait_for_both_nodes_training,
)
from benchmarks.results_file import RESULTS, merge_results

PARTS = ("torchrun", "kill", "ray", "raytrain")
TRIALS = 8
AUC_TOL = 2e-3  # a resumed run's test AUC against the uncut run (float order, resharded optimizer)


def data_args(samples: int) -> list[str]:
    return ["--data", "synthetic", "--data-opt", "preset=tiny", "--data-opt", f"num_samples={samples}"]


def train_args(args: argparse.Namespace, samples: int) -> list[str]:
    return [*data_args(samples), "--arch", "dlrm", "--batch-size", str(args.batch_size), "--lr", "3e-3",
            "--embedding-lr", "0.1", "--json"]


def planner_plan(folder: Path, samples: int, arch: str) -> Path:
    """The plan ``autorec shard`` (greedy + polish) makes for the ``arch`` preset at 4 ranks."""
    from autorec.cli import main as autorec
    from autorec.data import load_dataset
    from autorec.presets import preset

    data = load_dataset("synthetic", seed=0, preset="tiny", num_samples=samples)
    preset(arch, data.schema).save(folder / f"{arch}.json")
    out = folder / f"plan4-{arch}.json"
    code = autorec(["shard", "--arch", str(folder / f"{arch}.json"), "--world-size", "4",
                    "--memory-per-device", "1GB", "--out", str(out), "--no-baselines"])
    if code:
        raise SystemExit(f"autorec shard exited with {code}")
    return out


def one_node(folder: Path, args: list[str], name: str) -> dict[str, Any]:
    """``autorec train --nproc-per-node 4`` on this node; its --output record."""
    out = folder / f"{name}.json"
    proc = subprocess.run([sys.executable, "-m", "autorec.cli", "train", "--nproc-per-node", "4", *args,
                           "--output", str(out)], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    if proc.returncode:
        raise RuntimeError(f"1 x 4 exited with {proc.returncode}:\n{proc.stderr[-3000:]}")
    return json.loads(out.read_text())


def two_nodes(folder: Path, args: list[str], name: str) -> dict[str, Any]:
    """Two launchers of 2 processes each; the --output record of rank 0."""
    logs = folder / name
    logs.mkdir()
    finish(start_nodes(logs, free_port(), name, [*args, "--output", str(folder / f"{name}.json")]), logs)
    return json.loads((folder / f"{name}.json").read_text())


def part_torchrun(folder: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Per preset (``--archs``): ``torchrun_<arch>_...`` figures; ``torchrun_2node_auc_diff`` is
    the largest difference over them, the unprefixed samples/s the first preset's."""
    out: dict[str, Any] = {"torchrun_samples": args.samples, "torchrun_batch_size": args.batch_size}
    for arch in args.archs.split(","):
        plan = planner_plan(folder, args.samples, arch)
        common = [*train_args(args, args.samples), "--arch", arch, "--epochs", "1", "--plan", str(plan)]
        one = one_node(folder, [*common, "--checkpoint-dir", str(folder / f"ck1-{arch}")], f"one-{arch}")
        two = two_nodes(folder, [*common, "--checkpoint-dir", str(folder / f"ck2-{arch}")], f"two-{arch}")
        if one["world_size"] != 4 or two["world_size"] != 4:
            raise RuntimeError(f"{arch}: world sizes {one['world_size']} and {two['world_size']}, expected 4")
        one_test, two_test = one["test"], two["test"]
        out.update({f"torchrun_{arch}_2node_auc_diff": abs(two_test["auc"] - one_test["auc"]),
                    f"torchrun_{arch}_2node_logloss_diff": abs(two_test["logloss"] - one_test["logloss"]),
                    f"torchrun_{arch}_1x4_test_auc": one["test"]["auc"],
                    f"torchrun_{arch}_2x2_test_auc": two["test"]["auc"],
                    f"torchrun_{arch}_1x4_samples_per_s": one["train_samples_per_s"],
                    f"torchrun_{arch}_2x2_samples_per_s": two["train_samples_per_s"]})
    archs = args.archs.split(",")
    first = archs[0]
    out["torchrun_2node_auc_diff"] = max(out[f"torchrun_{a}_2node_auc_diff"] for a in archs)
    out["torchrun_1x4_samples_per_s"] = out[f"torchrun_{first}_1x4_samples_per_s"]
    out["torchrun_2x2_samples_per_s"] = out[f"torchrun_{first}_2x2_samples_per_s"]
    out["torchrun_2x2_vs_1x4_speed"] = out["torchrun_2x2_samples_per_s"] / out["torchrun_1x4_samples_per_s"]
    return out


def part_kill(folder: Path, args: argparse.Namespace) -> dict[str, Any]:
    samples = args.kill_samples
    common = [*train_args(args, samples), "--epochs", "2", "--patience", "2", "--checkpoint-every", "20"]
    uncut = two_nodes(folder, [*common, "--checkpoint-dir", str(folder / "uncut_ck")], "uncut")
    logs, ck = folder / "cut", folder / "cut_ck"
    logs.mkdir()
    elastic = ["--nnodes", "1:2", "--max-restarts", "3", "--checkpoint-dir", str(ck),
               "--output", str(folder / "cut.json")]
    nodes = start_nodes(logs, free_port(), "cut", [*common, *elastic])
    while not (ck / "LATEST").exists():  # the first resumable checkpoint (step 20)
        if any(p.poll() is not None for p in nodes):
            raise RuntimeError("the job ended before a node could be lost")
        time.sleep(0.2)
    lost_at = time.monotonic()
    lose_node(nodes[1])
    finish(nodes[:1], logs)
    out = json.loads((folder / "cut.json").read_text())
    said = "autorec: restart 1 of the workers: resuming from" in (logs / "node0.log").read_text()
    diff = abs(out["test"]["auc"] - uncut["test"]["auc"])
    resumed = out["resumed_from"] or {}
    ok = said and out["world_size"] == 2 and resumed.get("world_size") == 4 and diff <= AUC_TOL
    return {"torchrun_node_kill_resumed": int(ok), "torchrun_node_kill_auc_diff": diff,
            "torchrun_node_kill_resumed_step": resumed.get("step"),
            "torchrun_node_kill_world_sizes": [resumed.get("world_size"), out["world_size"]],
            "torchrun_node_kill_finish_s": round(time.monotonic() - lost_at, 1),
            "torchrun_node_kill_auc_tol": AUC_TOL}


def ray_study(folder: Path) -> Path:
    data = {"name": "synthetic", "options": {"preset": "tiny", "num_samples": 6000}, "seed": 0}
    config = {"name": "multinode", "data": data, "space": str(ROOT / "search_spaces" / "zoo.yaml"),
              "strategy": "random", "objectives": ["val_auc"],
              "budget": {"trials": TRIALS, "epochs": 3, "batch_size": 128, "patience": 3},
              "pruner": "none", "seed": 0}
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def part_ray(folder: Path, cluster: RayCluster) -> dict[str, Any]:
    import optuna
    from optuna.trial import TrialState

    from autorec.study import StudyConfig, open_storage

    study = ray_study(folder)
    log = folder / "search.log"
    proc = subprocess.Popen([sys.executable, "-m", "autorec.cli", "search", str(study), "--backend", "ray",
                             "--ray-address", cluster.address, "--workers", "2", "--json"],
                            cwd=ROOT, env=cluster.env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    wait_for_both_nodes_training(folder / "multinode" / "study.db", proc, log)
    cluster.lose_second_node()
    if proc.wait() != 0:
        raise RuntimeError(log.read_text()[-3000:])
    config = StudyConfig.load(study)
    trials = optuna.load_study(study_name=config.name, storage=open_storage(config.storage_url)).get_trials()
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    cut = [t for t in trials if t.state == TrialState.FAIL and t.user_attrs.get("interrupted")]
    done = {t.number for t in complete}
    repeated = sum(1 for t in complete if t.user_attrs.get("retry_of") in done)
    repeated += max(0, len(complete) - TRIALS)
    return {"ray_2node_trials": TRIALS, "ray_2node_trials_lost": TRIALS - len(done),
            "ray_2node_trials_repeated": repeated, "ray_2node_trials_cut": len(cut),
            "ray_nodes_used": len({t.user_attrs.get("node") for t in trials if t.user_attrs.get("node")})}


def part_raytrain(folder: Path, cluster: RayCluster, args: argparse.Namespace) -> dict[str, Any]:
    from autorec.data import load_dataset
    from autorec.presets import preset
    from autorec.train.trainer import TrainConfig, Trainer

    out = folder / "raytrain.json"
    env = {**cluster.env, "RAY_ADDRESS": cluster.address, "PYTHON": sys.executable, "WORKERS": "2",
           "PLACEMENT": "STRICT_SPREAD", "DATA_OPTS": f"preset=tiny num_samples={args.kill_samples}",
           "STORAGE": str(folder / "ray_results")}
    proc = subprocess.run(["bash", "trainers/ray_job.sh", "--batch-size", str(args.batch_size),
                           "--lr", "3e-3", "--embedding-lr", "0.1", "--epochs", "1", "--output", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(proc.stderr[-3000:])
    got = json.loads(out.read_text())
    data = load_dataset("synthetic", seed=0, preset="tiny", num_samples=args.kill_samples)
    config = TrainConfig(epochs=1, batch_size=args.batch_size, dense_lr=3e-3, embedding_lr=0.1,
                         progress=False)
    reference = Trainer(preset("dlrm", data.schema), data, config).fit()
    return {"ray_train_2node_nodes_used": len(set(got["ray_nodes"])),
            "ray_train_world_size": got["world_size"],
            "ray_train_2node_auc_diff": abs(got["test"]["auc"] - reference.test["auc"])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated of {', '.join(PARTS)}")
    parser.add_argument("--samples", type=int, default=100001, help="the torchrun part's samples")
    parser.add_argument("--kill-samples", type=int, default=30001,
                        help="the kill and raytrain parts' samples")
    parser.add_argument("--batch-size", type=int, default=200)
    parser.add_argument("--archs", default="dlrm,wukong", help="the torchrun part's presets")
    parser.add_argument("--json", type=Path, default=RESULTS / "multinode.json")
    args = parser.parse_args(argv)
    parts = args.parts.split(",")
    unknown = set(parts) - set(PARTS)
    if unknown:
        parser.error(f"--parts: unknown {sorted(unknown)}; expected some of {', '.join(PARTS)}")
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="autorec-multinode-") as tmp:
        folder = Path(tmp)
        for name in ("torchrun", "kill"):
            if name in parts:
                (folder / name).mkdir()
                figures.update((part_torchrun if name == "torchrun" else part_kill)(folder / name, args))
                print(json.dumps(figures), flush=True)
        if "raytrain" in parts:  # first: the ray part loses the cluster's second node
            (folder / "raytrain").mkdir()
            cluster = RayCluster(folder / "raytrain")
            try:
                figures.update(part_raytrain(folder / "raytrain", cluster, args))
            finally:
                cluster.stop()
            print(json.dumps(figures), flush=True)
        if "ray" in parts:
            (folder / "ray").mkdir()
            cluster = RayCluster(folder / "ray")
            try:
                figures.update(part_ray(folder / "ray", cluster))
            finally:
                cluster.stop()
    figures["nodes_emulated"] = ("localhost: separate launchers / ray start processes sharing the "
                                 "machine's cores")
    merge_results(args.json, figures)
    print(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
