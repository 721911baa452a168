"""Permutation importance of a stand-alone trained model's features, for thinning a finalist.

A feature's cost is the validation AUC the model loses when that feature's bags are shuffled
across each batch (every other feature kept): its values keep their distribution but no longer
belong to their rows, so a feature the model reads no signal from costs it nothing, whatever
offset its embeddings carry (emptying the bags instead moves every row's input and charges noise
tables for it). On the ``scale`` workload six finalists' 150-step re-rank trainings put 38 of
their 42 planted noise tables at or below 0.0001 on 100k validation samples and one signal table
(of a million rows), where a finalist's supernet path mixed five weak tables among the noise at
any precision (BENCHMARKS.md, "The drops read off the re-rank's own training"). Written here,
not taken from scikit-learn or Captum: both permute columns of dense inputs, and a feature here
is one key of a :class:`~torchrec.sparse.jagged_tensor.KeyedJaggedTensor`, whose bags differ in
length.

Example:
    >>> import torch
    >>> kjt = KeyedJaggedTensor(keys=["a", "b"], values=torch.tensor([1, 2, 3, 4, 5]),
    ...                         lengths=torch.tensor([1, 2, 0, 2]))  # a: [1], [2, 3]; b: [], [4, 5]
    >>> out = permute_key(kjt, "a", torch.tensor([1, 0]))
    >>> out["a"].lengths().tolist(), out["a"].values().tolist(), out["b"].values().tolist()
    ([2, 1], [2, 3, 1], [4, 5])
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torchrec.datasets.utils import Batch
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor


def permute_key(kjt: KeyedJaggedTensor, key: str, order: torch.Tensor) -> KeyedJaggedTensor:
    """``kjt`` with the bags of ``key`` reordered across the batch: row b gets the bag of row
    ``order[b]`` (``order``: a permutation of the batch's B rows); the other keys unchanged."""
    if kjt.variable_stride_per_key():
        raise ValueError("permute_key: a KeyedJaggedTensor of one stride for every key expected")
    i, rows = kjt.keys().index(key), kjt.stride()
    offsets = kjt.offset_per_key()
    lengths = kjt.lengths().clone()
    own = lengths[i * rows:(i + 1) * rows]
    starts = torch.cumsum(own, 0) - own  # each bag's first value, within the key's values
    new = own[order]
    new_starts = torch.cumsum(new, 0) - new
    index = torch.repeat_interleave(starts[order] - new_starts, new) + torch.arange(int(new.sum()))
    lengths[i * rows:(i + 1) * rows] = new

    def moved(flat: torch.Tensor) -> torch.Tensor:
        return torch.cat([flat[:offsets[i]], flat[offsets[i]:offsets[i + 1]][index], flat[offsets[i + 1]:]])
    weights = kjt.weights_or_none()
    return KeyedJaggedTensor(keys=kjt.keys(), values=moved(kjt.values()), lengths=lengths,
                             weights=None if weights is None else moved(weights))


def permuting(keys: list[str], seed: int) -> Callable[[Batch], Batch]:
    """A batch transform that shuffles the bags of each of ``keys`` across the batch, each by its
    own permutation, drawn from one generator seeded by ``seed`` (a fresh transform draws the same
    permutations: every feature is read against the same draws, and a rerun reads the same)."""
    generator = torch.Generator().manual_seed(seed)

    def transform(batch: Batch) -> Batch:
        sparse = batch.sparse_features
        for key in keys:
            sparse = permute_key(sparse, key, torch.randperm(sparse.stride(), generator=generator))
        return Batch(dense_features=batch.dense_features, sparse_features=sparse, labels=batch.labels)
    return transform


def permutation_costs(trainer: Any, features: Mapping[str, tuple[str, ...]], seed: int,
                      screen: int | None = None, clear: float = 0.002) -> tuple[float, dict[str, float]]:
    """(the trained model's validation AUC, name -> that AUC minus the model's with the bags of
    the features ``features[name]`` shuffled) on the first ``val_samples`` validation samples of
    ``trainer`` (a :class:`~autorec.train.trainer.Trainer` with its weights loaded, one process).

    Each batch is embedded once: a pooled embedding is one row per bag, so shuffling a feature's
    bags is shuffling its rows of the embedded input, and only the layers after it run again per
    feature (with DMT towers, which mix features, the bags themselves are shuffled and the whole
    model runs). With ``screen`` n, the features that cost more than ``clear`` on the first n
    samples are read no further (their cost is that of the n): racing, the clear signal is told on
    a share of the samples and only the close calls on all of them.
    """
    from autorec.metrics import binary_metrics
    from autorec.train.autocast import forward_autocast

    model = getattr(trainer.model, "module", trainer.model)  # the RecModel inside DMP
    cfg, device = trainer.config, trainer.device
    limit = cfg.val_samples or trainer.dataset.num_rows("val")
    dense_first = int(model.dense_arch is not None)
    position = {f: dense_first + i for i, f in enumerate(model.spec.feature_names)}
    generators = {name: torch.Generator().manual_seed(seed + i) for i, name in enumerate(features)}
    labels: list[torch.Tensor] = []
    logits: dict[str | None, list[torch.Tensor]] = {None: [], **{name: [] for name in features}}
    open_, costs, seen = set(features), {}, 0

    def auc(name: str | None) -> float:
        scores = torch.sigmoid(torch.cat(logits[name]).double()).numpy()
        return binary_metrics(torch.cat(labels).numpy(), scores)["auc"]

    model.eval()
    with torch.no_grad(), forward_autocast(cfg.autocast, device):
        for batch in trainer.dataset.batches("val", cfg.eval_batch_size, shuffle=False):
            batch = batch.to(device)
            keep = min(batch.labels.numel(), limit - seen)
            x0 = model.embed(batch.dense_features, batch.sparse_features)
            labels.append(batch.labels[:keep].cpu())
            logits[None].append(model.head(x0)[:keep].float().cpu())
            for name in sorted(open_):
                orders = [torch.randperm(x0.shape[0], generator=generators[name]) for _ in features[name]]
                if model.towers is None:
                    x = x0.clone()
                    for key, order in zip(features[name], orders, strict=True):
                        x[:, position[key]] = x0[order.to(device), position[key]]
                else:
                    sparse = batch.sparse_features
                    for key, order in zip(features[name], orders, strict=True):
                        sparse = permute_key(sparse, key, order)
                    x = model.embed(batch.dense_features, sparse)
                logits[name].append(model.head(x)[:keep].float().cpu())
            seen += keep
            if screen is not None and seen >= screen and seen - keep < screen:
                base = auc(None)
                for name in sorted(open_):
                    costs[name] = base - auc(name)
                    if costs[name] > clear:
                        open_.discard(name)
            if seen >= limit:
                break
    model.train()
    base = auc(None)
    costs.update({name: base - auc(name) for name in open_})
    return base, {name: costs[name] for name in features}


def loaded(training: Any, dataset: Any, train_config: Any) -> Any:
    """A :class:`~autorec.train.trainer.Trainer` of a stage trial's model (its ``arch`` and
    ``checkpoint`` user attributes) with the checkpoint's weights, validated as ``train_config``
    says (its ``val_samples``)."""
    from autorec.arch import ArchSpec
    from autorec.train.trainer import Trainer

    trainer = Trainer(ArchSpec.from_dict(training.user_attrs["arch"]), dataset, train_config)
    trainer.load_checkpoint(training.user_attrs["checkpoint"], optimizer=False)
    return trainer


class TrainedDrops:
    """Reads a finalist's drops off its re-rank training (``drop_read: rerank``): the model that
    training kept, loaded from its checkpoint, and each droppable width choice's features
    permuted together (:func:`permutation_costs`) on ``train_config``'s validation samples.

    Args:
        trainings: finalist (proxy) trial number -> its re-rank stage trial (``arch`` and
            ``checkpoint`` user attributes).
        search: the :class:`~autorec.oneshot.search.CandidateSearch` whose width choices name
            the features (a group's choice permutes every feature of the group).
        dataset, train_config: what the model is built and validated with.
        features: width choice name (``emb.<group>``) -> the features it embeds.
        seed: the permutations' seed.
        screen, clear: :func:`permutation_costs`' racing (``drop_screen``, ``drop_clear``).
    """

    name = "rerank"

    def __init__(self, trainings: Mapping[int, Any], search: Any, dataset: Any, train_config: Any,
                 features: Mapping[str, tuple[str, ...]], seed: int, screen: int | None = None,
                 clear: float = 0.002) -> None:
        self.trainings, self.search, self.dataset = trainings, search, dataset
        self.train_config, self.features, self.seed = train_config, features, seed
        self.screen, self.clear = screen, clear
        self._trainer: tuple[int, Any] | None = None

    def _loaded(self, trial: Any) -> Any:
        """The re-rank training of ``trial``, its weights loaded (the last one kept)."""
        if self._trainer is None or self._trainer[0] != trial.number:
            if trial.number not in self.trainings:
                raise ValueError(f"drop_read 'rerank': candidate {trial.number} has no re-rank training "
                                 "to read (a finalist is one of the re-ranked)")
            model = loaded(self.trainings[trial.number], self.dataset, self.train_config)
            self._trainer = (trial.number, model)
        return self._trainer[1]

    def costs(self, trial: Any, values: Mapping[str, Any]) -> tuple[float, dict[str, float]]:
        from autorec.oneshot.drops import droppable

        groups = {name: self.features[name] for name in droppable(self.search, values)}
        return permutation_costs(self._loaded(trial), groups, self.seed, self.screen, self.clear)

    def joint(self, trial: Any, values: Mapping[str, Any], dropped: list[str]) -> float:
        keys = [key for name in dropped for key in self.features[name]]
        return self._loaded(trial).evaluate("val", permuting(keys, self.seed))["auc"]
