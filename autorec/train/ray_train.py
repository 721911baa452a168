"""The same Trainer under Ray Train's TorchTrainer, for users on Ray clusters.

Ray Train starts ``num_workers`` worker processes (on one machine or a cluster), sets up their
torch.distributed group (gloo on CPU, nccl on GPU) and runs :func:`train_loop` in each; from
there on it is the torchrun path: DistributedModelParallel, each rank on its part of every
global batch, metrics over all ranks, checkpoints in ``config.checkpoint_dir`` (which must be
on storage every worker sees). Ray is imported lazily: the rest of autorec works without it.

Example:
    >>> from autorec.presets import preset
    >>> ds = load_dataset("synthetic", preset="tiny", num_samples=1000)  # doctest: +SKIP
    >>> out = train_on_ray(preset("dlrm", ds.schema), "synthetic",  # doctest: +SKIP
    ...                    {"preset": "tiny", "num_samples": 1000}, TrainConfig(epochs=1),
    ...                    num_workers=2)
    >>> out["world_size"], 0.0 <= out["test"]["auc"] <= 1.0  # doctest: +SKIP
    (2, True)
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from autorec.arch import ArchSpec
from autorec.config.train import RAY_PLACEMENTS
from autorec.data import load_dataset
from autorec.train.trainer import TrainConfig, Trainer

OBJECT_STORE_BYTES = 200 * 2**20  # the workers pass only configs and metrics through it
RESULT = "autorec-result.json"


def train_loop(cfg: dict[str, Any]) -> None:
    """What every Ray Train worker runs: build the dataset and Trainer, fit, report once."""
    import ray.train

    dataset = load_dataset(cfg["data"], path=cfg.get("data_path"), seed=cfg["config"]["seed"],
                           **cfg["data_options"])
    spec = ArchSpec.from_dict(cfg["arch"])
    trainer = Trainer(spec, dataset, TrainConfig(**cfg["config"]))
    result = trainer.fit()
    out = {**result.to_dict(), "world_size": trainer.world_size, "step_losses": result.step_losses,
           "ray_nodes": _worker_nodes()}
    # Every worker reports (Ray Train synchronises on it). Ray Train keeps what a report's
    # checkpoint holds, so rank 0 hands over the result as a file in one.
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = None
        if trainer.rank == 0:
            (Path(tmp) / RESULT).write_text(json.dumps(out))
            checkpoint = ray.train.Checkpoint.from_directory(tmp)
        ray.train.report({"val_auc": out["val"].get("auc"), "test_auc": out["test"].get("auc")},
                         checkpoint=checkpoint)


def _worker_nodes() -> list[str]:
    """The Ray node id of every worker, by rank (gathered over the job's process group)."""
    import ray
    import torch.distributed as dist

    node = ray.get_runtime_context().get_node_id()
    if not dist.is_initialized():
        return [node]
    nodes: list[str] = [""] * dist.get_world_size()
    dist.all_gather_object(nodes, node)
    return nodes


def train_on_ray(spec: ArchSpec, data: str, data_options: dict[str, Any], config: TrainConfig, *,
                 num_workers: int, data_path: str | None = None, use_gpu: bool = False,
                 address: str | None = None, storage_path: str | None = None,
                 placement: str = "PACK") -> dict[str, Any]:
    """Train ``spec`` on ``num_workers`` Ray Train workers; the result dict of rank 0, with the
    Ray node id of each worker under ``ray_nodes``.

    ``address`` joins a running cluster (default: the one in RAY_ADDRESS, else a local one);
    ``storage_path`` is where Ray Train keeps the run (on a cluster: storage all nodes see;
    default: Ray's, ``~/ray_results``); ``placement`` is the workers' placement group strategy
    (Ray's ``PACK`` fills a node first; ``SPREAD``, ``STRICT_SPREAD`` put them on distinct nodes).
    """
    try:
        import ray
        from ray.train import RunConfig, ScalingConfig
        from ray.train.torch import TorchConfig, TorchTrainer
    except ImportError as exc:
        raise ImportError("Ray Train is needed for --ray-workers: pip install 'ray[train]' "
                          f"({exc})") from None
    if num_workers < 1:
        raise ValueError(f"--ray-workers: expected a positive integer, got {num_workers}")
    if placement not in RAY_PLACEMENTS:
        raise ValueError(f"--ray-placement: expected one of {', '.join(RAY_PLACEMENTS)}, got {placement!r}")
    if not ray.is_initialized():
        if address or os.environ.get("RAY_ADDRESS"):  # a cluster (``ray job submit`` sets it)
            ray.init(address=address, log_to_driver=False)
        else:  # never join a cluster someone else started on this machine
            ray.init(address="local", num_cpus=num_workers, object_store_memory=OBJECT_STORE_BYTES,
                     include_dashboard=False, log_to_driver=False)
    trainer = TorchTrainer(
        train_loop,
        train_loop_config={"arch": spec.to_dict(), "data": data, "data_path": data_path,
                           "data_options": dict(data_options),
                           "config": {**dataclasses.asdict(config), "progress": False}},
        scaling_config=ScalingConfig(num_workers=num_workers, use_gpu=use_gpu, placement_strategy=placement),
        torch_config=TorchConfig(backend="nccl" if use_gpu else "gloo"),
        run_config=RunConfig(name="autorec-train", storage_path=storage_path),
    )
    result = trainer.fit()
    if result.error is not None:
        raise result.error
    with result.checkpoint.as_directory() as folder:
        return json.loads((Path(folder) / RESULT).read_text())
