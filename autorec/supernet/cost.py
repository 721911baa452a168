"""E[cost] of the supernet's architecture distribution, from the analytic cost model.

Every number comes from :func:`autorec.costs.arch_cost` of a small probe ArchSpec holding just
the part being costed (one layer at its input width, the over-arch at its input width, the dense
arch, one feature's projection), so the supernet and the cost model cannot disagree: at a
one-hot distribution E[cost] equals ``arch_cost(supernet.derive())`` exactly (tested). The
``latency`` metric prices the same probe parts with the learned latency model
(:mod:`autorec.costs.latency`), so it equals that model's ``spec_seconds(derive())`` likewise.

The expectation is differentiable through every choice probability and is taken as:

- per layer, over its kinds exactly; within a kind, first order around the current most probable
  valid config: ``c(a) + sum_field sum_value p(value) * (c(a with field=value) - c(a))`` (exact
  when a kind's cost is additive over its fields; it costs 1 + sum |values| probes per kind
  rather than the product). The layer's precision (``layer<i>.precision``) is one more field of
  every kind: it changes the bytes of the layer's matrices, not its FLOPs;
- each layer's input width is the one the derived (most probable) stack gives it;
- the over-arch's cost follows the last layer's output width, so it is folded into the last
  layer's cost; where the supernet searches the over-arch, exactly over its sizes' probabilities;
- embedding widths exactly (per feature, its projection and its table bytes);
- DMT towers (``towers.num``, ``towers.kind``, ``towers.n_out``) exactly over their product;
  the stack's input width is the derived towers' ``K * n_out`` (+ the dense vector).

Probe costs are cached by (config, width), so a run pays for each probe once.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import torch

from autorec.arch import ArchSpec, BlockConfig, TableSpec
from autorec.costs.analytic import arch_cost, probe_tables, tensor_bytes
from autorec.costs.latency import load_latency_model
from autorec.supernet.supernet import Ranker, Supernet

COST_METRICS = ("flops", "params_bytes", "embedding_bytes", "latency")


def _part(spec: ArchSpec, name: str, metric: str) -> float:
    if metric == "latency":
        return load_latency_model().part_seconds(spec).get(name, 0.0)
    for part in arch_cost(spec).parts:
        if part.name == name:
            return float(part.forward_flops if metric == "flops" else part.bytes)
    return 0.0  # arch_cost leaves out parts with no parameters and no FLOPs


@functools.lru_cache(maxsize=65536)
def layer_cost(config: BlockConfig, num_in: int, dim: int, metric: str) -> float:
    """Cost of one interaction layer taking [B, num_in, dim] (``metric``: flops or params_bytes)."""
    spec = ArchSpec(dim=dim, tables=probe_tables(num_in, dim), layers=(config,), over_arch=(1,))
    return _part(spec, "layers.0", metric)


@functools.lru_cache(maxsize=4096)
def over_arch_cost(num_in: int, dim: int, over_arch: tuple[int, ...], metric: str) -> float:
    """Cost of the over-arch on ``num_in`` vectors of width ``dim``."""
    return _part(
        ArchSpec(dim=dim, tables=probe_tables(num_in, dim), over_arch=over_arch), "over_arch", metric
    )


@functools.lru_cache(maxsize=4096)
def towers_cost(sizes: tuple[int, ...], module: BlockConfig, n_out: int, dim: int, metric: str) -> float:
    """Cost of towers of ``sizes`` features each, ``module`` compressed to ``n_out`` vectors."""
    from autorec.arch import TowerSpec

    tables = probe_tables(sum(sizes), dim)
    names = [t.features[0] for t in tables]
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    groups = tuple(tuple(names[a:a + n]) for a, n in zip(starts, sizes, strict=True))
    spec = ArchSpec(dim=dim, tables=tables, towers=TowerSpec(groups=groups, module=module, n_out=n_out))
    return _part(spec, "towers", metric)


@functools.lru_cache(maxsize=4096)
def dense_arch_cost(n_dense: int, dense_arch: tuple[int, ...], dim: int, metric: str) -> float:
    if not n_dense:
        return 0.0
    spec = ArchSpec(dim=dim, tables=probe_tables(1, dim), n_dense=n_dense, dense_arch=dense_arch)
    return _part(spec, "dense_arch", metric)


@functools.lru_cache(maxsize=4096)
def projection_cost(width: int, dim: int, metric: str) -> float:
    """Cost of projecting one feature's ``width``-wide embedding to ``dim`` (0 when equal, or
    when the width is 0: a dropped feature)."""
    if width == 0:
        return 0.0
    spec = ArchSpec(dim=dim, tables=(TableSpec(name="p", features=("p",), num_embeddings=1, dim=width),))
    return _part(spec, "projections", metric)


def spec_cost(spec: ArchSpec, metric: str) -> float:
    """``metric`` of a whole spec, as E[cost] gives it at that spec's one-hot path (and, but for
    ``latency``, as the study records it)."""
    if metric not in COST_METRICS:
        raise ValueError(f"cost metric: expected one of {', '.join(COST_METRICS)}, got {metric!r}")
    if metric == "latency":
        return load_latency_model().spec_seconds(spec)
    return float(arch_cost(spec).summary()[metric])


class ExpectedCost:
    """``E[cost]`` of a supernet's distribution (see the module docstring for how it is taken).

    Args:
        supernet: the supernet (its ``arch`` holds the probabilities).
        metric: ``flops`` (forward FLOPs per sample), ``params_bytes`` (dense parameter bytes),
            ``embedding_bytes`` (table bytes), as the study records them, or ``latency`` (seconds
            of a training step's dense forward + backward, from the learned latency model of
            :mod:`autorec.costs.latency` fitted for this device).

    Example:
        >>> from autorec.data import Schema, SparseFeature
        >>> from autorec.space import SearchSpace
        >>> space = SearchSpace.from_dict({"dim": [8], "over_arch": [[16]],
        ...                                "layers": {"kinds": ["dlrm", "dcnv2"]}})
        >>> net = Supernet(space, Schema((), (SparseFeature("u", 10), SparseFeature("i", 9))), 8, (), (16,))
        >>> cost = ExpectedCost(net, "flops")
        >>> with torch.no_grad():
        ...     _ = net.arch.logit("layer0.kind").copy_(torch.tensor([50.0, 0.0]))  # dlrm
        >>> from autorec.costs import arch_cost
        >>> float(cost().detach()) == arch_cost(net.derive()).forward_flops
        True
    """

    def __init__(self, supernet: Supernet, metric: str = "flops") -> None:
        if metric not in COST_METRICS:
            raise ValueError(f"cost metric: expected one of {', '.join(COST_METRICS)}, got {metric!r}")
        if metric == "latency":
            load_latency_model()  # fail here, with the command that fits one, if there is none
        self.net, self.metric = supernet, metric

    def __call__(self, probs: Mapping[str, torch.Tensor] | None = None) -> torch.Tensor:
        """E[cost] under ``probs`` (default: the softmax of the current logits, with gradient)."""
        net = self.net
        probs = probs if probs is not None else net.arch.expected()
        rank = net.ranker()
        if self.metric == "embedding_bytes":
            return self._embedding_bytes(probs)
        total = _t(dense_arch_cost(net.schema.n_dense, net.dense_sizes, net.dim, self.metric))
        for group, features in net.groups:
            p = self._p(probs, f"emb.{group}", len(net.emb_values))
            costs = _t([projection_cost(w, net.dim, self.metric) for w in net.emb_widths])
            total = total + len(features) * (p @ costs)
        total = total + self._towers(probs)
        f_in, last = net.derive_input(rank)[1], len(net.layers) - 1
        for i in range(len(net.layers)):
            kinds = net.layer_kinds[i]
            fallback = net.layer_config(i, f_in, rank)
            p_kind = self._p(probs, f"layer{i}.kind", len(kinds))
            for j, kind in enumerate(kinds):
                total = total + p_kind[j] * self._kind_cost(i, kind, f_in, rank, fallback, probs, i == last)
            f_in = _out(fallback, f_in, net.dim)
        if not net.layers:
            total = total + self._over_arch(f_in, probs)
        return total

    def _over_arch(self, f_out: int, probs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """E over the over-arch sizes of its cost on ``f_out`` vectors (one size: that one's)."""
        values = self.net.over_values
        costs = _t([over_arch_cost(f_out, self.net.dim, v, self.metric) for v in values])
        return self._p(probs, "over_arch", len(values)) @ costs

    def _towers(self, probs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """E over tower count, module kind and n_out of the tower modules' cost."""
        from autorec.space.towers import tower_module

        net = self.net
        total = _t(0.0)
        if net.towers is None:
            return total
        choices = net.towers.choices_
        p_num = self._p(probs, "towers.num", len(choices.num))
        p_kind = self._p(probs, "towers.kind", len(choices.kinds))
        p_out = self._p(probs, "towers.n_out", len(choices.n_out))
        for a, k in enumerate(choices.num):
            if k == 0:
                continue
            sizes = tuple(len(g) for g in choices.groups(k, net.schema.sparse_names))
            for b, kind in enumerate(choices.kinds):
                costs = _t([towers_cost(sizes, tower_module(kind), n, net.dim, self.metric)
                            for n in choices.n_out])
                total = total + p_num[a] * p_kind[b] * (p_out @ costs)
        return total

    def _p(self, probs: Mapping[str, torch.Tensor], name: str, size: int) -> torch.Tensor:
        return probs[name].double() if name in probs else torch.ones(size, dtype=torch.float64)

    def _config_cost(self, config: BlockConfig, f_in: int, with_over_arch: bool,
                     probs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        cost = _t(layer_cost(config, f_in, self.net.dim, self.metric))
        if with_over_arch:
            cost = cost + self._over_arch(_out(config, f_in, self.net.dim), probs)
        return cost

    def _kind_cost(
        self,
        i: int,
        kind: str,
        f_in: int,
        rank: Ranker,
        fallback: BlockConfig,
        probs: Mapping[str, torch.Tensor],
        last: bool,
    ) -> torch.Tensor:
        op = self.net.layers[i].candidates[kind]
        base = self.net.block_values(i, kind, f_in, rank)
        if base is None:  # not valid at this width: derive would take the fallback kind
            return self._config_cost(fallback, f_in, last, probs)
        c0 = self._config_cost(op.config(base), f_in, last, probs)
        total = c0
        for key, allowed in op.fields.items():
            name = self.net.choice_name(f"layer{i}.{kind}.{key}")
            if name not in probs:
                continue
            deltas = []
            for value in self.net.arch.choices[name].values:  # the layer's precisions: a superset
                variant: dict[str, Any] = {**base, key: value}
                ok = value in allowed and op.out_features(variant, f_in) is not None
                deltas.append(self._config_cost(op.config(variant), f_in, last, probs) - c0 if ok
                              else _t(0.0))
            total = total + probs[name].double() @ torch.stack(deltas)
        return total

    def _embedding_bytes(self, probs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        net = self.net
        total = _t(0.0)
        for group, features in net.groups:
            p = self._p(probs, f"emb.{group}", len(net.emb_values))
            h = self._p(probs, f"emb.{group}.hash", len(net.hash_values))
            for name in features:
                kept = h @ _t([float(net.hash_rows(name, k)) for k in range(len(net.hash_values))])
                total = total + kept * (p @ _t([float(tensor_bytes(w, "fp32")) for w in net.emb_widths]))
        return total


def _t(value: Any) -> torch.Tensor:
    """float64: FLOP counts pass 2^24, where float32 stops being exact."""
    return torch.tensor(value, dtype=torch.float64)


def _out(config: BlockConfig, f_in: int, dim: int) -> int:
    from autorec.blocks import out_features

    return out_features(config, f_in, dim)
