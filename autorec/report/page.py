"""The report page: one self-contained HTML file (plotly.js inlined, no network fetches).

The page holds the study's title and verdict, its best trials and baselines as tables, every
figure of :func:`autorec.report.figures.study_figures` and a drawing of the top architectures.
A Content-Security-Policy forbids every fetch, so the page works offline and leaks nothing.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import optuna
from optuna.trial import FrozenTrial, TrialState

from autorec.report.data import data_text, pareto_data, test_auc, test_metric, top_trials, trial_cost, val_auc
from autorec.report.figures import arch_figure, study_figures
from autorec.study import summarize, trial_arch
from autorec.textfiles import write_atomic

if TYPE_CHECKING:
    import plotly.graph_objects as go

# Forbids every fetch: a page that tries one logs a console error instead of reaching out.
_CSP = ("default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; "
        "img-src data: blob:; font-src data:")


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


TEST_METRICS = ("logloss", "ne", "calibration")  # beside AUC in every quality table
QUALITY_HEADER = ["val AUC", "test AUC", "test logloss", "test NE", "calibration"]


def _best_rows(trials: Sequence[FrozenTrial], front: set[int]) -> list[list[str]]:
    return [[f"trial {t.number}", _number(val_auc(t)), _number(test_auc(t)),
             *(_number(test_metric(t, m)) for m in TEST_METRICS),
             _count(trial_cost(t, "flops")), _count(trial_cost(t, "params_bytes")),
             _count(trial_cost(t, "embedding_bytes")), "yes" if t.number in front else ""] for t in trials]


def _node_rows(study: optuna.Study) -> list[list[str]]:
    """Per Ray node that ran trials (the trial's ``node``): its trials by state."""
    counts: dict[str, dict[str, int]] = {}
    for t in study.get_trials(deepcopy=False):
        if "node" in t.user_attrs:
            row = counts.setdefault(t.user_attrs["node"], {"COMPLETE": 0, "FAIL": 0, "PRUNED": 0})
            row[t.state.name] = row.get(t.state.name, 0) + 1
    return [[node[:12], str(c["COMPLETE"]), str(c["PRUNED"]), str(c["FAIL"])]
            for node, c in sorted(counts.items())]


SELECTION = {"val_logloss": "the epoch of lowest validation logloss", "val_auc": "the epoch of highest "
             "validation AUC"}


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
    data = data_text(study)
    monitor = study.user_attrs.get("monitor")
    setting = (f"Data: {data}. " if data else "") + (
        f"Each training keeps {SELECTION[monitor]}. " if monitor in SELECTION else "")
    parts = [
        f"<h1>autorec study {html.escape(study.study_name)}</h1>",
        f"<p>Objectives: {html.escape(', '.join(summary.objectives))}. "
        f"Trials: {html.escape(counts or 'none')}.</p>",
        *([f"<p>{html.escape(setting.strip())}</p>"] if setting else []),
        f'<p class="verdict">{html.escape(summary.verdict())}</p>',
        "<h2>Best trials by validation AUC</h2>",
        _table(["trial", *QUALITY_HEADER, "FLOPs/sample", "dense bytes", "embedding bytes", "Pareto"],
               _best_rows(best, front)) if best else "<p>No trial completed.</p>",
    ]
    nodes = _node_rows(study)
    if nodes:
        parts += ["<h2>Where the trials ran</h2>",
                  _table(["Ray node", "complete", "pruned", "failed"], nodes)]
    if summary.baselines:
        rows = [[name, _number(b["val"]["auc"]), _number(b["test"]["auc"]),
                 *(_number(b["test"].get(m)) for m in TEST_METRICS),
                 _count(b.get("costs", {}).get("flops")), _count(b.get("costs", {}).get("params_bytes")),
                 _count(b.get("costs", {}).get("embedding_bytes"))]
                for name, b in sorted(summary.baselines.items())]
        parts += ["<h2>Presets trained with the same budget</h2>",
                  _table(["preset", *QUALITY_HEADER, "FLOPs/sample", "dense bytes", "embedding bytes"],
                         rows)]
    if summary.final:
        rows = [[f"trial {n}", _number(f["val"]["auc"]), _number(f["test"]["auc"]),
                 *(_number(f["test"].get(m)) for m in TEST_METRICS),
                 str(f.get("epochs", ""))]
                for n, f in summary.final.items()]
        parts += ["<h2>The best trials retrained in full</h2>",
                  _table(["trial", *QUALITY_HEADER, "epochs"], rows)]
    figures = study_figures(study)
    figures.pop("best_arch", None)  # drawn below with the other top architectures
    parts.append("<h2>Figures</h2>")
    parts += [_figure_div(figure, f"figure-{key}") for key, figure in figures.items()]
    if best and top_k > 0:
        parts.append(f"<h2>Top {min(top_k, len(best))} architectures</h2>")
        for t in best[:top_k]:
            spec = trial_arch(t)
            parts.append(f"<h3>Trial {t.number}: validation AUC {_number(val_auc(t))}</h3>")
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
    the ``top_k`` architectures. Returns the path written. The page is written whole or not at
    all (:func:`~autorec.textfiles.write_atomic`): a failed write leaves an earlier report as it was."""
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    return write_atomic(out, report_html(study, top_k))
