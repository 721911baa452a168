"""Train an ArchSpec on a dataset: torchrec sharded embeddings, early stopping, checkpoints.

The :class:`Trainer` builds the sharded model and its optimizers, runs the steps, evaluates over
all ranks and saves and resumes checkpoints. What it takes and gives back (TrainConfig,
EpochRecord, TrainResult) is in :mod:`autorec.train.records`, the checkpoint folder's layout in
:mod:`autorec.train.checkpoints`; both are re-exported here, where callers have always found them.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import shutil
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from rich.progress import Progress
from torchrec.datasets.utils import Batch
from torchrec.optim.apply_optimizer_in_backward import apply_optimizer_in_backward
from torchrec.optim.keyed import CombinedOptimizer
from torchrec.optim.rowwise_adagrad import RowWiseAdagrad

from autorec.arch import ArchSpec
from autorec.data import RecDataset
from autorec.metrics import binary_metrics, monitored_score
from autorec.models import build_model
from autorec.train import embedding_optim as emb_optim
from autorec.train.autocast import forward_autocast, fp32_matmul
from autorec.train.checkpoint_reader import (
    arch_key,
    load_state,
    read_meta,
    resumable_meta,
    resumed_sharding_types,
)
from autorec.train.checkpoints import (
    META,
    latest,
    point_latest,
    publish,
    restore,
    save_states,
    staging,
    write_json,
)
from autorec.train.compiled import compile_dense
from autorec.train.distributed import (
    checkpoint_root,
    default_device,
    ensure_process_group,
    gather_rows,
    rank_and_world,
    shard,
    sharding_types,
)
from autorec.train.embedding_init import init_embeddings
from autorec.train.memory import keep_freed_memory
from autorec.train.partition import rank_batches
from autorec.train.pipeline import SparseDistPipeline
from autorec.train.plan import load_plan
from autorec.train.prefetch import prefetched
from autorec.train.progress_bar import progress_bar
from autorec.train.records import (
    DENSE_OPTIMIZERS,
    EpochRecord,
    TrainConfig,
    TrainingDiverged,
    TrainingTimeLimit,
    TrainResult,
    lr_factor,
    seed_everything,
)
from autorec.train.resharding import load_resharded
from autorec.train.waiting import Waited

__all__ = ["DENSE_OPTIMIZERS", "EpochRecord", "TrainConfig", "TrainResult", "Trainer", "TrainingDiverged",
           "TrainingTimeLimit", "seed_everything", "train"]


class Trainer:
    """Trains ``spec`` on ``dataset`` under torchrec DistributedModelParallel, on one rank or many.

    Under torchrun (or Ray Train) every rank builds the same Trainer: tables are sharded by
    ``config.plan`` or torchrec's planner, the dense parts are data-parallel, each rank trains on
    its part of every global batch, and metrics are computed over all ranks' predictions.

    Args:
        spec: the architecture.
        dataset: the data; its train split trains, val drives early stopping, test is reported.
        config: see :class:`TrainConfig`.
        on_epoch: called after every epoch's validation (a search reports and prunes here by
            raising).

    Example:
        >>> from autorec.data import load_dataset
        >>> from autorec.presets import preset
        >>> ds = load_dataset("movielens100k")
        >>> result = Trainer(preset("dlrm", ds.schema), ds, TrainConfig(epochs=1)).fit()
        >>> 0.5 < result.test["auc"] <= 1.0
        True
    """

    def __init__(self, spec: ArchSpec, dataset: RecDataset, config: TrainConfig | None = None,
                 on_epoch: Callable[[EpochRecord], None] | None = None) -> None:
        self.spec, self.dataset = spec, dataset
        self.config = config or TrainConfig()
        self.on_epoch = on_epoch
        self.device = default_device()
        missing = set(spec.feature_names) - set(dataset.schema.sparse_names)
        if missing:
            raise ValueError(f"the architecture uses features {sorted(missing)} that dataset "
                             f"{dataset.name!r} lacks; it has {', '.join(dataset.schema.sparse_names)}")
        if spec.n_dense != dataset.schema.n_dense:
            raise ValueError(f"the architecture expects n_dense={spec.n_dense}, dataset "
                             f"{dataset.name!r} has {dataset.schema.n_dense} dense features")
        if self.config.keep_freed_memory:
            keep_freed_memory()  # process-wide, once: the step's large temporaries stay warm
        ensure_process_group()
        self.rank, self.world_size = rank_and_world()
        plan = None
        if self.config.plan:
            plan = load_plan(self.config.plan, spec, self.world_size, self.device.type)
        seed_everything(self.config.seed)
        model = build_model(spec, device=torch.device("meta"))
        fused = emb_optim.fused_optimizer_kwargs(self.config.embedding_lr, self.config.embedding_weight_decay)
        apply_optimizer_in_backward(RowWiseAdagrad, model.sparse_arch.parameters(), fused)
        self.model = shard(model, self.device, plan=plan, dense_parallel=self.config.dense_parallel,
                           keep_types=None if plan else resumed_sharding_types(self.config.checkpoint_dir,
                                                                               self.config.resume),
                           check=lambda p: emb_optim.check_embedding_weight_decay(
                               fused["weight_decay"], p, self.device),
                           fuse_alone=emb_optim.fusable_alone(fused["weight_decay"], self.device),
                           huge_pages=self.config.huge_pages)
        init_embeddings(self.model, self.config.seed)  # the same start at any world size and plan
        if self.config.compile:
            compile_dense(self.model.module)
        self._unfused = emb_optim.unfused_optimizers(self.model, self.config)
        self.optimizer = CombinedOptimizer([self.model.fused_optimizer, *self._unfused])
        self._base_lrs = [group["lr"] for group in self.optimizer.param_groups]
        self._pipeline = None
        self._deadline: float | None = None  # set by fit() from time_limit_s
        self._paused = False  # the last epoch stopped at pause_at_step (_epoch)
        if self.config.pipeline:
            self._pipeline = SparseDistPipeline(self.model, self.optimizer, self.device, self._step_loss,
                                                self._products)

    # ---- steps ------------------------------------------------------------------------
    def _batches(self, split: str, batch_size: int, shuffle: bool, epoch: int = 0) -> Iterable[Batch]:
        """This rank's parts of the global batches of ``split``."""
        return rank_batches(self.dataset, split, batch_size, shuffle=shuffle, seed=self.config.seed,
                            epoch=epoch, rank=self.rank, world_size=self.world_size,
                            num_workers=self.config.num_workers)

    def _step_loss(self, batch: Batch) -> tuple[torch.Tensor, tuple[float, int]]:
        """Forward on this rank's part of a global batch: (the loss to backpropagate,
        (global mean loss, global samples))."""
        with forward_autocast(self.config.autocast, self.device):
            logits = self.model(batch.dense_features, batch.sparse_features)
        loss_sum = torch.nn.functional.binary_cross_entropy_with_logits(
            logits.float(), batch.labels, reduction="sum")
        stats = torch.stack([loss_sum.detach().double(),
                             torch.tensor(float(batch.labels.numel()), dtype=torch.float64,
                                          device=loss_sum.device)])
        if self.world_size > 1:
            dist.all_reduce(stats)
        total_loss, total = stats.tolist()
        # DDP averages the dense gradients over ranks and torchrec divides the embedding ones by
        # the world size, so scaling the local sum by W / global count gives exactly the
        # single-process gradient of the global batch's mean loss, even for uneven parts.
        return loss_sum * (self.world_size / max(total, 1.0)), (total_loss / max(total, 1.0), int(total))

    def train_step(self, batch: Batch) -> tuple[float, int]:
        """One optimizer step on this rank's part of a global batch: (global mean loss, global samples)."""
        with self._products():
            loss, out = self._step_loss(batch.to(self.device, non_blocking=True))
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
        return out

    def _products(self) -> AbstractContextManager[None]:
        """fp32 products at ``fp32_matmul``'s precision: a step's forward and backward, or a forward."""
        return fp32_matmul(self.config.fp32_matmul, self.device)

    @torch.no_grad()
    def predict(self, split: str, transform: Callable[[Batch], Batch] | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
        """(labels, click probabilities) over a whole split (of the validation split, its first
        ``val_samples`` when set), in the single-process loader's order, each batch passed through
        ``transform`` first when given (a feature permuted, say). Collective under several
        ranks: every rank gets the whole split."""
        if self._pipeline is not None:
            self._pipeline.detach()
        self.model.eval()
        labels, probs, parts = [], [], []
        size, limit = self.config.eval_batch_size, self.config.val_samples if split == "val" else None
        for batch in itertools.islice(self._batches(split, size, shuffle=False),
                                      None if limit is None else math.ceil(limit / size)):
            batch = (batch if transform is None else transform(batch)).to(self.device)
            with forward_autocast(self.config.autocast, self.device), self._products():
                logits = self.model(batch.dense_features, batch.sparse_features)
            probs.append(torch.sigmoid(logits.float()).cpu())
            labels.append(batch.labels.cpu())
            parts.append(batch.labels.numel())
        self.model.train()
        local = torch.stack([torch.cat(labels).double(), torch.cat(probs).double()], 1).numpy()
        rows = gather_rows(local, parts)[:limit]  # (whole batches were scored: keep the first N)
        return rows[:, 0].astype(np.float32), rows[:, 1]

    def evaluate(self, split: str, transform: Callable[[Batch], Batch] | None = None) -> dict[str, float]:
        labels, probs = self.predict(split, transform)
        if not np.isfinite(probs).all():
            raise TrainingDiverged(f"the model predicts NaN or infinity on the {split} split")
        return binary_metrics(labels, probs)

    # ---- checkpoints ------------------------------------------------------------------
    def _layout(self) -> dict[str, Any]:
        """What a checkpoint's shards depend on: loading elsewhere needs resharding."""
        return {"world_size": self.world_size, "plan": str(self.model.plan),
                "sharding_types": sharding_types(self.model.plan),
                "dense_parallel": self.config.dense_parallel}

    def save_checkpoint(self, path: str | Path, meta: dict[str, Any] | None = None) -> None:
        """A torch.distributed.checkpoint (sharded: each rank writes its own shards) of the
        model and optimizer states, with ``meta`` and the sharding layout in ``autorec.json``.
        Collective; ``path`` must be on storage every rank sees. Written beside ``path`` and
        renamed there when whole (:func:`~autorec.train.checkpoints.publish`), so a kill mid-save
        never leaves a half-written checkpoint at ``path``."""
        path, staged = Path(path), staging(Path(path))
        if self.rank == 0:
            shutil.rmtree(staged, ignore_errors=True)  # what a save cut short left
        if self.world_size > 1:
            dist.barrier()
        save_states({"model": self.model.state_dict(), "optim": self.optimizer.state_dict()},
                    staged, path, self.rank, self.world_size)
        if self.rank == 0:
            write_json(staged / META, {**(meta or {}), "layout": self._layout(), "arch": self.spec.name,
                                       "arch_key": arch_key(self.spec)})
            publish(staged, path)
        if self.world_size > 1:
            dist.barrier()

    def load_checkpoint(self, path: str | Path, optimizer: bool = True) -> None:
        """Load a checkpoint written by :meth:`save_checkpoint` at this or another world size
        or plan (then through :func:`~autorec.train.resharding.load_resharded`)."""
        path = restore(Path(path))
        if not (path / ".metadata").exists():
            raise FileNotFoundError(f"{path}: not a checkpoint (no .metadata file)")
        meta_file = path / META
        layout = read_meta(path).get("layout") if meta_file.exists() else None
        if optimizer:
            # Adam's (and Adagrad's) state is created by its first step and a load fills only entries that
            # exist: a dummy step (zero gradients) creates them; the load then overwrites all.
            for unfused in self._unfused:
                unfused.init_state()
        state: dict[str, Any] = {"model": self.model.state_dict()}
        if optimizer:
            state["optim"] = self.optimizer.state_dict()
        if layout == self._layout():
            load_state(state, path)
        else:  # dcp.load at another layout raises nothing yet restores nothing (DESIGN.md)
            load_resharded(state, path)
        self.model.load_state_dict(state["model"])
        if optimizer:
            self.optimizer.load_state_dict(state["optim"])

    def _save_progress(self, root: Path, progress: dict[str, Any]) -> None:
        """A resumable checkpoint ``root/step-N`` and then the ``root/LATEST`` pointer to it,
        replaced atomically, so a kill mid-save leaves the previous one in force."""
        name = f"step-{progress['global_step']:09d}"
        self.save_checkpoint(root / name, meta=progress)
        if self.rank == 0:
            point_latest(root, name)
        if self.world_size > 1:
            dist.barrier()

    # ---- the loop ---------------------------------------------------------------------
    def fit(self) -> TrainResult:
        cfg = self.config
        result = TrainResult(self.spec, cfg)
        root, scratch = checkpoint_root(cfg.checkpoint_dir, self.rank, self.world_size)
        best, stale, t_start = -math.inf, 0, time.perf_counter()  # best: sign * the monitored metric
        self._deadline = t_start + cfg.time_limit_s if cfg.time_limit_s else None
        progress = {"epoch": 0, "step": 0, "global_step": 0, "losses": [], "samples": 0,
                    "seconds": 0.0}
        newest = latest(root) if cfg.resume else None
        if newest is not None:
            meta = resumable_meta(newest, (arch_key(self.spec), self.spec.name), cfg.monitor)
            self.load_checkpoint(newest)
            progress = {k: meta[k] for k in progress}
            best, stale = meta.get("best", meta.get("best_auc")), meta["stale"]
            result.best_epoch, result.val = meta["best_epoch"], meta["val"]
            result.history = [EpochRecord(**r) for r in meta["history"]]
            result.step_losses = meta["step_losses"]
            result.resumed_from = {"epoch": progress["epoch"], "step": progress["step"],
                                   "world_size": meta["layout"]["world_size"]}
            if cfg.pause_at_step and progress["global_step"] >= cfg.pause_at_step:  # paused, then cut
                result.val, result.paused_at = self.evaluate("val"), progress["global_step"]
                result.seconds = time.perf_counter() - t_start
                return result
        rows = self.dataset.num_rows("train")
        steps = -(-rows // cfg.batch_size) if rows else None
        if steps and cfg.max_steps_per_epoch:
            steps = min(steps, cfg.max_steps_per_epoch)

        def checkpoint(done: dict[str, Any]) -> None:
            if cfg.checkpoint_dir:
                self._save_progress(root, {
                    **done, "best": best, "monitor": cfg.monitor, "stale": stale,
                    "best_epoch": result.best_epoch,
                    "val": result.val, "history": [dataclasses.asdict(r) for r in result.history],
                    "step_losses": result.step_losses})

        try:
            with progress_bar(cfg.progress and self.rank == 0) as bar:
                for epoch in range(progress["epoch"], cfg.epochs):
                    if stale >= cfg.patience:
                        break
                    record = self._epoch(epoch, steps, bar, progress, result.step_losses, checkpoint)
                    result.history.append(record)
                    if self._paused:  # mid-epoch: its resumable checkpoint is at that step
                        result.val, result.paused_at = record.val, progress["global_step"]
                        break
                    score = monitored_score(record.val, cfg.monitor)
                    if result.best_epoch < 0 or score > best:  # a NaN score never improves
                        best, stale, result.best_epoch, result.val = score, 0, epoch, record.val
                        self.save_checkpoint(root / "best", meta={"epoch": epoch})
                    else:
                        stale += 1
                    progress = {"epoch": epoch + 1, "step": 0, "global_step": progress["global_step"],
                                "losses": [], "samples": 0, "seconds": 0.0}
                    checkpoint(progress)
                    if self.on_epoch is not None:
                        self.on_epoch(record)
                    self._check_time(f"after epoch {epoch}")
                    if epoch + 1 < cfg.epochs and progress["global_step"] >= (cfg.pause_at_step or math.inf):
                        result.paused_at = progress["global_step"]  # at an epoch's end
                        break
            if result.paused_at is None:
                if result.best_epoch != len(result.history) - 1:
                    self.load_checkpoint(root / "best", optimizer=False)
                result.test = self.evaluate("test") if cfg.evaluate_test else {}
        finally:
            if scratch and self.rank == 0:
                shutil.rmtree(scratch, ignore_errors=True)
        result.seconds = time.perf_counter() - t_start
        return result

    def _check_time(self, where: str) -> None:
        """Raise :class:`TrainingTimeLimit` once ``time_limit_s`` has passed since :meth:`fit`
        began. Under several ranks they decide together (all stop at the same step)."""
        if self._deadline is None:
            return
        over = torch.tensor([float(time.perf_counter() > self._deadline)])
        if self.world_size > 1:
            dist.all_reduce(over, op=dist.ReduceOp.MAX)
        if over.item():
            raise TrainingTimeLimit(f"training exceeded its time limit of {self.config.time_limit_s:g} s "
                                    f"({where})")

    def _set_lr(self, global_step: int, total_steps: int | None) -> None:
        """Every optimizer's rate for the next step: its base rate times the schedule's factor.
        (The fused embedding kernels take a new rate at the optimizer's step, so theirs follows
        one step behind the dense one's.)"""
        cfg = self.config
        factor = lr_factor(cfg.lr_schedule, global_step, total_steps, cfg.warmup_steps)
        for group, base in zip(self.optimizer.param_groups, self._base_lrs, strict=True):
            group["lr"] = base * factor

    def scale_table_lr(self, factor: float) -> None:
        """From the next step on, every table (fused or replicated) learns at ``factor`` times its
        rate; the dense parts go on as they were. 0 freezes the tables (their gradients are still
        computed). Not kept in checkpoints: a resumed run starts at the configured rates."""
        tables, dense = len(self.model.fused_optimizer.param_groups), len(self._unfused[0].param_groups)
        self._base_lrs = [lr if tables <= i < tables + dense else lr * factor
                          for i, lr in enumerate(self._base_lrs)]

    def _epoch(self, epoch: int, steps: int | None, bar: Progress | None, progress: dict[str, Any],
               step_losses: list[float], checkpoint: Callable[[dict[str, Any]], None]) -> EpochRecord:
        """One epoch from ``progress["step"]`` on (a resumed epoch skips the steps it had done), or
        up to ``pause_at_step`` when it falls inside the epoch: then its resumable checkpoint is
        written at that step and ``_paused`` is set (the record is of the steps done)."""
        cfg = self.config
        self._paused = False
        total_steps, epoch_steps = (steps * cfg.epochs if steps else None), steps or math.inf
        task = bar.add_task(f"epoch {epoch}", total=steps, rate="") if bar else None
        losses: list[float] = list(progress["losses"])
        samples, start = progress["samples"], progress["step"]
        t0 = time.perf_counter() - progress["seconds"]
        if bar is not None and task is not None:
            bar.update(task, advance=start)
        source = itertools.islice(self._batches("train", cfg.batch_size, True, epoch), start,
                                  cfg.max_steps_per_epoch)
        global_step = progress["global_step"]
        self._set_lr(global_step, total_steps)
        with prefetched(source, cfg.prefetch) as ahead:  # a cut epoch leaves no thread behind
            batches = Waited(ahead, progress.get("data_wait_s", 0.0))
            steps = (self._pipeline.run(batches) if self._pipeline is not None
                     else (self.train_step(b) for b in batches))
            for step, (loss, n) in enumerate(steps, start):
                if not math.isfinite(loss):
                    raise TrainingDiverged(f"loss is {loss} at epoch {epoch} step {step}")
                self._check_time(f"at epoch {epoch} step {step}")
                losses.append(loss)
                step_losses.append(loss)
                samples += n
                global_step += 1
                self._set_lr(global_step, total_steps)
                if bar is not None and task is not None:
                    rate = samples / max(time.perf_counter() - t0, 1e-9)
                    bar.update(task, advance=1, rate=f"{rate:,.0f} samples/s  loss {loss:.4f}")
                self._paused = global_step == cfg.pause_at_step and step + 1 < epoch_steps
                if self._paused or (cfg.checkpoint_every and global_step % cfg.checkpoint_every == 0):
                    checkpoint({"epoch": epoch, "step": step + 1, "global_step": global_step,
                                "losses": losses, "samples": samples,
                                "seconds": time.perf_counter() - t0, "data_wait_s": batches.seconds})
                if self._paused:
                    break
        progress["global_step"] = global_step
        seconds = time.perf_counter() - t0
        val = self.evaluate("val")
        if bar is not None and task is not None:
            bar.update(task, rate=f"{samples / seconds:,.0f} samples/s  val AUC {val['auc']:.4f}")
        test = self.evaluate("test") if self.config.track_test else None
        return EpochRecord(epoch, float(np.mean(losses)) if losses else float("nan"), val,
                           samples / seconds if seconds else 0.0, seconds, samples, test, batches.seconds)


def train(spec: ArchSpec, dataset: RecDataset, config: TrainConfig | None = None) -> TrainResult:
    """Train ``spec`` on ``dataset`` and return its metrics (see :class:`Trainer`)."""
    return Trainer(spec, dataset, config).fit()
