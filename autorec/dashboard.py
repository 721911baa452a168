"""The real optuna-dashboard over a study storage, with autorec's figures saved into the study.

optuna-dashboard draws its own history, importance and Pareto plots from the storage; autorec
adds its figures (quality against cost, architecture drawings, DNAS probabilities) as plotly
graph objects saved in the study's system attributes, which the dashboard shows beside its own.

Example:
    >>> prepare_dashboard(study)                                      # doctest: +SKIP
    >>> serve_dashboard(config.storage_url, port=8080,                # doctest: +SKIP
    ...                 artifact_dir=config.directory / "artifacts")
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna

FIGURE_PREFIX = "autorec-"
SAVED_FIGURES_ATTR = "autorec:dashboard_figures"  # study user attr: the figure ids saved so far


def _optuna_dashboard() -> Any:
    try:
        import optuna_dashboard
    except ImportError:
        raise ImportError("the dashboard needs optuna-dashboard: pip install 'autorec-nas[search]'") from None
    return optuna_dashboard


def saved_figure_ids(study: optuna.Study) -> set[str]:
    """The ids of the autorec figures saved in the study (whether current or blanked).

    :func:`prepare_dashboard` lists them in a study user attribute (public Optuna API), since
    optuna-dashboard's own record of them sits in system attributes, which only the storage reads.
    """
    return set(study.user_attrs.get(SAVED_FIGURES_ATTR, ()))


def prepare_dashboard(study: optuna.Study) -> list[str]:
    """Save the study's figures (see :func:`autorec.report.study_figures`) into the study for
    optuna-dashboard, one graph object per figure with the stable id ``autorec-<key>``: calling
    again overwrites them instead of adding copies. A figure saved before that the study no longer
    has is replaced by an empty one (storages cannot delete a study attribute).

    Returns the ids saved, in figure order.
    """
    from autorec.report import empty_figure, study_figures

    save = _optuna_dashboard().save_plotly_graph_object
    figures = {f"{FIGURE_PREFIX}{key.replace('_', '-')}": figure
               for key, figure in study_figures(study).items()}
    for graph_id in sorted(saved_figure_ids(study) - set(figures)):
        save(study, empty_figure(graph_id, "no longer produced by this study"), graph_object_id=graph_id)
    for graph_id, figure in figures.items():
        save(study, figure, graph_object_id=graph_id)
    study.set_user_attr(SAVED_FIGURES_ATTR, sorted(saved_figure_ids(study) | set(figures)))
    return list(figures)


def serve_dashboard(storage_url: str, host: str = "127.0.0.1", port: int = 8080,
                    artifact_dir: str | Path | None = None) -> None:
    """Run optuna-dashboard on ``storage_url`` (any URL :func:`autorec.study.open_storage` takes)
    at ``http://host:port/dashboard`` until interrupted. With ``artifact_dir`` (a study's
    ``directory / "artifacts"``) the dashboard also serves the trials' arch.json artifacts."""
    from autorec.study import open_storage

    dashboard = _optuna_dashboard()
    store = None
    if artifact_dir is not None:
        store = optuna.artifacts.FileSystemArtifactStore(str(artifact_dir))
    dashboard.run_server(open_storage(storage_url), host=host, port=port, artifact_store=store)
