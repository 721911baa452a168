"""Study reports: figure data, plotly figures and one self-contained HTML page.

Data for a figure is computed apart from its drawing (as in ``optuna.visualization``): each
``*_data`` function (:mod:`~autorec.report.data`, and :mod:`~autorec.report.graph` for an
architecture's data flow) reads a study and returns plain values that tests check; each
``*_figure`` function (:mod:`~autorec.report.figures`) only draws such data;
:mod:`~autorec.report.page` puts them on one HTML page. plotly and networkx are imported
lazily, so the core works without the ``search`` extra.

Example:
    >>> study = optuna.load_study(study_name="quickstart", storage=url)   # doctest: +SKIP
    >>> pareto_data(study).front                                           # doctest: +SKIP
    [3, 7]
    >>> write_report(study, "report.html", top_k=3)                        # doctest: +SKIP
"""

from autorec.report.data import (
    ARCH_PROBS_ATTR,
    QUALITY,
    ArchProbsData,
    HistoryData,
    ParetoData,
    arch_probs_data,
    default_cost,
    history_data,
    importance_data,
    non_dominated,
    pareto_data,
    scored_trials,
    study_objectives,
    top_trials,
)
from autorec.report.figures import (
    arch_figure,
    arch_probs_figure,
    empty_figure,
    graph_figure,
    history_figure,
    importance_figure,
    pareto_figure,
    study_figures,
)
from autorec.report.graph import arch_graph, layout
from autorec.report.page import report_html, write_report

__all__ = ["ARCH_PROBS_ATTR", "QUALITY", "ArchProbsData", "HistoryData", "ParetoData", "arch_figure",
           "arch_graph", "arch_probs_data", "arch_probs_figure", "default_cost", "empty_figure",
           "graph_figure", "history_data", "history_figure", "importance_data", "importance_figure",
           "layout", "non_dominated", "pareto_data", "pareto_figure", "report_html", "scored_trials",
           "study_figures", "study_objectives", "top_trials", "write_report"]
