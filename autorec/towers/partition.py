"""Tower partitioner: split the embedding tables into K towers that keep interacting features
together, under a load-balance constraint.

1. Interaction statistics from a trained model (:func:`interaction_matrix`), per feature pair:
   ``"ablation"`` (default): the mean |second difference| of the model's logit when the two
   features' pooled embeddings are replaced by those of other samples (a shuffled batch),
   ``|f(x) - f(x^i) - f(x^j) + f(x^ij)|``: zero exactly when the model adds the two features'
   effects, large when it multiplies them; ``"dot"``: the mean ``|<e_i, e_j>|`` of the pooled
   embeddings (what a DLRM dot layer sees).
2. A networkx graph (:func:`feature_graph`): one node per table (a table's features go to one
   tower), edge weight the summed statistic of their features, node loads ``bytes``
   (rows x dim x element size) and ``lookups`` (mean ids per sample).
3. :func:`partition`: balanced average-linkage agglomeration on the graph (merge the two
   towers of highest mean interaction whose union keeps bytes and lookups within
   ``(1 + tolerance)`` of the per-tower mean), a repair that moves tables out of any tower still
   overloaded, then moves and swaps that lower the cut weight while keeping that balance
   (Kernighan-Lin style, best gain first).

Baselines: :func:`random_partition` and :func:`round_robin_partition`; scores:
:func:`adjusted_rand_index`, :func:`cut_fraction`, :func:`imbalance`.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Mapping, Sequence

import networkx as nx
import numpy as np
import torch
from sklearn.metrics import adjusted_rand_score
from torch import nn
from torchrec.distributed.model_parallel import get_unwrapped_module
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from autorec.arch import ArchSpec, BlockConfig, TowerSpec
from autorec.models import RecModel, _place_features

RESOURCES = ("bytes", "lookups")
METHODS = ("ablation", "dot")
_ELEMENT_BYTES = {"fp32": 4, "fp16": 2}


class PartitionError(ValueError):
    """No partition meets the request (K, tolerance); the message says which tower and load."""


# ---- 1. interaction statistics ---------------------------------------------------------------
def _rest(model: RecModel, dense: torch.Tensor, pooled: torch.Tensor) -> torch.Tensor:
    """Logits [B] from pooled embeddings [B, F, D]: what the model does after the lookups."""
    x = model.towers(pooled) if model.towers is not None else pooled
    if model.dense_arch is not None:
        x = torch.cat([model.dense_arch(dense).unsqueeze(1), x], dim=1)
    return model.over_arch(model.layers(x).flatten(1)).squeeze(-1)


@torch.no_grad()
def interaction_matrix(model: nn.Module, dense: torch.Tensor, sparse: KeyedJaggedTensor,
                       method: str = "ablation", seed: int = 0) -> tuple[tuple[str, ...], np.ndarray]:
    """(feature names, symmetric [F, F] interaction strengths, zero diagonal) over one batch.

    Args:
        model: a trained :class:`~autorec.models.RecModel` (or one wrapped by
            DistributedModelParallel / DDP).
        dense: [B, n_dense]. sparse: the batch's KeyedJaggedTensor.
        method: ``"ablation"`` or ``"dot"`` (module docstring).
        seed: the batch shuffle of ``"ablation"``.

    Example:
        >>> from autorec.arch import TableSpec, DotConfig
        >>> spec = ArchSpec(dim=4, tables=tuple(TableSpec(name=f"t{i}", features=(f"f{i}",),
        ...     num_embeddings=10, dim=4) for i in range(3)), layers=(DotConfig(n_passthrough=0),))
        >>> kjt = KeyedJaggedTensor.from_lengths_sync(["f0", "f1", "f2"], torch.arange(24) % 10,
        ...                                           torch.ones(24, dtype=torch.long))
        >>> names, w = interaction_matrix(RecModel(spec), torch.zeros(8, 0), kjt)
        >>> names, w.shape, bool((w == w.T).all())
        (('f0', 'f1', 'f2'), (3, 3), True)
    """
    if method not in METHODS:
        raise ValueError(f"interaction_matrix: method must be one of {', '.join(METHODS)}, got {method!r}")
    model = get_unwrapped_module(model)
    if isinstance(model, nn.parallel.DistributedDataParallel):
        model = model.module
    was_training = model.training
    model.eval()
    try:
        spec: ArchSpec = model.spec
        names = spec.feature_names
        pooled = _place_features(model.sparse_arch(sparse), names, spec.dim, model.projections)
        f = len(names)
        weights = np.zeros((f, f))
        if method == "dot":
            dots = torch.einsum("bid,bjd->bij", pooled, pooled).abs().mean(0)
            weights = dots.double().numpy().copy()
        else:
            perm = torch.randperm(pooled.shape[0], generator=torch.Generator().manual_seed(seed))
            shuffled = pooled[perm]

            def logits(replaced: Sequence[int]) -> torch.Tensor:
                x = pooled.clone()
                x[:, list(replaced)] = shuffled[:, list(replaced)]
                return _rest(model, dense, x)

            base = logits(())
            single = [logits((i,)) for i in range(f)]
            for i, j in itertools.combinations(range(f), 2):
                second = base - single[i] - single[j] + logits((i, j))
                weights[i, j] = weights[j, i] = float(second.abs().mean())
        np.fill_diagonal(weights, 0.0)
        return names, weights
    finally:
        model.train(was_training)


# ---- 2. the graph ----------------------------------------------------------------------------
def table_loads(spec: ArchSpec, sparse: KeyedJaggedTensor | None = None) -> dict[str, dict[str, float]]:
    """Per table: ``bytes`` (rows x dim x element size) and ``lookups`` (mean ids per sample of
    its features over ``sparse``; 1 per feature without a batch)."""
    lengths: dict[str, float] = {}
    if sparse is not None:
        for name, jagged in sparse.to_dict().items():
            lengths[name] = float(jagged.lengths().double().mean())
    return {t.name: {"bytes": float(t.num_embeddings * t.dim * _ELEMENT_BYTES[t.precision]),
                     "lookups": sum(lengths.get(f, 1.0) for f in t.features)} for t in spec.tables}


def feature_graph(spec: ArchSpec, features: Sequence[str], weights: np.ndarray,
                  loads: Mapping[str, Mapping[str, float]] | None = None) -> nx.Graph:
    """One node per table of ``spec`` (attributes ``features`` and the loads), edges weighted by
    the summed interaction of their features (``weights`` [F, F] over ``features``).

    Example:
        >>> from autorec.arch import TableSpec
        >>> spec = ArchSpec(dim=4, tables=(TableSpec(name="ta", features=("a",), num_embeddings=10, dim=4),
        ...     TableSpec(name="tb", features=("b",), num_embeddings=30, dim=4)))
        >>> g = feature_graph(spec, ("a", "b"), np.array([[0.0, 2.0], [2.0, 0.0]]))
        >>> g.edges["ta", "tb"]["weight"], g.nodes["tb"]["bytes"]
        (2.0, 480.0)
    """
    weights = np.asarray(weights, dtype=float)
    if weights.shape != (len(features), len(features)):
        raise ValueError(f"feature_graph: weights have shape {weights.shape}, expected "
                         f"({len(features)}, {len(features)}) for the features {list(features)}")
    loads = loads or table_loads(spec)
    index = {f: i for i, f in enumerate(features)}
    graph = nx.Graph()
    for t in spec.tables:
        missing = [f for f in t.features if f not in index]
        if missing:
            raise ValueError(f"feature_graph: table {t.name!r} has features {missing} without statistics")
        graph.add_node(t.name, features=t.features, **{r: float(loads[t.name][r]) for r in RESOURCES})
    for a, b in itertools.combinations(spec.tables, 2):
        w = sum(weights[index[f], index[g]] for f in a.features for g in b.features)
        if w > 0:
            graph.add_edge(a.name, b.name, weight=float(w))
    return graph


# ---- 3. partitioning -------------------------------------------------------------------------
def _limits(graph: nx.Graph, k: int, tolerance: float) -> dict[str, float]:
    return {r: (1.0 + tolerance) * sum(d[r] for _, d in graph.nodes(data=True)) / k for r in RESOURCES}


def _load(graph: nx.Graph, part: set[str], resource: str) -> float:
    return sum(graph.nodes[n][resource] for n in part)


def _link(graph: nx.Graph, node: str, part: set[str]) -> float:
    return sum(d["weight"] for m, d in graph[node].items() if m in part and m != node)


def _fits(graph: nx.Graph, part: set[str], limits: Mapping[str, float], add: str | None = None,
          remove: str | None = None) -> bool:
    for r in RESOURCES:
        load = (_load(graph, part, r) + (graph.nodes[add][r] if add else 0.0)
                - (graph.nodes[remove][r] if remove else 0.0))
        if load > limits[r] * (1 + 1e-9):
            return False
    return True


def _initial(graph: nx.Graph, k: int, limits: Mapping[str, float]) -> list[set[str]]:
    """Balanced average-linkage agglomeration: start from one table per tower and merge the two
    towers of highest mean interaction per table pair whose union still fits the limits (or, when
    no union fits, the two lightest) until k remain."""
    parts = [{n} for n in graph.nodes]
    while len(parts) > k:
        best: tuple[float, int, int] | None = None
        for a, b in itertools.combinations(range(len(parts)), 2):
            union = parts[a] | parts[b]
            if not _fits(graph, union, limits):
                continue
            link = sum(_link(graph, n, parts[b]) for n in parts[a]) / (len(parts[a]) * len(parts[b]))
            if best is None or link > best[0]:
                best = (link, a, b)
        if best is None:
            order = sorted(range(len(parts)), key=lambda i: max(_load(graph, parts[i], r) / limits[r]
                                                                for r in RESOURCES))
            best = (0.0, order[0], order[1])
        _, a, b = best
        parts = [p for i, p in enumerate(parts) if i not in (a, b)] + [parts[a] | parts[b]]
    return parts


def _excess(graph: nx.Graph, parts: Sequence[set[str]], limits: Mapping[str, float]) -> tuple[float, float]:
    """(summed relative overload of every tower and resource, 0 when all fit; summed squared
    relative loads, which a step that moves load from heavy to light towers lowers)."""
    ratios = [_load(graph, p, r) / limits[r] for p in parts for r in RESOURCES]
    return sum(max(0.0, x - 1.0 - 1e-9) for x in ratios), sum(x * x for x in ratios)


def _repair(graph: nx.Graph, parts: list[set[str]], limits: Mapping[str, float]) -> None:
    """Moves and swaps that lower the towers' total overload, or keep it and even the loads out
    (least interaction lost first), until every tower fits."""
    for _ in range(10 * graph.number_of_nodes() + 10):
        excess, spread = _excess(graph, parts, limits)
        if excess == 0.0:
            return
        best: tuple[float, float, float, tuple] | None = None
        for i, j in itertools.permutations(range(len(parts)), 2):
            for n in list(parts[i]):
                options = [(m,) for m in parts[j]] + ([()] if len(parts[i]) > 1 else [])
                for m in options:
                    trial = [set(p) for p in parts]
                    trial[i].remove(n), trial[j].add(n)
                    if m:
                        trial[j].remove(m[0]), trial[i].add(m[0])
                    new_excess, new_spread = _excess(graph, trial, limits)
                    drop = round(excess - new_excess, 12)
                    if drop < 0 or (drop == 0 and new_spread >= spread - 1e-12):
                        continue
                    gain = _link(graph, n, parts[j]) - _link(graph, n, parts[i])
                    key = (drop, -new_spread, gain, (n, i, j, *m))
                    if best is None or key[:3] > best[:3]:
                        best = key
        if best is None:
            break
        n, i, j, *m = best[3]
        parts[i].remove(n), parts[j].add(n)
        if m:
            parts[j].remove(m[0]), parts[i].add(m[0])
    loads = {r: [round(_load(graph, p, r), 3) for p in parts] for r in RESOURCES}
    raise PartitionError(f"cannot balance {graph.number_of_nodes()} tables into {len(parts)} towers within "
                         f"the tolerance: per-tower limits {dict(limits)}, reached loads {loads}")


def _refine(graph: nx.Graph, parts: list[set[str]], limits: Mapping[str, float], max_passes: int) -> None:
    """Best-gain moves and swaps that lower the cut weight and keep every tower within limits."""
    for _ in range(max_passes):
        best: tuple[float, tuple] = (1e-12, ())
        where = {n: i for i, p in enumerate(parts) for n in p}
        for n, i in where.items():
            for j in range(len(parts)):
                if j == i:
                    continue
                gain = _link(graph, n, parts[j]) - _link(graph, n, parts[i])
                if gain > best[0] and len(parts[i]) > 1 and _fits(graph, parts[j], limits, add=n):
                    best = (gain, (n, i, j))
                for m in parts[j]:
                    w = graph.get_edge_data(n, m, {"weight": 0.0})["weight"]
                    swap = gain + _link(graph, m, parts[i]) - _link(graph, m, parts[j]) - 2 * w
                    if (swap > best[0] and _fits(graph, parts[j] - {m}, limits, add=n)
                            and _fits(graph, parts[i] - {n}, limits, add=m)):
                        best = (swap, (n, i, j, m))
        if not best[1]:
            return
        n, i, j, *m = best[1]
        parts[i].remove(n)
        parts[j].add(n)
        if m:
            parts[j].remove(m[0])
            parts[i].add(m[0])


def partition(graph: nx.Graph, k: int, tolerance: float = 0.1, max_passes: int = 200) -> list[frozenset[str]]:
    """K towers (sets of table names) with strongly interacting tables together and every
    tower's ``bytes`` and ``lookups`` at most ``(1 + tolerance)`` times the mean.

    Raises PartitionError when the balance cannot be met (e.g. one table alone exceeds it).

    Example:
        >>> g = nx.Graph()
        >>> g.add_nodes_from("abcd", bytes=1.0, lookups=1.0)
        >>> g.add_weighted_edges_from([("a", "c", 5.0), ("b", "d", 5.0), ("a", "b", 1.0)])
        >>> sorted(sorted(p) for p in partition(g, 2))
        [['a', 'c'], ['b', 'd']]
    """
    n = graph.number_of_nodes()
    if not isinstance(k, int) or k < 1 or k > n:
        raise PartitionError(f"partition: k must be an integer in [1, {n}] (the number of tables), got {k!r}")
    if tolerance < 0:
        raise PartitionError(f"partition: tolerance must be >= 0, got {tolerance}")
    limits = _limits(graph, k, tolerance)
    parts = _initial(graph, k, limits)
    _repair(graph, parts, limits)
    _refine(graph, parts, limits, max_passes)
    return _ordered(parts)


def _ordered(parts: Sequence[set[str]] | Sequence[frozenset[str]]) -> list[frozenset[str]]:
    return sorted((frozenset(p) for p in parts), key=lambda p: sorted(p))


def round_robin_partition(graph: nx.Graph, k: int) -> list[frozenset[str]]:
    """Baseline: the i-th table (in the graph's order) to tower ``i mod k``."""
    nodes = list(graph.nodes)
    return _ordered([set(nodes[i::k]) for i in range(k)])


def random_partition(graph: nx.Graph, k: int, seed: int = 0) -> list[frozenset[str]]:
    """Baseline: tables shuffled by ``seed``, then dealt round robin (equal counts)."""
    nodes = list(graph.nodes)
    random.Random(seed).shuffle(nodes)
    return _ordered([set(nodes[i::k]) for i in range(k)])


# ---- scores ----------------------------------------------------------------------------------
def cut_fraction(graph: nx.Graph, parts: Sequence[frozenset[str]]) -> float:
    """The share of the total interaction weight that crosses towers (0 is best)."""
    total = graph.size(weight="weight")
    tower = {n: i for i, p in enumerate(parts) for n in p}
    cut = sum(d["weight"] for a, b, d in graph.edges(data=True) if tower[a] != tower[b])
    return cut / total if total > 0 else 0.0


def imbalance(graph: nx.Graph, parts: Sequence[frozenset[str]]) -> dict[str, float]:
    """Per resource, the heaviest tower's load over the mean (1.0 is perfect balance)."""
    return {r: max(_load(graph, set(p), r) for p in parts) * len(parts)
            / max(sum(d[r] for _, d in graph.nodes(data=True)), 1e-30) for r in RESOURCES}


def adjusted_rand_index(truth: Sequence[int], predicted: Sequence[int]) -> float:
    """Hubert and Arabie's adjusted Rand index of two labelings (1 identical, ~0 at chance):
    scikit-learn's ``adjusted_rand_score``, as a float.

    Example:
        >>> same, crossed = [0, 0, 1, 1], [0, 1, 0, 1]
        >>> adjusted_rand_index(same, [5, 5, 2, 2]), round(adjusted_rand_index(same, crossed), 6)
        (1.0, -0.5)
    """
    if len(truth) != len(predicted):
        raise ValueError(f"adjusted_rand_index: {len(truth)} true labels against {len(predicted)} predicted")
    return float(adjusted_rand_score(truth, predicted))


def labels(parts: Sequence[frozenset[str]], order: Sequence[str]) -> list[int]:
    """The tower index of each name in ``order``."""
    tower = {n: i for i, p in enumerate(parts) for n in p}
    return [tower[n] for n in order]


def with_towers(spec: ArchSpec, parts: Sequence[frozenset[str]], module: BlockConfig,
                n_out: int = 1) -> ArchSpec:
    """``spec`` with one tower per part (sets of table names), in the tables' order within each."""
    by_name = {t.name: t for t in spec.tables}
    unknown = sorted(set().union(*parts) - set(by_name))
    if unknown:
        raise ValueError(f"with_towers: unknown tables {unknown}; the spec has {', '.join(by_name)}")
    return spec.replace(towers=TowerSpec(groups=tower_groups(spec, parts), module=module, n_out=n_out))


def tower_groups(spec: ArchSpec, parts: Sequence[frozenset[str]]) -> tuple[tuple[str, ...], ...]:
    """Each part's (a set of table names) features, in the tables' order: ``TowerSpec.groups``."""
    return tuple(tuple(f for t in spec.tables if t.name in p for f in t.features) for p in parts)
