"""The training settings as a pydantic model: one validated description of how to train.

The trainer's ``TrainConfig`` (autorec.train.trainer) stays the dataclass the training code reads;
this model sits below it, imports no torch, and is what the CLI (and any file with a ``train``
section) validates user input against. ``TrainSettings(**values).to_kwargs()`` is the boundary:
its keys are exactly ``TrainConfig``'s fields (a test keeps the two in step).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

# The trainer's DENSE_OPTIMIZERS and DENSE_PARALLEL keys; spelled here because a config module
# may not import torch (tests/config/test_train.py checks they agree).
DenseOptimizer = Literal["adam", "adagrad"]
DenseParallel = Literal["ddp", "fsdp"]
LrSchedule = Literal["constant", "cosine"]  # the trainer's LR_SCHEDULES
Autocast = Literal["off", "bf16"]  # the trainer's AUTOCAST
Fp32Matmul = Literal["ieee", "bf16", "tf32"]  # the trainer's FP32_MATMUL
RAY_PLACEMENTS = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")  # Ray Train workers' strategies


class TrainSettings(BaseModel):
    """How to train one architecture: epochs, batches, optimizers, checkpoints, parallelism.

    Unknown keys and out-of-range values are refused when the model is built, so a wrong value
    is reported against the flag or key the user wrote, not deep inside a training run.

    Example:
        >>> TrainSettings(epochs=2, dense_lr=3e-3).to_kwargs()["dense_lr"]
        0.003
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    epochs: int = Field(10, ge=1, description="training epochs")
    batch_size: int = Field(1024, ge=1, description="global training batch size")
    eval_batch_size: int = Field(8192, ge=1, description="global evaluation batch size")
    seed: int = Field(0, description="seed for the split, init and shuffling")
    dense_optimizer: DenseOptimizer = Field("adam", description="dense optimizer")
    dense_lr: float = Field(3e-3, ge=0, description="dense learning rate")
    dense_weight_decay: float = Field(1e-4, ge=0, description="dense weight decay (L2)")
    embedding_lr: float = Field(0.2, ge=0, description="row-wise Adagrad learning rate of every table")
    embedding_weight_decay: float = Field(0.0, ge=0, description="row-wise Adagrad weight decay")
    lr_schedule: LrSchedule = Field(
        "constant", description="every learning rate's schedule over the planned steps (cosine ends at 0.1x)")
    warmup_steps: int = Field(0, ge=0, description="linear learning-rate warm-up over these first steps")
    patience: int = Field(2, ge=1, description="epochs without a gain in `monitor` before stopping")
    max_steps_per_epoch: int | None = Field(None, ge=1, description="cap on training steps per epoch")
    checkpoint_dir: str | None = Field(
        None, description="keep checkpoints here (default: a temporary folder)")
    num_workers: int = Field(0, ge=0, description="DataLoader prefetch workers")
    prefetch: int = Field(
        0, ge=0, description="training batches built ahead on a background thread (0: none)")
    compile: bool = Field(False, description=(
        "compile the dense parts (dense arch, interaction layers, over-arch) with torch.compile: "
        "seconds to a minute at the start, for long trainings"))
    autocast: Autocast = Field("off", description=(
        "run the forward of the dense parts under bf16 autocast (fp32 weights, optimizers and "
        "tables; fast where the device has native bf16: CPUs with AVX512-BF16 or AMX, GPUs)"))
    fp32_matmul: Fp32Matmul = Field("ieee", description=(
        "how fp32 matrix products are computed, forward and backward, every tensor staying fp32: "
        "ieee; bf16 (CPU: oneDNN rounds the inputs to bf16 and accumulates in fp32 on AMX or "
        "AVX512-BF16); tf32 (CUDA tensor cores)"))
    keep_freed_memory: bool = Field(True, description=(
        "keep freed buffers of up to 32 MiB in glibc's heap for reuse, so a step's large "
        "temporaries are not faulted in afresh every step (process-wide; glibc on Linux only)"))
    huge_pages: bool = Field(True, description=(
        "put the CPU embedding tables and their optimizer state on 2 MiB transparent huge pages "
        "(Linux 6.1+): fewer TLB misses on the rows' random reads and writes, for 1-1.5 s at the "
        "start where the kernel must compact memory"))
    progress: bool = Field(True, description="draw a progress bar")
    plan: str | None = Field(None, description="sharding plan JSON: table -> sharding type and ranks")
    dense_parallel: DenseParallel = Field("ddp", description="dense parts under DDP or FSDP2 (fully_shard)")
    checkpoint_every: int | None = Field(
        None, ge=1, description="also write a resumable checkpoint every STEPS steps")
    resume: bool = Field(False, description="continue from the latest checkpoint in checkpoint_dir")
    pipeline: bool = Field(
        False, description="train through torchrec's TrainPipelineSparseDist (overlaps input_dist)")
    monitor: Literal["val_logloss", "val_auc"] = Field(
        "val_logloss", description="what early stopping and the kept (best) checkpoint watch")
    track_test: bool = Field(False, description="also evaluate the test split after every epoch")
    evaluate_test: bool = Field(True, description="evaluate the test split with the kept model at the end")
    time_limit_s: float | None = Field(
        None, gt=0, description="stop the training (as failed) after this many seconds")
    val_samples: int | None = Field(
        None, ge=1, description="validate on the first N samples of the validation split only")
    pause_at_step: int | None = Field(
        None, ge=1, description="stop after STEPS steps (mid-epoch too), validate, and keep the resumable "
        "checkpoint there; a later run with resume goes on from that step")

    @model_validator(mode="after")
    def _resume_needs_a_folder(self) -> TrainSettings:
        if self.resume and not self.checkpoint_dir:
            raise ValueError("resume: needs checkpoint_dir, the folder to resume from")
        if self.pause_at_step and not self.checkpoint_dir:
            raise ValueError("pause_at_step: needs checkpoint_dir, where the paused run is kept to go on")
        return self

    def to_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of the trainer's ``TrainConfig``."""
        return self.model_dump()
