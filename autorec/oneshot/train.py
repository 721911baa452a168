"""Train a supernet once, single-path, resumable: the weights every candidate then inherits.

One supernet (:class:`~autorec.supernet.search.SupernetSearch`, no architecture step) trains
its shared weights on single paths: ``uniform`` (the default) runs one uniformly drawn path per
batch; ``fair`` runs the strictly fair paths of :mod:`autorec.oneshot.fair` on each batch and
updates the dense weights once from their summed gradients (the tables update inside each
backward, torchrec's fused optimizer), so a step costs as many paths as the widest choice has
values; ``sandwich`` (BigNAS's sandwich rule) runs three paths per batch, the largest, the
smallest and one uniform draw, and updates from their mean gradient, so the extremes of the
space's sizes are trained on every step. On the ``scale`` workload uniform paths ranked
candidates better at a sixth of fair's supernet time (Kendall's tau 0.85 after 3000 uniform
steps, 0.42 after 4000 fair ones; BENCHMARKS.md, issue 20), hence the default. Every
``checkpoint_every`` steps the model and optimizer states (torch.distributed.checkpoint), the
step, the losses and the sampler's generator go to ``<directory>/step-N`` and ``LATEST`` points
at it, so a run killed at any moment (kill -9 included) continues from its last checkpoint when
run again.

Example:
    >>> import tempfile
    >>> from autorec.data import load_dataset
    >>> from autorec.space import SearchSpace
    >>> ds = load_dataset("synthetic", preset="tiny", num_samples=2000)
    >>> space = SearchSpace.from_dict({"dim": [8], "dense_arch": [[16]], "over_arch": [[16]],
    ...                                "layers": {"kinds": ["dlrm", "dcnv2"]}})
    >>> run = SupernetTraining(space, ds, OneShotTrainConfig(steps=4, batch_size=64, checkpoint_every=2),
    ...                        tempfile.mkdtemp())
    >>> state = run.fit()
    >>> state.step, len(state.losses)
    (4, 4)
"""

from __future__ import annotations

import json
import math
import shutil
import time
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from functools import cached_property
from pathlib import Path
from typing import Any

import torch
from torchrec.optim.keyed import KeyedOptimizerWrapper

from autorec.data import RecDataset
from autorec.oneshot.fair import fair_paths
from autorec.space import SearchSpace
from autorec.supernet import SupernetConfig, SupernetSearch
from autorec.supernet.hashing import HASH_ROWS
from autorec.supernet.widths import WIDTH_COLUMNS
from autorec.train.checkpoint_reader import load_state, read_meta, saved_keys
from autorec.train.checkpoints import META, latest, point_latest, publish, save_states, staging, write_json
from autorec.train.memory import keep_freed_memory as keep_freed

SAMPLINGS = ("fair", "sandwich", "uniform")


@dataclass(frozen=True)
class OneShotTrainConfig:
    """How the supernet trains: steps, batch, learning rates, path sampling, checkpoints, and
    the one (dim, dense_arch) it is built for (None: the space's first). The over-arch is searched
    when the space's over-arch choices share one depth (masked widths), else ``over_arch`` (None:
    the space's first) is fixed. ``embedding_warmup``: the first steps keep every feature at its
    widest width and largest hash size (the other choices drawn as ``sampling`` says), so the
    shared weights learn to use every feature before paths drop or narrow some. ``shared_paths``:
    the share of steps whose paths give every feature one width and one hash size, drawn
    uniformly from the choices' values (the rest as ``sampling`` says): per-feature draws almost
    never visit the all-alike corner of the space (all 26 features kept at once has probability
    0.75^26 = 6e-4 when one width in four drops), where a shared-width study searches.
    ``shared_until``: the first steps are all shared ones, ``shared_paths`` applying after them
    (coarse paths first, finer ones later; the same random draws as ``shared_paths: 1.0`` up to
    there, so those steps train the supernet a run at ``shared_paths: 1.0`` trains).
    ``fine_embedding_lr``: the tables' learning rate from step ``shared_until`` on (None: ``embedding_lr``
    throughout): the fine phase's per-feature paths are read through the tables' rows, and on issue
    20's ``scale`` workload a fine phase whose tables learned three to twelve times faster ranked
    tau's architectures better at the same steps, but also moved the all-alike corner a search
    decides in (``k52`` lost two picks of three; BENCHMARKS.md, "What learns in the fine phase").
    ``dense_lr_decay``: over the last N steps the dense learning rate falls from ``dense_lr`` to
    zero along a half cosine (SPOS's and OFA's annealed supernets), so the shared dense weights the
    candidates inherit average the last paths' updates instead of leaning to the last few drawn
    (0: constant; the tables keep ``embedding_lr``, row-wise Adagrad anneals its own steps).
    ``width_columns``: ``shared`` (each width a prefix of one table) or ``own`` (each width its
    own columns, trained only on the steps that chose it: :mod:`autorec.supernet.widths`);
    ``hash_rows`` likewise for the hash sizes' rows (:mod:`autorec.supernet.hashing`).
    ``sampling: sandwich``: each step's largest path keeps every feature at its widest width and
    largest hash size, every layer (no ``skip``) and the widest over-arch; its smallest keeps every
    feature at its narrowest width that keeps it and its smallest hash size, skips every layer that
    may be skipped and takes the narrowest over-arch; the choices that are no size (a layer's kind,
    a block's own options) are drawn uniformly in both, and ``shared_paths`` applies to the third,
    uniform path. ``rescale``: the supernet RMS-rescales the dlrm and dcnv2 layers' outputs per
    sample (:class:`~autorec.supernet.config.SupernetConfig`), which no derived model does; with
    False every path computes its derived model's function (safe for the shallow stacks a
    one-shot space holds; a non-finite loss stops the run); a list of kinds (``["dlrm"]``) rescales
    only those."""

    steps: int = 2000
    batch_size: int = 1024
    dense_lr: float = 1e-3
    embedding_lr: float = 0.05
    sampling: str = "uniform"
    embedding_warmup: int = 0
    shared_paths: float = 0.0
    shared_until: int = 0
    fine_embedding_lr: float | None = None
    dense_lr_decay: int = 0
    width_columns: str = "shared"
    hash_rows: str = "shared"
    rescale: bool | tuple[str, ...] = True
    checkpoint_every: int = 200
    dim: int | None = None
    dense_arch: tuple[int, ...] | None = None
    over_arch: tuple[int, ...] | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "checkpoint_every"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}: expected an integer >= 1, got {value!r}")
        if isinstance(self.embedding_warmup, bool) or not isinstance(self.embedding_warmup, int) \
                or not 0 <= self.embedding_warmup <= self.steps:
            raise ValueError(f"embedding_warmup: expected an integer in [0, steps ({self.steps})], "
                             f"got {self.embedding_warmup!r}")
        if isinstance(self.shared_paths, bool) or not isinstance(self.shared_paths, (int, float)) \
                or not 0.0 <= self.shared_paths <= 1.0:
            raise ValueError(f"shared_paths: expected a share of steps in [0, 1], got {self.shared_paths!r}")
        object.__setattr__(self, "shared_paths", float(self.shared_paths))
        if isinstance(self.shared_until, bool) or not isinstance(self.shared_until, int) \
                or not 0 <= self.shared_until <= self.steps:
            raise ValueError(f"shared_until: expected an integer in [0, steps ({self.steps})], "
                             f"got {self.shared_until!r}")
        fine = self.fine_embedding_lr
        if fine is not None:
            if isinstance(fine, bool) or not isinstance(fine, (int, float)) or not fine > 0:
                raise ValueError(f"fine_embedding_lr: expected a learning rate > 0 or null, "
                                 f"got {self.fine_embedding_lr!r}")
            if self.shared_until < 1:
                raise ValueError(f"fine_embedding_lr: the fine phase starts at shared_until, which is "
                                 f"{self.shared_until}; expected shared_until >= 1 with it")
            object.__setattr__(self, "fine_embedding_lr", float(fine))
        if isinstance(self.dense_lr_decay, bool) or not isinstance(self.dense_lr_decay, int) \
                or not 0 <= self.dense_lr_decay <= self.steps:
            raise ValueError(f"dense_lr_decay: expected an integer in [0, steps ({self.steps})], "
                             f"got {self.dense_lr_decay!r}")
        if self.width_columns not in WIDTH_COLUMNS:
            raise ValueError(f"width_columns: expected one of {', '.join(WIDTH_COLUMNS)}, "
                             f"got {self.width_columns!r}")
        if self.hash_rows not in HASH_ROWS:
            raise ValueError(f"hash_rows: expected one of {', '.join(HASH_ROWS)}, got {self.hash_rows!r}")
        if not isinstance(self.rescale, bool):
            if not isinstance(self.rescale, (list, tuple)) or not self.rescale \
                    or not all(isinstance(kind, str) for kind in self.rescale):
                raise ValueError(f"rescale: expected true, false or a list of layer kinds, "
                                 f"got {self.rescale!r}")
            object.__setattr__(self, "rescale", tuple(self.rescale))
        if self.sampling not in SAMPLINGS:
            raise ValueError(f"sampling: expected one of {', '.join(SAMPLINGS)}, got {self.sampling!r}")
        for name in ("dense_arch", "over_arch"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, tuple(getattr(self, name)))


@dataclass
class TrainState:
    """Where a supernet training stands: steps done, their losses, seconds spent (all runs)."""

    step: int = 0
    losses: list[float] = field(default_factory=list)
    seconds: float = 0.0
    resumed_from: list[int] = field(default_factory=list)


def embedding_groups(choices: Any) -> tuple[list[Any], list[Any]]:
    """The embedding choices among ``choices``, split into (width choices, hash-size choices)."""
    emb = [c for c in choices if c.name.startswith("emb.")]
    return [c for c in emb if not c.name.endswith(".hash")], [c for c in emb if c.name.endswith(".hash")]


class SupernetTraining:
    """The supernet of ``space`` on ``dataset`` and its single-path training, checkpointed in
    ``directory`` (a rerun resumes there). ``keep_freed_memory``: glibc keeps freed buffers warm
    for reuse, process-wide, as a Trainer does by default (:mod:`autorec.train.memory`): without
    it, one process in three kept faulting 600-900 pages back in a supernet step at batch 1024
    on the ``scale`` workload, 4-5% of its time (BENCHMARKS.md, "The supernet's memory kept
    warm"). A process setting, not a training one: it changes no weight, so it is not in the
    checkpoint's configuration."""

    def __init__(self, space: SearchSpace, dataset: RecDataset, config: OneShotTrainConfig,
                 directory: str | Path, keep_freed_memory: bool = True) -> None:
        self.config, self.directory = config, Path(directory)
        if keep_freed_memory:
            keep_freed()
        dim = config.dim if config.dim is not None else space.dim[0]
        if dim not in space.dim:
            raise ValueError(f"dim: {dim} is not among the space's choices {list(space.dim)}")
        dense_arch = (config.dense_arch if config.dense_arch is not None else space.dense_arch[0]) \
            if dataset.schema.n_dense else ()
        supernet = SupernetConfig(steps=config.steps, warmup_steps=config.steps, batch_size=config.batch_size,
                                  dense_lr=config.dense_lr, embedding_lr=config.embedding_lr,
                                  weight_sampling="uniform", width_columns=config.width_columns,
                                  hash_rows=config.hash_rows, rescale=config.rescale, seed=config.seed)
        depths = {len(v) for v in space.over_arch}
        over_arch = (None if config.over_arch is None and len(space.over_arch) > 1 and len(depths) == 1
                     else config.over_arch or space.over_arch[0])
        if over_arch is not None and over_arch not in space.over_arch:
            raise ValueError(f"over_arch: {list(over_arch)} is not among the space's choices")
        self.search = SupernetSearch(space, dataset, dim, dense_arch, over_arch, supernet)
        self.choices = list(self.search.supernet.arch.choices.values())
        self.generator = torch.Generator().manual_seed(config.seed)
        optimizers = [optim for _, optim in self.search.weight_optimizer.optimizers]
        self.dense_groups = [group for optim in optimizers if isinstance(optim, KeyedOptimizerWrapper)
                             for group in optim.param_groups]
        # the fused tables' groups: their kernels take the lr at zero_grad and step (torchrec)
        self.table_groups = [group for optim in optimizers if not isinstance(optim, KeyedOptimizerWrapper)
                             for group in optim.param_groups]

    def dense_lr(self, index: int) -> float:
        """The dense learning rate of step ``index`` (0-based): ``dense_lr``, or on the last
        ``dense_lr_decay`` steps a half cosine from it down to zero (the last step's above zero).

        Example: 4 steps decaying over the last 2 give 1, 1, 0.854 and 0.146 times ``dense_lr``.
        """
        config = self.config
        start = config.steps - config.dense_lr_decay
        if index < start:
            return config.dense_lr
        # the decay's i-th step (of n) at the mid-point of its interval, so every step learns
        done = (index - start + 0.5) / config.dense_lr_decay
        return config.dense_lr * 0.5 * (1.0 + math.cos(math.pi * done))

    # ---- one step ---------------------------------------------------------------------
    def step(self, batch: Any, index: int | None = None) -> float:
        """One update on ``batch`` (step ``index`` of the run): the fair paths' summed gradients,
        one uniform path, or the sandwich's largest, smallest and uniform paths; during the
        embedding warm-up every path keeps every feature at its widest width and largest hash
        size; on a shared step (``shared_paths``) every path but the sandwich's extremes gives
        every feature one width and one hash size, drawn per step."""
        if self.config.sampling == "fair" and self.choices:
            paths = fair_paths(self.choices, self.generator)
        else:
            paths = [self.uniform_path()]
        warm = index is not None and index < self.config.embedding_warmup
        early = index is not None and index < self.config.shared_until
        if not warm and (self.config.shared_paths or early):
            # drawn on every such step, early or not, so the early steps draw as shared_paths 1.0's
            drawn = float(torch.rand((), generator=self.generator)) < self.config.shared_paths
            if early or drawn:
                shared = self.shared_embeddings()
                paths = [{**path, **shared} for path in paths]
        if self.config.sampling == "sandwich" and self.choices:
            paths = [self.extreme_path(largest=True), self.extreme_path(largest=False), *paths]
        if warm:
            paths = [{**path, **self.widest_embeddings} for path in paths]
        config = self.config
        if config.dense_lr_decay and index is not None:
            for group in self.dense_groups:
                group["lr"] = self.dense_lr(index)
        if config.fine_embedding_lr is not None and index is not None:
            table_lr = config.fine_embedding_lr if index >= config.shared_until else config.embedding_lr
            for group in self.table_groups:
                group["lr"] = table_lr
        return self.train_paths(batch, paths)

    def uniform_path(self, generator: torch.Generator | None = None) -> dict[str, int]:
        """One path drawn uniformly: choice name -> index of its value (from ``generator``,
        default the training's own)."""
        generator = generator or self.generator
        return {c.name: int(torch.randint(len(c.values), (1,), generator=generator))
                for c in self.choices}

    def extreme_path(self, largest: bool) -> dict[str, int]:
        """The sandwich rule's largest (or smallest) path (see :class:`OneShotTrainConfig`): the
        sizes at their extreme, every other choice drawn uniformly."""
        path = self.uniform_path()
        path.update(self.widest_embeddings if largest else self.narrowest_embeddings)
        for c in self.choices:
            if c.name.endswith(".kind") and "skip" in c.values:
                kept = [i for i, v in enumerate(c.values) if v != "skip"]
                path[c.name] = (kept[int(torch.randint(len(kept), (1,), generator=self.generator))]
                                if largest else c.values.index("skip"))
            elif c.name == "over_arch":
                pick = max if largest else min
                path[c.name] = pick(range(len(c.values)),
                                    key=lambda i, c=c: (sum(c.values[i]), len(c.values[i])))
        return path

    def shared_embeddings(self, generator: torch.Generator | None = None) -> dict[str, int]:
        """One draw of the all-alike corner: a width drawn uniformly from the width choices'
        values and a hash size from the hash choices', every embedding choice set to it (choice
        name -> value index; a choice that lacks the drawn value draws its own)."""
        generator = generator or self.generator
        out: dict[str, int] = {}
        for group in embedding_groups(self.choices):
            # ascending, as the benchmark's runs drew them; a dim_ratio may be a string ("1/4")
            values = sorted({v for c in group for v in c.values}, key=lambda v: Fraction(str(v)))
            if not values:
                continue
            value = values[int(torch.randint(len(values), (1,), generator=generator))]
            for c in group:
                out[c.name] = (c.values.index(value) if value in c.values
                               else int(torch.randint(len(c.values), (1,), generator=generator)))
        return out

    @cached_property
    def widest_embeddings(self) -> dict[str, int]:
        """Each embedding choice (a feature group's width, its hash size) -> its largest value's index."""
        net = self.search.supernet
        widths = dict(zip(net.emb_values, net.emb_widths, strict=True))
        width_choices, hash_choices = embedding_groups(self.choices)
        out = {c.name: max(range(len(c.values)), key=lambda i: c.values[i]) for c in hash_choices}
        out.update({c.name: max(range(len(c.values)), key=lambda i: widths[c.values[i]])
                    for c in width_choices})
        return out

    @cached_property
    def narrowest_embeddings(self) -> dict[str, int]:
        """Each embedding choice -> its smallest value's index: the narrowest width that keeps the
        feature (width 0 drops it; a choice of width 0 alone keeps it) and the smallest hash size."""
        net = self.search.supernet
        widths = dict(zip(net.emb_values, net.emb_widths, strict=True))
        width_choices, hash_choices = embedding_groups(self.choices)
        out = {c.name: min(range(len(c.values)), key=lambda i, c=c: Fraction(str(c.values[i])))
               for c in hash_choices}
        for c in width_choices:
            kept = [i for i in range(len(c.values)) if widths[c.values[i]] > 0] or list(range(len(c.values)))
            out[c.name] = min(kept, key=lambda i, c=c: widths[c.values[i]])
        return out

    def train_paths(self, batch: Any, paths: list[dict[str, int]]) -> float:
        """One update on ``batch`` from the mean of ``paths``' gradients (each path: choice name
        -> index of its value); returns the paths' mean loss."""
        search = self.search
        search.weight_optimizer.zero_grad()
        batch = batch.to(search.device)
        total = 0.0
        for path in paths:
            values = {name: self.search.supernet.arch.choices[name].values[i] for name, i in path.items()}
            loss = search._bce(batch, search.one_hot(values), detach_embeddings=False)
            value = loss.item()
            if not math.isfinite(value):  # before backward: the fused table update happens in it
                raise FloatingPointError(f"supernet loss is {value} on path {values}")
            (loss / len(paths)).backward()
            total += value / len(paths)
        search.weight_optimizer.step()
        return total

    # ---- the loop, checkpointed ----------------------------------------------------------
    def fit(self, log: Any = None, until: int | None = None) -> TrainState:
        """Train to ``config.steps`` (or to step ``until`` of them, checkpointed there, so a later
        call goes on with the same schedule), resuming from the latest checkpoint in the directory."""
        end = self.config.steps if until is None else until
        if not 0 <= end <= self.config.steps:
            raise ValueError(f"until: expected a step in [0, steps ({self.config.steps})], got {until!r}")
        self.directory.mkdir(parents=True, exist_ok=True)
        state = self.resume()
        if state.step >= end:
            return state
        train, _ = self.search.batches(start=state.step)  # the stream goes on where the last run was cut
        start = time.perf_counter()
        while state.step < end:
            state.losses.append(self.step(next(train), state.step))
            state.step += 1
            if state.step % self.config.checkpoint_every == 0 or state.step == end:
                state.seconds += time.perf_counter() - start
                start = time.perf_counter()
                self.save(state)
                if log is not None:
                    log(f"supernet step {state.step}/{self.config.steps}: loss {state.losses[-1]:.4f}")
        return state

    def save(self, state: TrainState) -> None:
        name = f"step-{state.step:09d}"
        staged = staging(self.directory / name)  # renamed into place when whole (checkpoints.py)
        shutil.rmtree(staged, ignore_errors=True)
        states = {"model": self.search.model.state_dict(), "optim": self.search.weight_optimizer.state_dict()}
        save_states(states, staged, self.directory / name, rank=0, world_size=1)  # one process
        torch.save(self.generator.get_state(), staged / "generator.pt")
        write_json(staged / META, {**asdict(state), "config": _jsonable(asdict(self.config))})
        publish(staged, self.directory / name)
        point_latest(self.directory, name)

    def resume(self, checkpoint: Path | None = None) -> TrainState:
        """The state of the latest checkpoint, loaded into the supernet (a fresh state if none);
        with ``checkpoint``, that checkpoint's (a ``step-N`` folder kept elsewhere, written with
        this configuration) instead."""
        if checkpoint is not None and not (Path(checkpoint) / META).is_file():
            raise ValueError(f"{checkpoint}: not a supernet checkpoint (no {META})")
        newest = latest(self.directory) if checkpoint is None else Path(checkpoint)
        if newest is None:
            return TrainState()
        meta = read_meta(newest)
        # An option added since the checkpoint was written was at its default there.
        meta["config"] = {**_jsonable(asdict(OneShotTrainConfig())), **meta["config"]}
        if meta["config"] != _jsonable(asdict(self.config)):
            raise ValueError(f"{newest}: written with another configuration {meta['config']}; this "
                             f"run has {_jsonable(asdict(self.config))} (use another directory)")
        self.search.weight_optimizer.init_state()  # Adam's state exists only after a first step
        optim = self.search.weight_optimizer
        states = {"model": self.search.model.state_dict(), "optim": optim.state_dict()}
        # A weight no sampled path has reached yet (uniform paths, early in a run) has no Adam state
        # in the checkpoint: it keeps the zero moments init_state gave it, with the step count
        # of a weight never stepped (init_state's dummy step counted one, which would skew Adam's
        # bias correction at its first real step). Every other key must load.
        load_state(states, newest, allow_partial_load=True)
        saved = saved_keys(newest)
        for key, state in states["optim"]["state"].items():
            if torch.is_tensor(state.get("step")) and f"optim.state.{key}.step" not in saved:
                state["step"] = torch.zeros_like(state["step"])
        missing = [k for k in self.search.model.state_dict() if f"model.{k}" not in saved]
        if missing:
            raise ValueError(f"{newest}: no model weights {missing[:3]} in the checkpoint: another supernet?")
        self.search.model.load_state_dict(states["model"])
        self.search.weight_optimizer.load_state_dict(states["optim"])
        self.generator.set_state(torch.load(newest / "generator.pt", weights_only=True))
        return TrainState(step=meta["step"], losses=list(meta["losses"]), seconds=meta["seconds"],
                          resumed_from=[*meta["resumed_from"], meta["step"]])


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value))
