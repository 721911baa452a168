"""Plotly figures of the report: each draws data computed in :mod:`autorec.report.data`.

plotly is imported when a figure is drawn, and a missing plotly says which extra to install.

Example:
    >>> importance_figure({}).layout.annotations[0].text     # fANOVA needs two trials
    'needs at least two completed trials'
    >>> [bar.y for bar in importance_figure({"lr": 0.7, "dim": 0.3}).data]
    [('dim', 'lr')]
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import optuna
from optuna.trial import TrialState

from autorec.arch import ArchSpec
from autorec.report.data import (
    ArchProbsData,
    HistoryData,
    ParetoData,
    ProxyData,
    arch_probs_data,
    history_data,
    importance_data,
    pareto_data,
    proxy_data,
    top_trials,
)
from autorec.report.graph import arch_graph, layout
from autorec.study import trial_arch

if TYPE_CHECKING:
    import networkx as nx
    import plotly.graph_objects as go


def _plotly() -> Any:
    try:
        import plotly.graph_objects as go
    except ImportError:
        raise ImportError("reports need plotly: pip install 'autorec-nas[search]'") from None
    return go



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


def proxy_figure(data: ProxyData) -> go.Figure:
    """Proxy (inherited weights) against trained validation AUC, Kendall's tau in the title (and
    its split into the layers and embeddings parts, where the study recorded it, with the tau of
    the predictor over them learned from another study's trials, where it learned one)."""
    go = _plotly()
    tau = "n/a" if data.tau is None else f"{data.tau:.2f}"
    figure = go.Figure(go.Scatter(x=data.proxy, y=data.trained, mode="markers+text",
                                  text=[str(n) for n in data.trials], textposition="top center",
                                  hovertemplate="trial %{text}<br>proxy %{x:.4f}<br>trained %{y:.4f}"
                                                "<extra></extra>"))
    split = ""
    if data.parts:  # which part of the proxy ranks them: its layers, or its per-feature embeddings
        layers, features = ("n/a" if data.parts.get(k) is None else f"{data.parts[k]:.2f}"
                            for k in ("tau_layers", "tau_features"))
        split = f"<br>tau of its layers part {layers}, of its embeddings part {features}"
        if data.parts.get("tau_predicted") is not None:  # a predictor learned from another study's trials
            split += (f"; a predictor over the parts, fitted on {data.parts.get('predictor_pairs')} "
                      f"other trainings: tau {data.parts['tau_predicted']:.2f}")
            if data.parts.get("tau_predicted_nonnegative") is not None:  # its weights bounded at 0
                split += f" ({data.parts['tau_predicted_nonnegative']:.2f} with weights >= 0)"
    figure.update_layout(title=f"One-shot proxy against trained val AUC (Kendall's tau {tau}, "
                               f"{len(data.trials)} trainings){split}",
                         xaxis_title="val AUC with inherited weights", yaxis_title="val AUC trained")
    return figure


def study_figures(study: optuna.Study) -> dict[str, go.Figure]:
    """Every figure of the study by a stable key: ``history``, ``pareto``, ``importance``,
    ``best_arch`` (when a trial completed), ``scaling`` (a ladder study's laws), ``proxy`` (a
    one-shot study's proxy against its trainings), ``arch_probs_trial<N>`` per trial that has
    architecture probabilities and ``schedule_trial<N>`` per completed trial that searched a
    growth schedule."""
    figures = {"history": history_figure(history_data(study)),
               "pareto": pareto_figure(pareto_data(study)),
               "importance": importance_figure(importance_data(study))}
    from autorec.scaling.results import is_ladder

    if is_ladder(study):  # a scaling study: its laws, family by family
        from autorec.scaling.figure import scaling_figure
        from autorec.scaling.results import study_ladder

        figures["scaling"] = scaling_figure(study_ladder(study))
    proxy = proxy_data(study)
    if proxy is not None:  # a one-shot study: how far its proxy can be trusted
        figures["proxy"] = proxy_figure(proxy)
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
