"""One over-arch per last layer kind, fitted on the trained supernet: what a path is scored with.

The supernet has one over-arch, and it reads the last layer's (padded) output columns whatever
kind filled them: a DHEN ensemble's outputs on one step, a DCNv2 cross's or DLRM's dots on the
next. Its weights settle where the kinds the shared weights fit best put their outputs, and the
inherited-weight score of every other kind pays for that. On issue 20's ``scale`` workload every
supernet's 44-46 best of 264 layer settings at width 16 were all DHEN-first (the best DCNv2
45th-47th, where a one-epoch training puts DCNv2 first), and 300 steps of the
over-arch alone on one DCNv2 path, the rest frozen, lifted its score past the DHEN's
(BENCHMARKS.md, "Why the proxy sends DHEN").

So after the supernet trains, each kind a path can end in gets its own copy of the over-arch,
trained alone (every other weight frozen, the embeddings detached) for ``steps`` steps on paths
drawn as the supernet's training draws them but ending in that kind; a candidate is then scored
with the head of its last kind (:meth:`KindHeads.use`). The few-shot NAS idea (Zhao et al., 2021:
split the supernet where weight sharing hurts most, each part fine-tuned from the shared weights)
applied to the head alone, which costs forward passes of the body and the head's backward only.

Each head is saved (safetensors) under ``directory`` when trained, so a rerun after a kill loads
it instead of training it again.

Example:
    >>> from autorec.blocks import identity_kind
    >>> layer_kinds = [("dcnv2", "dhen"), ("dcnv2", "dhen", identity_kind())]
    >>> last_kind(layer_kinds, {"layer0.kind": "dhen", "layer1.kind": identity_kind()})
    'dhen'
    >>> last_kind(layer_kinds, {"layer0.kind": "dhen", "layer1.kind": "dcnv2"})
    'dcnv2'
    >>> end_kinds(layer_kinds)
    ['dcnv2', 'dhen']
"""

from __future__ import annotations

import itertools
import json
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from autorec.blocks import identity_kind
from autorec.train.checkpoints import write_json

NONE = "none"  # the head of a path that skips every layer (the embeddings go to the over-arch)
_MAX_TRIES = 10_000  # uniform draws per path before a kind is called unreachable


def last_kind(layer_kinds: Sequence[Sequence[str]], values: Mapping[str, Any]) -> str:
    """The kind of the last layer a path runs (``values``: choice name -> value; a layer with one
    kind has no choice and runs it), or ``none`` when it skips them all."""
    skip = identity_kind()
    for i in reversed(range(len(layer_kinds))):
        kind = values.get(f"layer{i}.kind", layer_kinds[i][0])
        if kind != skip:
            return str(kind)
    return NONE


def end_kinds(layer_kinds: Sequence[Sequence[str]]) -> list[str]:
    """Every kind a path can end in, in the layers' order (``none`` last when every layer may
    be skipped)."""
    skip = identity_kind()
    out = list(dict.fromkeys(k for kinds in layer_kinds for k in kinds if k != skip))
    if all(skip in kinds for kinds in layer_kinds):
        out.append(NONE)
    return out


class KindHeads:
    """The over-arch heads of ``training``'s supernet (a trained
    :class:`~autorec.oneshot.train.SupernetTraining`), one per kind a path ends in, each
    trained for ``steps`` steps from the shared over-arch, kept in ``directory``. ``share``: the
    share of the heads' paths that give every feature one width and one hash size (None: the
    supernet's ``shared_paths``, as its training drew them; 1.0 fits each head to the all-alike
    corner a search that proposes only such settings scores)."""

    def __init__(self, training: Any, steps: int, directory: str | Path, share: float | None = None) -> None:
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise ValueError(f"kind_heads: expected an integer >= 1 (steps per head), got {steps!r}")
        if share is not None and (isinstance(share, bool) or not isinstance(share, (int, float))
                                  or not 0.0 <= share <= 1.0):
            raise ValueError(f"kind_heads_shared: expected a share of paths in [0, 1], got {share!r}")
        self.training, self.steps, self.directory = training, steps, Path(directory)
        self.share = float(training.config.shared_paths if share is None else share)
        self.net = training.search.supernet
        self.head = self.net.over_arch
        self.shared = {k: v.detach().clone() for k, v in self.head.state_dict().items()}
        self.kinds = end_kinds(self.net.layer_kinds)
        self.heads: dict[str, dict[str, torch.Tensor]] = {}
        self.current: str | None = None  # whose weights the over-arch holds (None: the shared)

    def fit(self, log: Callable[[str], None] | None = None) -> float:
        """Load each saved head and train the others; returns the seconds spent training now.
        The over-arch holds the shared weights again afterwards."""
        spent, batches = 0.0, None
        for kind in self.kinds:
            path = self.directory / f"{kind}.safetensors"
            if path.exists() and self._meta(kind) == self.record:
                self.heads[kind] = load_file(str(path))
                continue
            start = time.perf_counter()
            if batches is None:  # every head trains on the stream's first batches: made once
                train, _ = self.training.search.batches()
                batches = list(itertools.islice(train, self.steps))
            self.heads[kind] = self._train(kind, batches)
            spent += time.perf_counter() - start
            self._save(kind, path)
            if log is not None:
                log(f"one-shot search: the over-arch of paths ending in {kind} trained alone, "
                    f"{self.steps} steps")
        self.use(None)
        return spent

    def use(self, values: Mapping[str, Any] | None) -> None:
        """Give the over-arch the head of the path at ``values`` (None: the shared one)."""
        kind = None if values is None else last_kind(self.net.layer_kinds, values)
        if kind == self.current:
            return
        self.head.load_state_dict(self.shared if kind is None else self.heads[kind])
        self.current = kind

    # ---- one head -----------------------------------------------------------------------
    def _paths(self, kind: str, generator: torch.Generator) -> Any:
        """Endless paths (choice name -> value) ending in ``kind``, each drawn as the supernet's
        training draws its uniform path (every choice uniformly, all-alike embeddings on its
        ``shared_paths`` share of them, or the heads' own ``share``), redrawn until it ends there."""
        training = self.training
        choices = {c.name: c for c in training.choices}
        share = self.share
        while True:
            for _ in range(_MAX_TRIES):
                path = training.uniform_path(generator)
                values = {name: choices[name].values[i] for name, i in path.items()}
                if last_kind(self.net.layer_kinds, values) == kind:
                    break
            else:
                raise ValueError(f"kind_heads: no path of the space ends in {kind!r} "
                                 f"in {_MAX_TRIES} draws")
            if share and float(torch.rand((), generator=generator)) < share:
                path.update(training.shared_embeddings(generator))
                values = {name: choices[name].values[i] for name, i in path.items()}
            yield values

    def _train(self, kind: str, batches: Sequence[Any]) -> dict[str, torch.Tensor]:
        """The over-arch trained alone on paths ending in ``kind`` and on ``batches``, from the
        shared weights."""
        generator = torch.Generator().manual_seed(self.training.config.seed + 1 + self.kinds.index(kind))
        self.head.load_state_dict(self.shared)
        self.current = None
        trained = train_head(self.training, self._paths(kind, generator), self.steps, batches)
        self.head.load_state_dict(self.shared)
        return trained

    @property
    def record(self) -> dict[str, Any]:
        """What a saved head was trained with: its steps and its share of all-alike paths."""
        return {"steps": self.steps, "share": self.share}

    def _meta(self, kind: str) -> dict[str, Any] | None:
        """A saved head's record (one saved before ``share`` existed drew the supernet's share)."""
        meta = self.directory / f"{kind}.json"
        if not meta.exists():
            return None
        return {"share": float(self.training.config.shared_paths), **json.loads(meta.read_text())}

    def _save(self, kind: str, path: Path) -> None:
        """The head, then its record (:attr:`record`): a head without a record, or with another,
        is trained again."""
        self.directory.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.partial")
        save_file(self.heads[kind], str(partial))
        os.replace(partial, path)
        write_json(self.directory / f"{kind}.json", self.record)


def train_head(training: Any, paths: Iterator[Mapping[str, Any]], steps: int,
               batches: Iterable[Any] | None = None) -> dict[str, torch.Tensor]:
    """Train the over-arch of ``training``'s supernet alone (every other weight frozen, the
    embeddings detached) for ``steps`` steps of ``batches`` (None: the training batch stream from
    its start), one path of ``paths`` (choice name -> value) a step, from the weights it holds;
    returns its trained weights (left in place: the caller restores what it needs)."""
    search, config = training.search, training.config
    head = search.supernet.over_arch
    own = {id(p) for p in head.parameters()}
    frozen = [p for p in search.model.parameters() if id(p) not in own and p.is_leaf and p.requires_grad]
    optimizer = torch.optim.Adam(head.parameters(), lr=config.dense_lr)
    train = iter(batches) if batches is not None else search.batches()[0]
    for p in frozen:
        p.requires_grad_(False)
    try:
        for _ in range(steps):
            values = next(paths)
            optimizer.zero_grad()
            loss = search._bce(next(train).to(search.device), search.one_hot(values), detach_embeddings=True)
            loss.backward()
            optimizer.step()
    finally:
        for p in frozen:
            p.requires_grad_(True)
    return {k: v.detach().clone().contiguous() for k, v in head.state_dict().items()}
