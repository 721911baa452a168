"""Study reports: figure data, plotly figures and one self-contained HTML page.

Data for a figure is computed apart from its drawing (as in ``optuna.visualization``): each
``*_data`` function reads a study and returns plain values that tests check; each ``*_figure``
function only draws such data. plotly and networkx are imported lazily, so the core works
without the ``search`` extra.

Example:
    >>> study = optuna.load_study(study_name="quickstart", storage=url)   # doctest: +SKIP
    >>> pareto_data(study).front                                           # doctest: +SKIP
    [3, 7]
    >>> write_report(study, "report.html", top_k=3)                        # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import html
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from autorec.arch import ArchSpec
from autorec.study import OBJECTIVES, summarize, trial_arch

if TYPE_CHECKING:
    import networkx as nx
    import plotly.graph_objects as go

QUALITY = "val_auc"
ARCH_PROBS_ATTR = "arch_probs"
# Forbids every fetch: a page that tries one logs a console error instead of reaching out.
_CSP = ("default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; "
        "img-src data: blob:; font-src data:")


def _plotly() -> Any:
    try:
        import plotly.graph_objects as go
    except ImportError:
        raise ImportError("reports need plotly: pip install 'autorec-nas[search]'") from None
    return go


def _networkx() -> Any:
    try:
        import networkx
    except ImportError:
        raise ImportError("architecture graphs need networkx: pip install 'autorec-nas[search]'") from None
    return networkx


# ---- trial values ------------------------------------------------------------------------
def _val_auc(trial: FrozenTrial) -> float | None:
    auc = trial.user_attrs.get("metrics", {}).get("val", {}).get("auc")
    return float(auc) if auc is not None and math.isfinite(auc) else None


def _test_auc(trial: FrozenTrial) -> float | None:
    auc = trial.user_attrs.get("metrics", {}).get("test", {}).get("auc")
    return float(auc) if auc is not None and math.isfinite(auc) else None


def _cost(trial: FrozenTrial, name: str) -> float | None:
    value = trial.user_attrs.get("costs", {}).get(name)
    return float(value) if value is not None else None


def scored_trials(study: optuna.Study) -> list[FrozenTrial]:
    """Completed trials with a finite validation AUC, in trial order."""
    return [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
            if _val_auc(t) is not None]


def top_trials(study: optuna.Study, k: int) -> list[FrozenTrial]:
    """The ``k`` scored trials with the highest validation AUC, best first."""
    return sorted(scored_trials(study), key=lambda t: (-_val_auc(t), t.number))[:k]


def study_objectives(study: optuna.Study) -> list[str]:
    """The objective names the study optimises (``val_auc`` for a study autorec did not create)."""
    return list(study.user_attrs.get("objectives", [QUALITY]))


# ---- optimisation history ----------------------------------------------------------------
@dataclass(frozen=True)
class HistoryData:
    """Validation AUC per trial: the completed trials, the running best, the pruned ones.

    ``numbers``/``val_auc``/``best_so_far`` are aligned (completed trials in trial order);
    ``pruned`` maps a pruned trial's number to the last AUC it reported.
    """

    numbers: list[int]
    val_auc: list[float]
    best_so_far: list[float]
    pruned: dict[int, float] = field(default_factory=dict)
    failed: list[int] = field(default_factory=list)


def history_data(study: optuna.Study) -> HistoryData:
    """The data of :func:`history_figure`: validation AUC from each trial's ``metrics``."""
    numbers, values, best = [], [], []
    for t in scored_trials(study):
        numbers.append(t.number)
        values.append(_val_auc(t))
        best.append(max(values))
    pruned = {t.number: t.intermediate_values[max(t.intermediate_values)]
              for t in study.get_trials(deepcopy=False, states=(TrialState.PRUNED,))
              if t.intermediate_values}
    failed = [t.number for t in study.get_trials(deepcopy=False, states=(TrialState.FAIL,))]
    return HistoryData(numbers, values, best, pruned, failed)


# ---- quality against cost ----------------------------------------------------------------
def non_dominated(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the points (quality to maximise, cost to minimise) no other point dominates."""
    def dominates(a: tuple[float, float], b: tuple[float, float]) -> bool:
        return a[0] >= b[0] and a[1] <= b[1] and a != b

    return [i for i, p in enumerate(points) if not any(dominates(q, p) for q in points)]


@dataclass(frozen=True)
class ParetoData:
    """Validation AUC against a cost for every scored trial; ``front`` holds the numbers of the
    non-dominated ones (``study.best_trials`` in a multi-objective study), sorted by cost."""

    cost: str
    numbers: list[int]
    costs: list[float]
    val_auc: list[float]
    front: list[int]
    baselines: dict[str, tuple[float, float]] = field(default_factory=dict)

    @property
    def on_front(self) -> list[bool]:
        front = set(self.front)
        return [n in front for n in self.numbers]


def default_cost(study: optuna.Study) -> str:
    """The first cost among the study's objectives, else per-sample FLOPs."""
    costs = [o for o in study_objectives(study) if o in OBJECTIVES and OBJECTIVES[o] == "minimize"
             and o != "val_logloss"]
    return costs[0] if costs else "flops"


def pareto_data(study: optuna.Study, cost: str | None = None) -> ParetoData:
    """The data of :func:`pareto_figure` against ``cost`` (a ``costs`` key; by default
    :func:`default_cost`), with the baselines' points when the study trained any."""
    cost = cost or default_cost(study)
    trials = [t for t in scored_trials(study) if _cost(t, cost) is not None]
    numbers = [t.number for t in trials]
    costs = [_cost(t, cost) for t in trials]
    aucs = [_val_auc(t) for t in trials]
    if len(study.directions) > 1:
        best = {t.number for t in study.best_trials}
        front = [n for n in numbers if n in best]
    else:
        front = [numbers[i] for i in non_dominated(list(zip(aucs, costs, strict=True)))]
    by_number = dict(zip(numbers, costs, strict=True))
    front.sort(key=lambda n: (by_number[n], n))
    baselines = {name: (float(b["costs"][cost]), float(b["val"]["auc"]))
                 for name, b in study.user_attrs.get("baselines", {}).items()
                 if cost in b.get("costs", {}) and b.get("val", {}).get("auc") is not None}
    return ParetoData(cost, numbers, costs, aucs, front, baselines)


# ---- parameter importance ----------------------------------------------------------------
def importance_data(study: optuna.Study, seed: int = 0) -> dict[str, float]:
    """fANOVA importance of each searched parameter for validation AUC, most important first;
    empty below two completed trials (importance is undefined there)."""
    if len(scored_trials(study)) < 2:
        return {}
    target = None
    if len(study.directions) > 1:
        objectives = study_objectives(study)
        index = objectives.index(QUALITY) if QUALITY in objectives else 0
        target = lambda t: t.values[index]  # noqa: E731
    evaluator = optuna.importance.FanovaImportanceEvaluator(seed=seed)
    importances = optuna.importance.get_param_importances(study, evaluator=evaluator, target=target)
    return {name: float(value) for name, value in importances.items()}


# ---- architecture graph ------------------------------------------------------------------
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


# ---- DNAS architecture probabilities -----------------------------------------------------
@dataclass(frozen=True)
class ArchProbsData:
    """Per interaction layer, the probability of each block kind at each recorded step:
    ``probs[layer][kind_index][step]`` (0 where a layer does not offer that kind)."""

    trial: int
    kinds: list[str]
    steps: list[int]
    probs: list[list[list[float]]]


def arch_probs_data(trial: FrozenTrial) -> ArchProbsData | None:
    """The trial's ``arch_probs`` user attribute (``[layer][step] -> {kind: probability}``; a
    layer given as one mapping is one step), or None when the trial has none."""
    raw = trial.user_attrs.get(ARCH_PROBS_ATTR)
    if not raw:
        return None
    layers = [[entry] if isinstance(entry, Mapping) else list(entry) for entry in raw]
    kinds = sorted({kind for layer in layers for step in layer for kind in step})
    n_steps = max(len(layer) for layer in layers)
    probs = [[[float(layer[s].get(kind, 0.0)) if s < len(layer) else math.nan for s in range(n_steps)]
              for kind in kinds] for layer in layers]
    return ArchProbsData(trial.number, kinds, list(range(n_steps)), probs)


# ---- drawing -----------------------------------------------------------------------------
def empty_figure(title: str, message: str) -> go.Figure:
    go = _plotly()
    figure = go.Figure()
    figure.add_annotation(text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    figure.update_layout(title=title, xaxis={"visible": False}, yaxis={"visible": False})
    return figure


def history_figure(data: HistoryData) -> go.Figure:
    """Validation AUC per trial, the running best as a step line, pruned trials apart."""
    go = _plotly()
    title = "Optimisation history"
    if not data.numbers and not data.pruned:
        return empty_figure(title, "no trial completed")
    figure = go.Figure()
    figure.add_trace(go.Scatter(x=data.numbers, y=data.val_auc, mode="markers", name="trial",
                                hovertemplate="trial %{x}<br>val AUC %{y:.4f}<extra></extra>"))
    figure.add_trace(go.Scatter(x=data.numbers, y=data.best_so_far, mode="lines", name="best so far",
                                line={"shape": "hv"}))
    if data.pruned:
        figure.add_trace(go.Scatter(x=list(data.pruned), y=list(data.pruned.values()), mode="markers",
                                    name="pruned (last reported)", marker={"symbol": "x", "color": "grey"}))
    figure.update_layout(title=title, xaxis_title="trial", yaxis_title="validation AUC")
    return figure


_COST_TITLES = {"flops": "FLOPs per sample", "params_bytes": "dense parameter bytes",
                "embedding_bytes": "embedding bytes", "latency_ms": "latency (ms per batch)"}


def pareto_figure(data: ParetoData) -> go.Figure:
    """Validation AUC against cost (log scale); the front as a line, baselines as diamonds."""
    go = _plotly()
    title = f"Quality against cost: validation AUC vs {_COST_TITLES.get(data.cost, data.cost)}"
    if not data.numbers:
        return empty_figure(title, "no trial completed")
    figure = go.Figure()
    figure.add_trace(go.Scatter(
        x=data.costs, y=data.val_auc, mode="markers", name="trial", text=[f"trial {n}" for n in data.numbers],
        marker={"color": ["crimson" if f else "steelblue" for f in data.on_front], "size": 9},
        hovertemplate="%{text}<br>val AUC %{y:.4f}<br>cost %{x:.3s}<extra></extra>"))
    index = {n: i for i, n in enumerate(data.numbers)}
    figure.add_trace(go.Scatter(
        x=[data.costs[index[n]] for n in data.front], y=[data.val_auc[index[n]] for n in data.front],
        mode="lines", name="Pareto front", line={"color": "crimson", "shape": "hv"}))
    if data.baselines:
        names = list(data.baselines)
        figure.add_trace(go.Scatter(
            x=[data.baselines[n][0] for n in names], y=[data.baselines[n][1] for n in names],
            mode="markers+text", text=names, textposition="top center", name="preset (same budget)",
            marker={"symbol": "diamond", "size": 11, "color": "darkorange"}))
    figure.update_layout(title=title, xaxis_title=_COST_TITLES.get(data.cost, data.cost),
                         yaxis_title="validation AUC", xaxis_type="log")
    return figure


def importance_figure(data: Mapping[str, float], top: int = 20) -> go.Figure:
    """Horizontal bars of the ``top`` most important parameters."""
    go = _plotly()
    title = "Parameter importance for validation AUC (fANOVA)"
    if not data:
        return empty_figure(title, "needs at least two completed trials")
    items = sorted(data.items(), key=lambda kv: kv[1], reverse=True)[:top][::-1]
    figure = go.Figure(go.Bar(x=[v for _, v in items], y=[k for k, _ in items], orientation="h"))
    figure.update_layout(title=title, xaxis_title="importance", height=max(300, 28 * len(items) + 120))
    return figure


_ROLE_COLOURS = {"table": "#4c78a8", "dense": "#72b7b2", "interaction": "#e45756", "over": "#f58518",
                 "output": "#54a24b"}


def graph_figure(graph: nx.DiGraph, positions: Mapping[str, tuple[float, float]],
                 title: str | None = None) -> go.Figure:
    """Nodes as labelled markers, edges as arrows."""
    go = _plotly()
    nodes = list(graph.nodes)
    figure = go.Figure(go.Scatter(
        x=[positions[n][0] for n in nodes], y=[positions[n][1] for n in nodes], mode="markers+text",
        text=[graph.nodes[n]["label"].replace("\n", "<br>") for n in nodes],
        hovertext=[graph.nodes[n]["hover"] for n in nodes], hoverinfo="text",
        textposition=["middle left" if graph.nodes[n]["layer"] == 0 else "top center" for n in nodes],
        marker={"size": 16, "color": [_ROLE_COLOURS.get(graph.nodes[n]["role"], "grey") for n in nodes]},
        showlegend=False))
    for source, target in graph.edges:
        (x0, y0), (x1, y1) = positions[source], positions[target]
        figure.add_annotation(x=x1, y=y1, ax=x0, ay=y0, xref="x", yref="y", axref="x", ayref="y",
                              showarrow=True, arrowhead=2, arrowsize=1, arrowwidth=1.2,
                              arrowcolor="#888", standoff=9, startstandoff=9, text="")
    xs = [x for x, _ in positions.values()]
    ys = [y for _, y in positions.values()]
    figure.update_layout(title=title or graph.name, height=max(320, 70 * (max(ys) - min(ys)) + 200),
                         xaxis={"visible": False, "range": [min(xs) - 1.3, max(xs) + 0.5]},
                         yaxis={"visible": False, "range": [min(ys) - 0.8, max(ys) + 0.8]},
                         plot_bgcolor="white", margin={"l": 20, "r": 20})
    return figure


def arch_figure(spec: ArchSpec, title: str | None = None) -> go.Figure:
    """A drawing of ``spec``'s data flow (see :func:`arch_graph`)."""
    graph = arch_graph(spec)
    return graph_figure(graph, layout(graph), title or spec.name)


def arch_probs_figure(data: ArchProbsData) -> go.Figure:
    """One heat map per interaction layer: block kind against step, coloured by probability."""
    go = _plotly()
    from plotly.subplots import make_subplots

    rows = len(data.probs)
    figure = make_subplots(rows=rows, cols=1, shared_xaxes=True, vertical_spacing=0.04,
                           subplot_titles=[f"layer {i}" for i in range(rows)])
    for i, z in enumerate(data.probs):
        figure.add_trace(go.Heatmap(z=z, x=data.steps, y=data.kinds, coloraxis="coloraxis",
                                    hovertemplate="step %{x}<br>%{y}: %{z:.3f}<extra></extra>"),
                         row=i + 1, col=1)
    figure.update_layout(title=f"Trial {data.trial}: architecture probabilities per layer",
                         coloraxis={"cmin": 0, "cmax": 1, "colorscale": "Viridis"},
                         height=max(300, 40 * len(data.kinds) * rows + 120))
    figure.update_xaxes(title_text="step", row=rows, col=1)
    return figure


def study_figures(study: optuna.Study) -> dict[str, go.Figure]:
    """Every figure of the study by a stable key: ``history``, ``pareto``, ``importance``,
    ``best_arch`` (when a trial completed), ``arch_probs_trial<N>`` per trial that has
    architecture probabilities and ``schedule_trial<N>`` per completed trial that searched a
    growth schedule."""
    figures = {"history": history_figure(history_data(study)),
               "pareto": pareto_figure(pareto_data(study)),
               "importance": importance_figure(importance_data(study))}
    best = top_trials(study, 1)
    if best:
        figures["best_arch"] = arch_figure(trial_arch(best[0]), f"Best architecture: trial {best[0].number}")
    for trial in study.get_trials(deepcopy=False):
        probs = arch_probs_data(trial)
        if probs is not None:
            figures[f"arch_probs_trial{trial.number}"] = arch_probs_figure(probs)
        if trial.state == TrialState.COMPLETE:  # growth schedules (autorec.growth.figures)
            from autorec.growth.figures import trial_schedule_figure

            schedule = trial_schedule_figure(trial.user_attrs, trial.number)
            if schedule is not None:
                figures[f"schedule_trial{trial.number}"] = schedule
    return figures


# ---- HTML report -------------------------------------------------------------------------
def _number(value: float | None, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    return f"{value:.{digits}f}"


def _count(value: float | None) -> str:
    if value is None:
        return "–"
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{unit}"
    return f"{value:.3g}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], css: str = "") -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{css}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _best_rows(trials: Sequence[FrozenTrial], front: set[int]) -> list[list[str]]:
    return [[f"trial {t.number}", _number(_val_auc(t)), _number(_test_auc(t)), _count(_cost(t, "flops")),
             _count(_cost(t, "params_bytes")), _count(_cost(t, "embedding_bytes")),
             "yes" if t.number in front else ""] for t in trials]


def _figure_div(figure: go.Figure, div_id: str) -> str:
    # plotly.js is inlined once in <head>; the figures only call it.
    return figure.to_html(full_html=False, include_plotlyjs=False, div_id=div_id,
                          config={"displaylogo": False, "responsive": True})


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.7em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
.verdict { font-weight: 600; padding: 0.6em; background: #f4f6fa; border-left: 4px solid #4c78a8; }
pre { background: #f7f7f7; padding: 0.6em; overflow-x: auto; font-size: 0.85em; }
"""


def report_html(study: optuna.Study, top_k: int = 3) -> str:
    """The report page as one HTML string (see :func:`write_report`)."""
    from plotly.offline import get_plotlyjs

    summary = summarize(study)
    front = set(pareto_data(study).front)
    best = top_trials(study, max(top_k, 10))
    states = {s.name: 0 for s in TrialState}
    for row in summary.trials:
        states[row["state"]] += 1
    counts = ", ".join(f"{n} {s.lower()}" for s, n in states.items() if n)
    parts = [
        f"<h1>autorec study {html.escape(study.study_name)}</h1>",
        f"<p>Objectives: {html.escape(', '.join(summary.objectives))}. "
        f"Trials: {html.escape(counts or 'none')}.</p>",
        f'<p class="verdict">{html.escape(summary.verdict())}</p>',
        "<h2>Best trials by validation AUC</h2>",
        _table(["trial", "val AUC", "test AUC", "FLOPs/sample", "dense bytes", "embedding bytes", "Pareto"],
               _best_rows(best, front)) if best else "<p>No trial completed.</p>",
    ]
    if summary.baselines:
        rows = [[name, _number(b["val"]["auc"]), _number(b["test"]["auc"]),
                 _count(b.get("costs", {}).get("flops")), _count(b.get("costs", {}).get("params_bytes")),
                 _count(b.get("costs", {}).get("embedding_bytes"))]
                for name, b in sorted(summary.baselines.items())]
        parts += ["<h2>Presets trained with the same budget</h2>",
                  _table(["preset", "val AUC", "test AUC", "FLOPs/sample", "dense bytes", "embedding bytes"],
                         rows)]
    figures = study_figures(study)
    figures.pop("best_arch", None)  # drawn below with the other top architectures
    parts.append("<h2>Figures</h2>")
    parts += [_figure_div(figure, f"figure-{key}") for key, figure in figures.items()]
    if best and top_k > 0:
        parts.append(f"<h2>Top {min(top_k, len(best))} architectures</h2>")
        for t in best[:top_k]:
            spec = trial_arch(t)
            parts.append(f"<h3>Trial {t.number}: validation AUC {_number(_val_auc(t))}</h3>")
            parts.append(_figure_div(arch_figure(spec, f"Trial {t.number}: {spec.name}"), f"arch-{t.number}"))
            parts.append(f"<details><summary>arch.json</summary><pre>{html.escape(spec.to_json())}</pre>"
                         "</details>")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        f"<title>autorec study {html.escape(study.study_name)}</title><style>{_STYLE}</style>"
        f'<script type="text/javascript">{get_plotlyjs()}</script></head>\n<body>\n'
        + "\n".join(parts) + "\n</body></html>\n")


def write_report(study: optuna.Study, out_path: str | Path, top_k: int = 3) -> Path:
    """Write one self-contained HTML report (plotly.js inlined, no network fetches): title,
    best trials with test AUC and FLOPs, baselines, the verdict, the figures and a drawing of
    the ``top_k`` architectures. Returns the path written."""
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(report_html(study, top_k), encoding="utf-8")
    return out
