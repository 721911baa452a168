"""One supernet run: bilevel training (weights on train, architecture on val), then derive().

Weights and architecture logits alternate step by step (first-order DARTS): a weight step on a
training batch under Gumbel-softmax weights, then an architecture step on a validation batch
minimising ``CE + lambda * (E[cost] / target) ** beta``. The temperature anneals geometrically
from ``tau_start`` to ``tau_end``. Embeddings use torchrec's fused row-wise Adagrad under
DistributedModelParallel, as in :class:`~autorec.train.trainer.Trainer`; the architecture step
detaches them, so the validation split never trains a weight.

What each option does (how paths are drawn, how the gradient of the architecture step is
estimated, how the final architecture is selected) is told in :mod:`autorec.supernet.config`.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import torch
from sklearn.metrics import roc_auc_score
from torchrec.distributed.model_parallel import DefaultDataParallelWrapper, DistributedModelParallel
from torchrec.optim.apply_optimizer_in_backward import apply_optimizer_in_backward
from torchrec.optim.keyed import CombinedOptimizer, KeyedOptimizerWrapper
from torchrec.optim.optimizers import in_backward_optimizer_filter
from torchrec.optim.rowwise_adagrad import RowWiseAdagrad

from autorec.data import RecDataset
from autorec.data.merge import merged
from autorec.data.tabular import TabularBatches
from autorec.space import SearchSpace
from autorec.supernet.config import (
    SELECTION_SWEEPS,
    SupernetConfig,
    SupernetResult,
)
from autorec.supernet.cost import ExpectedCost, spec_cost
from autorec.supernet.supernet import Supernet
from autorec.train.distributed import default_device, ensure_process_group, shard
from autorec.train.embedding_optim import EPS
from autorec.train.records import dense_optimizer

# Samples per forward pass when paths are scored (no gradient): the supernet's Python cost per
# pass (its choices' gates read module by module) is about a third of a pass over 1024 samples
# of the scale workload; at 8192 the arithmetic dominates (BENCHMARKS.md, "`k55`: paths scored in
# joined batches"). Each sample's logit is that of a pass over its own batch, up to float rounding.
SCORING_SAMPLES = 8192


def shard_supernet(net: Supernet, device: torch.device) -> DistributedModelParallel:
    """DistributedModelParallel over ``net`` whose dense part tolerates a changing graph.

    torchrec's default data-parallel wrapper assumes a static graph; a supernet runs another
    subset of its ops every step (hard sampling skips the unchosen candidates), so its DDP
    wrapper must look for unused parameters instead (in a one-process group there is none:
    :class:`~autorec.train.distributed.OneProcess`). Even in a one-process group it keeps the
    planner's tables (where :func:`~autorec.train.distributed.shard` would fuse every table):
    every supernet measured so far (BENCHMARKS.md, issue 20) trained that way, and so it still
    does, bit for bit.
    """
    # The architecture logits are used outside forward (sampling, E[cost]) and have their own
    # optimizer, so data parallelism leaves them alone.
    arch = [f"arch.{name}" for name, _ in net.arch.named_parameters()]
    ensure_process_group()
    wrapper = None if torch.distributed.get_world_size() == 1 else DefaultDataParallelWrapper(
        static_graph=False, find_unused_parameters=True, params_to_ignore=arch)
    return shard(net, device, wrapper=wrapper, fuse_alone=False)


def forever(dataset: RecDataset, split: str, batch_size: int, seed: int, start: int = 0) -> Iterator[Any]:
    """Shuffled batches of ``split``, epoch after epoch (each shuffled by ``seed + epoch``), from
    the ``start``-th on: a split held in memory skips the earlier ones without making them (making
    and dropping 2000 batches of 1024 rows of issue 20's ``scale`` preset took 5.5 s, skipping
    them 0.05 s; BENCHMARKS.md, ``k58``), a streamed one makes and drops them."""
    for epoch in itertools.count():
        batches = dataset.batches(split, batch_size, shuffle=True, seed=seed, epoch=epoch)
        if start and isinstance(batches, TabularBatches):
            if start >= len(batches):
                start -= len(batches)
                continue
            batches, start = batches.iter_from(start), 0
        for batch in batches:
            if start:
                start -= 1
                continue
            yield batch


def _value_name(value: Any) -> str:
    if isinstance(value, tuple):
        return ("+" if value and isinstance(value[0], str) else "-").join(map(str, value)) or "none"
    return str(value)


class SupernetSearch:
    """Builds the supernet for one (dim, dense_arch, over_arch) and runs the bilevel search
    (``over_arch=None``: the supernet searches the over-arch sizes too).

    Example:
        >>> from autorec.data import load_dataset
        >>> ds = load_dataset("synthetic", preset="tiny", num_samples=2000)
        >>> space = SearchSpace.from_dict({"dim": [8], "dense_arch": [[16]], "over_arch": [[16]],
        ...                                "layers": {"kinds": ["dlrm", "dcnv2", "wukong"]}})
        >>> run = SupernetSearch(space, ds, dim=8, dense_arch=(16,), over_arch=(16,),
        ...                      config=SupernetConfig(steps=4, warmup_steps=1, batch_size=64))
        >>> result = run.fit()
        >>> space.contains(result.spec), len(result.arch_probs)
        (True, 1)
    """

    def __init__(
        self,
        space: SearchSpace,
        dataset: RecDataset,
        dim: int,
        dense_arch: tuple[int, ...],
        over_arch: tuple[int, ...] | None,
        config: SupernetConfig | None = None,
    ) -> None:
        self.space, self.dataset = space, dataset
        self.config = config or SupernetConfig()
        torch.manual_seed(self.config.seed)  # init of every weight; batches and noise have their own seeds
        self.device = default_device()
        net = Supernet(space, dataset.schema, dim, dense_arch, over_arch, device=torch.device("meta"),
                       rescale=self.config.rescale, width_columns=self.config.width_columns,
                       hash_rows=self.config.hash_rows)
        apply_optimizer_in_backward(
            RowWiseAdagrad, net.sparse_arch.parameters(), {"lr": self.config.embedding_lr, "eps": EPS}
        )
        self.supernet = net
        self.model = shard_supernet(net, self.device)
        arch_ids = {id(p) for p in net.arch_parameters()}
        dense = {
            name: p
            for name, p in in_backward_optimizer_filter(self.model.named_parameters())
            if id(p) not in arch_ids
        }
        self.weight_optimizer = CombinedOptimizer(
            [
                self.model.fused_optimizer,
                KeyedOptimizerWrapper(
                    dense, lambda params: dense_optimizer("adam", params, lr=self.config.dense_lr)
                ),
            ]
        )
        # A space without choices still trains (its one architecture); it just has no arch step.
        arch_params = list(net.arch_parameters())
        self.arch_optimizer = (
            torch.optim.Adam(arch_params, lr=self.config.arch_lr, betas=(0.5, 0.999))
            if arch_params else None
        )
        self.cost = ExpectedCost(net, self.config.cost_metric)
        with torch.no_grad():
            start = float(self.cost())
        self.cost_target = self.config.cost_target or self.config.cost_target_ratio * start
        self.generator = torch.Generator().manual_seed(self.config.seed)
        # [layer] -> {kind: weight steps whose path ran it (hard) or gave it the largest weight}
        self.weight_counts: list[dict[str, int]] = [dict.fromkeys(kinds, 0) for kinds in net.layer_kinds]

    def _count(self, weights: Mapping[str, torch.Tensor]) -> None:
        for i, kinds in enumerate(self.supernet.layer_kinds):
            w = weights.get(f"layer{i}.kind")
            kind = kinds[0] if w is None else kinds[int(w.detach().argmax())]
            self.weight_counts[i][kind] += 1

    def _loss(self, batch: Any, tau: float, detach_embeddings: bool, hard: bool, uniform: bool = False,
              count: bool = False) -> torch.Tensor:
        """BCE of one batch on a path sampled at ``tau`` (``hard``: one-hot; ``uniform``: ignoring
        the logits; ``count``: tally the sampled kinds in :attr:`weight_counts`)."""
        batch = batch.to(self.device)
        weights = self.supernet.arch.sample(tau, hard, self.generator, uniform=uniform)
        if count:
            self._count(weights)
        return self._bce(batch, weights, detach_embeddings)

    def _bce(self, batch: Any, weights: Mapping[str, torch.Tensor], detach_embeddings: bool) -> torch.Tensor:
        """BCE of one batch (on the device) on the path mixed by ``weights``."""
        logits = self.model(
            batch.dense_features, batch.sparse_features, weights, detach_embeddings=detach_embeddings
        )
        return torch.nn.functional.binary_cross_entropy_with_logits(logits, batch.labels)

    def _reinforce_loss(self, batch: Any) -> torch.Tensor:
        """A surrogate whose gradient is the leave-one-out REINFORCE estimate of the gradient of
        E_path[validation BCE] with respect to the logits.

        ``arch_samples`` paths are drawn from the logits (hard Gumbel-max: exact categorical
        draws) and scored on the same batch without any weight gradient. Path ``s`` weighs the
        log-probability of the choices that decide it (:meth:`_path_key`) by its loss minus the
        other paths' mean loss, so the batch's own difficulty cancels.
        """
        batch = batch.to(self.device)
        arch, k = self.supernet.arch, self.config.arch_samples
        picks, losses = [], []  # per path: choice name -> index of the drawn value
        with torch.no_grad():
            for _ in range(k):
                weights = arch.sample(1.0, True, self.generator)
                picks.append({name: int(w.argmax()) for name, w in weights.items()})
                losses.append(float(self._bce(batch, weights, detach_embeddings=True)))
        log_probs = {name: torch.log_softmax(arch.logit(name), dim=0) for name in arch.choices}
        total = sum(losses)
        surrogate = torch.zeros(())
        for pick, loss in zip(picks, losses, strict=True):
            advantage = loss - (total - loss) / (k - 1)
            values = {name: arch.choices[name].values[i] for name, i in pick.items()}
            log_p = sum(log_probs[name][pick[name]] for name, _ in self._path_key(values))
            surrogate = surrogate + advantage * log_p / k
        return surrogate

    def penalty(self, cost: torch.Tensor) -> torch.Tensor:
        """The cost term of the architecture loss: ``lambda * (cost / target) ** beta``."""
        return self.config.cost_lambda * (cost / self.cost_target) ** self.config.cost_beta

    def step(self, step: int, train: Iterator[Any], val: Iterator[Any]) -> float:
        """Step ``step`` of the schedule: a weight step on the next training batch (its path drawn
        by ``weight_sampling``), then (past the warm-up, every ``arch_every`` steps) an
        architecture step on the next validation batch (its path drawn from the logits).
        Returns the weight loss."""
        cfg = self.config
        tau = cfg.tau(step)
        loss = self._loss(next(train), tau, detach_embeddings=False, hard=cfg.weight_step_hard,
                          uniform=cfg.weight_sampling == "uniform", count=True)
        value = loss.item()
        # Checked before backward: the fused embedding optimizer updates inside backward, so a
        # non-finite loss would otherwise already be written into the tables.
        if not math.isfinite(value):
            raise FloatingPointError(f"supernet loss is {value} at step {step}")
        self.weight_optimizer.zero_grad()
        loss.backward()
        self.weight_optimizer.step()
        if cfg.arch_step_at(step) and self.arch_optimizer is not None:
            if cfg.arch_estimator == "reinforce":
                arch_loss = self._reinforce_loss(next(val))
            else:
                arch_loss = self._loss(next(val), tau, detach_embeddings=True, hard=cfg.hard)
            if cfg.cost_lambda:
                arch_loss = arch_loss + self.penalty(self.cost())
            self.arch_optimizer.zero_grad()
            arch_loss.backward()
            self.arch_optimizer.step()
        return value

    def batches(self, start: int = 0) -> tuple[Iterator[Any], Iterator[Any]]:
        """Endless shuffled (training, validation) batch streams of the configured size, the
        training one from its ``start``-th batch on (:func:`forever`)."""
        cfg = self.config
        return (forever(self.dataset, "train", cfg.batch_size, cfg.seed, start),
                forever(self.dataset, "val", cfg.batch_size, cfg.seed + 1))

    def one_hot(self, values: Mapping[str, Any]) -> dict[str, torch.Tensor]:
        """One-hot weights of every choice at ``values`` (choice name -> value): one path."""
        return {
            name: torch.nn.functional.one_hot(torch.tensor(c.values.index(values[name])),
                                              len(c.values)).float()
            for name, c in self.supernet.arch.choices.items()
        }

    @torch.no_grad()
    def path_outputs(self, values: Mapping[str, Any],
                     batches: Sequence[Any]) -> tuple[torch.Tensor, torch.Tensor]:
        """(logits, labels) [N] over ``batches`` of the path at ``values`` with the current weights."""
        weights = self.one_hot(values)
        logits, labels = [], []
        self.model.eval()
        try:
            for batch in batches:
                batch = batch.to(self.device)
                logits.append(self.model(batch.dense_features, batch.sparse_features, weights).float().cpu())
                labels.append(batch.labels.float().cpu())
        finally:
            self.model.train()
        return torch.cat(logits), torch.cat(labels)

    def path_auc(self, values: Mapping[str, Any], batches: Sequence[Any]) -> float:
        """AUC over ``batches`` of the path at ``values`` with the supernet's current weights."""
        return self.path_scores(values, batches)["val_auc"]

    def path_cost(self, values: Mapping[str, Any]) -> float:
        """The cost metric of the path at ``values``: that of the spec it derives (E[cost] is
        exact only at the argmax path's layer widths)."""
        return spec_cost(self.supernet.derive(values), self.config.cost_metric)

    def path_scores(self, values: Mapping[str, Any], batches: Sequence[Any]) -> dict[str, float]:
        """Validation AUC and BCE of the path at ``values``; under ``selection: penalized`` also
        its cost and the penalized loss ``BCE + lambda * (cost / target) ** beta``."""
        logits, labels = self.path_outputs(values, batches)
        y = labels.numpy()
        if y.min() == y.max():
            raise ValueError(f"supernet selection: the {len(y)} validation samples scored hold one "
                             f"class only; raise selection_samples")
        out = {"val_auc": float(roc_auc_score(y, logits.numpy())),
               "val_loss": float(torch.nn.functional.binary_cross_entropy_with_logits(logits, labels))}
        if self.config.selection == "penalized":
            out["cost"] = self.path_cost(values)
            cost = torch.tensor(out["cost"], dtype=torch.float64)
            out["penalized_loss"] = out["val_loss"] + float(self.penalty(cost))
        return out

    def _merit(self, scores: Mapping[str, float]) -> float:
        """What :meth:`select` maximises: the AUC, or minus the penalized loss."""
        return -scores["penalized_loss"] if self.config.selection == "penalized" else scores["val_auc"]

    def _path_key(self, values: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
        """The choices that decide the path at ``values``: a field of a kind that its layer
        does not run (``layer<i>.<kind>.<field>``, kind not chosen) does not count."""
        kinds = self.supernet.layer_kinds
        out = []
        for name, value in values.items():
            layer, _, rest = name.partition(".")
            kind = rest.partition(".")[0]
            if layer.startswith("layer") and rest.count(".") == 1 and kind != values.get(
                    f"{layer}.kind", kinds[int(layer[5:])][0]):
                continue
            out.append((name, _value_name(value)))
        return tuple(sorted(out))

    def selection_batches(self, samples: int | None = None, join: int = SCORING_SAMPLES) -> list[Any]:
        """The validation batches that :meth:`select` scores every path on (fixed per seed):
        ``samples`` of them (default: the config's ``selection_samples``), in whole batches of
        the config's size, joined into batches of up to ``join`` samples (the same samples in the
        same order: a pass's fixed cost is paid once per join; ``join`` at most the batch size:
        the batches as the dataset gives them)."""
        cfg = self.config
        n = math.ceil((samples or cfg.selection_samples) / cfg.batch_size)
        return merged(itertools.islice(
            self.dataset.batches("val", cfg.batch_size, shuffle=True, seed=cfg.seed + 2), n),
            max(join, cfg.batch_size))

    def select(self) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Choose the architecture by validation AUC (``selection: validation``) or penalized
        validation loss (``penalized``) with inherited weights: returns (choice name -> value,
        the paths scored, in order).

        Coordinate ascent from the argmax, layer by layer: at layer ``i`` (the other layers at
        their current choice), each kind is scored with its fields at their current or most
        probable values, then each of its fields at every other value (one field at a time,
        keeping improvements); the layer takes the best-scoring kind and fields (the incumbent
        wins ties). A searched over-arch is one more coordinate after the layers (logged as
        layer ``len(layers)``). Sweeps repeat until none changes, at most
        :data:`SELECTION_SWEEPS` times. A path is scored once (forward passes over
        ``selection_samples`` validation samples); each scored path is logged with its sweep.
        """
        net = self.supernet
        batches = self.selection_batches()
        chosen = dict(net.arch.argmax())
        scored: list[dict[str, Any]] = []
        cache: dict[tuple[tuple[str, str], ...], float] = {}

        def score(sweep: int, i: int, kind: str, values: dict[str, Any], fields: list[str]) -> float:
            key = self._path_key(values)
            if key not in cache:
                scores = self.path_scores(values, batches)
                cache[key] = self._merit(scores)
                scored.append({"sweep": sweep, "layer": i, "kind": kind, **scores,
                               "fields": {f: _value_name(values[f]) for f in fields}})
            return cache[key]

        def ascend(sweep: int, i: int, kind: str, values: dict[str, Any], merit: float, choice: str,
                   fields: list[str]) -> tuple[dict[str, Any], float]:
            """``values`` with ``choice`` at its best-scoring value (the incumbent wins ties)."""
            for value in net.arch.choices[choice].values:
                other = {**values, choice: value}
                other_merit = score(sweep, i, kind, other, fields)
                if other_merit > merit:
                    values, merit = other, other_merit
            return values, merit

        for sweep in range(SELECTION_SWEEPS):
            changed = False
            for i, kinds in enumerate(net.layer_kinds):
                name = f"layer{i}.kind"
                current = chosen.get(name, kinds[0])
                best: tuple[float, dict[str, Any]] | None = None
                for kind in (current, *(k for k in kinds if k != current)):
                    values = {**chosen, name: kind} if name in net.arch.choices else dict(chosen)
                    fields = [c.name for c in net.layers[i].candidates[kind].choices()]
                    merit = score(sweep, i, kind, values, fields)
                    for field_name in fields:
                        values, merit = ascend(sweep, i, kind, values, merit, field_name, fields)
                    if best is None or merit > best[0]:
                        best = (merit, values)
                assert best is not None  # every layer has at least one kind
                changed = changed or best[1] != chosen
                chosen = best[1]
            if "over_arch" in net.arch.choices:  # the searched over-arch: one more coordinate
                i, fields = len(net.layers), ["over_arch"]
                merit = score(sweep, i, "over_arch", chosen, fields)
                best_over, _ = ascend(sweep, i, "over_arch", chosen, merit, "over_arch", fields)
                changed, chosen = changed or best_over != chosen, best_over
            if not changed:
                break
        return chosen, scored

    def fit(self) -> SupernetResult:
        cfg, net = self.config, self.supernet
        train, val = self.batches()
        history: list[list[dict[str, float]]] = [[] for _ in net.layers]
        steps, losses = [], []
        start = time.perf_counter()
        for step in range(cfg.steps):
            losses.append(self.step(step, train, val))
            if step % cfg.record_every == 0 or step == cfg.steps - 1:
                steps.append(step)
                for i, probs in enumerate(net.kind_probs()):
                    history[i].append(probs)
        seconds = time.perf_counter() - start
        with torch.no_grad():
            expected = float(self.cost())
        final = {
            name: {
                _value_name(v): float(p) for v, p in zip(net.arch.choices[name].values, probs, strict=True)
            }
            for name, probs in net.arch.probs().items()
        }
        argmax_spec, scored, selection_seconds = net.derive(), [], 0.0
        spec = argmax_spec
        if cfg.selection != "argmax":
            t0 = time.perf_counter()
            preferred, scored = self.select()
            spec = net.derive(preferred)
            selection_seconds = time.perf_counter() - t0
        return SupernetResult(
            spec=spec,
            arch_probs=history,
            steps=steps,
            final_probs=final,
            expected_cost=expected,
            cost_target=self.cost_target,
            seconds=seconds,
            step_seconds=seconds / cfg.steps,
            config=cfg,
            losses=losses,
            argmax_spec=argmax_spec,
            selection=scored,
            selection_seconds=selection_seconds,
            weight_counts=[dict(c) for c in self.weight_counts],
        )
