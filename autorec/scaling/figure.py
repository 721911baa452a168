"""The scaling page's figure: excess test logloss against training compute, log-log, one colour
per family, its fitted law as a line and its held-out (largest) rung marked.

On log-log axes a law ``L - E = A * C**(-alpha)`` is a straight line of slope ``-alpha``, so
the families' exponents are their slopes side by side. The title names the family that gains
most per tenfold compute at the top of its measured range.

Example:
    >>> from autorec.scaling.results import Rung, summarize_ladder
    >>> rungs = [Rung(i, i, 10.0 ** (9 + i), 1e3, 0.45 + 0.3 * 10.0 ** (-0.1 * i), 0.7) for i in range(5)]
    >>> figure = scaling_figure(summarize_ladder({"dlrm": rungs}, floor=0.45, bootstrap_samples=20))
    >>> figure.layout.xaxis.type, figure.layout.yaxis.type
    ('log', 'log')
"""

from __future__ import annotations

from typing import Any

import numpy as np

from autorec.scaling.results import LadderSummary

COLOURS = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#eeca3b")


def scaling_figure(summary: LadderSummary) -> Any:
    """The plotly figure of ``summary`` (see the module docstring)."""
    import plotly.graph_objects as go

    figure = go.Figure()
    for i, (name, rungs) in enumerate(summary.rungs.items()):
        fit, colour = summary.families.get(name, {}), COLOURS[i % len(COLOURS)]
        floor = fit.get("floor", summary.floor or 0.0)
        points = [r for r in rungs if r.compute > 0]
        held = fit.get("holdout_compute")
        shown = [r for r in points if r.compute != held]
        text = [f"rung {r.rung} (trial {r.trial}): test logloss {r.logloss:.4f}, AUC {r.auc:.4f}"
                for r in shown]
        figure.add_trace(go.Scatter(x=[r.compute for r in shown],
                                    y=[max(r.logloss - floor, 1e-6) for r in shown],
                                    mode="markers", name=name, marker={"color": colour, "size": 9},
                                    text=text, hovertemplate="%{text}<extra></extra>"))
        if held is not None:
            top = next(r for r in points if r.compute == held)
            figure.add_trace(go.Scatter(
                x=[top.compute, top.compute],
                y=[max(top.logloss - floor, 1e-6), fit["holdout_predicted_excess"]],
                mode="markers", name=f"{name}: held out, measured and predicted", legendgroup=name,
                marker={"color": colour, "size": [12, 9], "symbol": ["star", "x"]},
                hovertemplate=f"{name} largest rung: %{{y:.4g}} excess (held out, rel. error "
                              f"{fit['holdout_rel_err']:.1%})<extra></extra>"))
        if "alpha" in fit and points:
            low, high = min(r.compute for r in points), max(r.compute for r in points)
            grid = np.logspace(np.log10(low), np.log10(high), 50)
            figure.add_trace(go.Scatter(
                x=grid, y=fit["scale"] * grid ** -fit["alpha"], mode="lines", legendgroup=name,
                name=f"{name}: alpha {fit['alpha']:.3f} [{fit['alpha_lo']:.3f}, {fit['alpha_hi']:.3f}]",
                line={"color": colour}))
    steepest = summary.steepest()
    verdict = ("" if steepest is None else
               f": {steepest} gains most per tenfold compute at the top of its range "
               f"({summary.families[steepest]['gain_per_decade_at_top']:.4f} logloss)")
    floor_text = "Bayes logloss" if summary.floor is not None else "fitted floor E"
    figure.update_layout(title=f"Scaling: excess test logloss against training compute{verdict}",
                         xaxis={"type": "log", "title": "training compute (FLOPs)"},
                         yaxis={"type": "log", "title": f"test logloss - {floor_text}"})
    return figure
