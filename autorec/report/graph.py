"""An architecture's data flow as a graph (networkx), and where to draw its nodes.

This is the data of :func:`autorec.report.figures.arch_figure`; it reads only the ArchSpec and
block configs' fields, so a new block kind needs no code here. networkx is imported lazily.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from autorec.arch import ArchSpec

if TYPE_CHECKING:
    import networkx as nx


def _networkx() -> Any:
    try:
        import networkx
    except ImportError:
        raise ImportError("architecture graphs need networkx: pip install 'autorec-nas[search]'") from None
    return networkx



def _sizes(values: Sequence[int]) -> str:
    return "-".join(str(v) for v in values)


def _fields(config: Any) -> str:
    """``name=value`` for a block's fields (so a new block kind needs no code here)."""
    parts = []
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if f.name == "precision" and value == "fp32":
            continue
        if isinstance(value, tuple):
            value = _sizes(value) if all(isinstance(v, int) for v in value) else "+".join(map(str, value))
        parts.append(f"{f.name}={value}")
    return " ".join(parts)


def arch_graph(spec: ArchSpec) -> nx.DiGraph:
    """The data flow of ``spec`` as a graph, one node per part, edges in data-flow order.

    Nodes: ``table:<name>`` (one per embedding table), ``dense`` (when the model has dense
    features), ``layer:<i>`` (one per interaction layer), ``over`` and ``output``. Every node
    carries ``label`` (short, lines split by ``\\n``), ``hover`` (details), ``role`` and
    ``layer`` (its column: inputs 0, interaction layer i at i + 1, then over-arch, output);
    interaction layers also carry ``kind``, ``f_in`` and ``f_out`` from ``spec.layer_widths()``.

    Example:
        >>> from autorec.arch import ArchSpec, TableSpec, DotConfig
        >>> spec = ArchSpec(dim=4, n_dense=2, dense_arch=(8,), layers=(DotConfig(),),
        ...     tables=(TableSpec(name="t", features=("f",), num_embeddings=10, dim=4),))
        >>> list(arch_graph(spec).edges)
        [('table:t', 'layer:0'), ('dense', 'layer:0'), ('layer:0', 'over'), ('over', 'output')]
    """
    graph = _networkx().DiGraph(name=spec.name)
    widths = spec.layer_widths()
    inputs = []
    for t in spec.tables:
        node = f"table:{t.name}"
        graph.add_node(node, role="table", layer=0, label=f"{t.name}\n{t.num_embeddings}×{t.dim}",
                       hover=(f"table {t.name}: features {', '.join(t.features)}; "
                              f"{t.num_embeddings} rows × dim {t.dim} {t.precision}"))
        inputs.append(node)
    if spec.n_dense:
        sizes = _sizes((spec.n_dense, *spec.dense_arch, spec.dim))
        graph.add_node("dense", role="dense", layer=0, label=f"dense MLP\n{sizes}",
                       hover=f"dense arch: MLP {sizes} on {spec.n_dense} dense features")
        inputs.append("dense")
    previous = inputs
    for i, config in enumerate(spec.layers):
        node = f"layer:{i}"
        f_in, f_out = widths[i], widths[i + 1]
        graph.add_node(node, role="interaction", layer=i + 1, kind=config.kind, f_in=f_in, f_out=f_out,
                       label=f"{config.kind}\nF {f_in}→{f_out}",
                       hover=f"layer {i}: {config.kind} {_fields(config)}; [B, {f_in}, {spec.dim}] → "
                             f"[B, {f_out}, {spec.dim}]")
        graph.add_edges_from((p, node) for p in previous)
        previous = [node]
    over = len(spec.layers) + 1
    flat = widths[-1] * spec.dim
    graph.add_node("over", role="over", layer=over, label=f"over-arch\n{_sizes((flat, *spec.over_arch))}",
                   hover=f"over-arch: flatten [B, {widths[-1]}×{spec.dim}] → MLP "
                         f"{_sizes((flat, *spec.over_arch))}")
    graph.add_edges_from((p, "over") for p in previous)
    graph.add_node("output", role="output", layer=over + 1, label="logit",
                   hover=f"Linear({spec.over_arch[-1]}, 1) → logit [B]")
    graph.add_edge("over", "output")
    return graph


def layout(graph: nx.DiGraph) -> dict[str, tuple[float, float]]:
    """Node positions: x is the node's ``layer`` (data flows left to right); the nodes of one
    layer are stacked top-down in insertion order, centred on y = 0, one unit apart."""
    columns: dict[int, list[str]] = {}
    for node, layer in graph.nodes(data="layer"):
        columns.setdefault(layer, []).append(node)
    return {node: (float(layer), (len(nodes) - 1) / 2 - i)
            for layer, nodes in columns.items() for i, node in enumerate(nodes)}
