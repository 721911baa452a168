"""Generating the synthetic dataset: samples, labels drawn from the teacher, the 80/10/10 split.

:class:`SyntheticDataset` keeps every sample's true click probability, so a model's AUC can be
set beside the Bayes-optimal one (:meth:`SyntheticDataset.bayes_auc`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, replace
from typing import Any

import numpy as np
import torch

from autorec.data.base import SPLITS, InMemoryDataset
from autorec.data.schema import DataError
from autorec.data.splits import SplitRule
from autorec.data.synthetic.config import SyntheticConfig
from autorec.data.synthetic.sampling import DENSE, LABELS, rng_for, sample_table, table_groups
from autorec.data.synthetic.teacher import Readout, Teacher
from autorec.data.tabular import Jagged, TabularData


def _subset(data: TabularData, idx: torch.Tensor) -> TabularData:
    """``data.subset(idx)``, with a fast path for single-hot columns (a plain gather).

    Generated samples hold >= 1 id per feature, so ``nnz == N`` means one id each.
    """
    columns = tuple(Jagged.single(column.values[idx]) if column.values.numel() == len(data)
                    else Jagged.from_lengths(*column.take(idx)) for column in data.sparse)
    return TabularData(data.schema, data.dense[idx], columns, data.labels[idx])


class SyntheticDataset(InMemoryDataset):
    """Generated data with its true click probabilities.

    Args:
        config: how it was generated.
        seed: its seed.
        splits: train/val/test TabularData.
        probs: the true ``p`` of every sample, per split.
        teacher, readout: ``p = sigmoid(readout.logits(teacher.terms(data)))``.
    """

    def __init__(self, config: SyntheticConfig, seed: int, splits: dict[str, TabularData],
                 probs: dict[str, torch.Tensor], teacher: Teacher, readout: Readout) -> None:
        super().__init__("synthetic", splits)
        self.config, self.seed, self.probs = config, seed, probs
        self.teacher, self.readout = teacher, readout
        self._bayes_auc: dict[str, float] = {}

    def feature_groups(self) -> tuple[tuple[str, ...], ...]:
        """The planted groups of sparse feature names (``num_groups`` > 0), in group order.

        Example:
            >>> ds = load_synthetic(seed=0, preset="groups4", num_samples=1000)
            >>> [len(g) for g in ds.feature_groups()]
            [4, 4, 4, 4]
        """
        if not self.config.num_groups:
            raise DataError("synthetic: this dataset has no planted groups (num_groups is 0)")
        of = table_groups(self.config, self.seed)
        return tuple(tuple(f"cat_{t}" for t in range(self.config.num_tables) if of[t] == g)
                     for g in range(self.config.num_groups))

    def probability(self, data: TabularData) -> torch.Tensor:
        """The teacher's ``p`` [N] for any samples of this schema."""
        return torch.sigmoid(self.readout.logits(self.teacher.terms(data)))

    def bayes_auc(self, split: str) -> float:
        """AUC of the true ``p`` against the drawn labels of ``split``: what no model beats on average."""
        if split not in self._bayes_auc:
            from sklearn.metrics import roc_auc_score

            labels = self.splits[split].labels
            self._bayes_auc[split] = (float(roc_auc_score(labels.numpy(), self.probs[split].numpy()))
                                      if 0 < labels.sum() < labels.numel() else float("nan"))
        return self._bayes_auc[split]

    def bayes_logloss(self, split: str) -> float:
        """Logloss of the true ``p`` on the drawn labels of ``split``: the irreducible loss ``E`` a
        scaling law of this data tends to (:mod:`autorec.scaling`)."""
        p = self.probs[split].double().clamp(1e-12, 1 - 1e-12)
        y = self.splits[split].labels.double()
        return float(-(y * p.log() + (1 - y) * (1 - p).log()).mean())

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "config": asdict(self.config),
            "seed": self.seed,
            "ctr": {s: float(self.splits[s].labels.mean()) for s in SPLITS},
            "bayes_auc": {s: self.bayes_auc(s) for s in SPLITS},
            "bayes_logloss": {s: self.bayes_logloss(s) for s in SPLITS},
        }


@contextmanager
def _one_torch_thread() -> Iterator[None]:
    """Run torch single-threaded: generation is many small ops, and on a 2-core machine whose other
    core is busy, OpenMP's second thread made it 5x slower (23 s against 4.7 s for criteo_like)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def generate(config: SyntheticConfig, seed: int = 0, split: SplitRule | None = None) -> SyntheticDataset:
    """Sample ``config.num_samples`` samples, label them by the teacher, split them by ``split``
    (default: at random 80/10/10 by ``seed``)."""
    with _one_torch_thread():
        return _generate(config, seed, split or SplitRule())


def _generate(config: SyntheticConfig, seed: int, split: SplitRule) -> SyntheticDataset:
    n = config.num_samples
    schema = config.schema()
    dense = torch.from_numpy(rng_for(seed, DENSE).standard_normal((n, config.num_dense), dtype=np.float32))
    columns = tuple(sample_table(config, seed, t) for t in range(config.num_tables))
    unlabelled = TabularData(schema, dense, columns, torch.zeros(n))
    teacher = Teacher.draw(config, seed)
    terms = teacher.terms(unlabelled)
    readout = Readout.fit(terms, config)
    probs = torch.sigmoid(readout.logits(terms))
    labels = (torch.from_numpy(rng_for(seed, LABELS).random(n, dtype=np.float32)) < probs).float()
    data = replace(unlabelled, labels=labels)
    parts = dict(zip(SPLITS, split.rows(n, seed), strict=True))
    return SyntheticDataset(config, seed, {s: _subset(data, idx) for s, idx in parts.items()},
                            {s: probs[idx] for s, idx in parts.items()}, teacher, readout)


def load_synthetic(path: str | None = None, seed: int = 0, *, split: str | None = None,
                   fractions: Sequence[float] | None = None, **options: Any) -> SyntheticDataset:
    """The ``synthetic`` dataset: ``preset`` (see ``PRESETS``) and/or SyntheticConfig fields;
    ``split`` (random or sequential: in generation order) and ``fractions`` as every loader takes
    them (:mod:`autorec.data.splits`).

    Example:
        >>> ds = load_synthetic(seed=0, preset="tiny", num_samples=1000)
        >>> ds.num_rows("train"), ds.bayes_auc("test") > 0.5
        (800, True)
    """
    if path is not None:
        raise DataError(f"synthetic data is generated, not read: got path {path!r}")
    rule = SplitRule.of(split, fractions)
    return generate(SyntheticConfig.from_options(**options), seed, rule)
