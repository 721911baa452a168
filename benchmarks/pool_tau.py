"""Tau over the pool of trained architectures, read from a ``benchmarks/oneshot_tau_parts.py`` file.

A one-shot run with ``calibrate: 0`` trains no architectures for its own Kendall's tau; the
benchmark takes it over a pool that earlier runs trained on the trial budget (72 architectures
drawn from the whole space, ``--tau-from _k16,_k18``), each scored on the run's own supernet by
``oneshot_tau_parts``. This module gives the report (``oneshot_vs_tpe --stage report --tau-parts
FILE``) each seed's figures from that file: the proxy as drawn (``tau_joint``), and, where the
file has a predictor fitted on other studies' trials (``--fit-on``), its tau with the weights
bounded at 0 (``tau_predicted_nonnegative``; :func:`autorec.oneshot.predictor.fit_predictor`).

Example:
    >>> figures = {"k57_seed0_tau_joint_shared": 0.5, "k57_seed0_pairs": 72,
    ...            "k57_seed0_tau_predicted_nonnegative_shared": 0.7}
    >>> keys = pool_taus(figures, "_k57", [0], "where")
    >>> keys["kendall_tau_pool_min"], keys["kendall_tau_predicted_min"], keys["oneshot_seed0_tau_pool_pairs"]
    (0.5, 0.7, 72)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.results_file import read_json


def read_tau_parts(path: Path) -> dict[str, Any]:
    """The figures of a tau-parts results file; a SystemExit naming the file if it is missing or
    not a JSON object."""
    figures: dict[str, Any] = read_json(path, dict, "a JSON object", "--tau-parts",
                                        " (write it with benchmarks.oneshot_tau_parts)")
    return figures


def pool_taus(figures: Mapping[str, Any], tag: str, seeds: Sequence[int], where: str,
              own_min: float | None = None) -> dict[str, Any]:
    """Flat report keys for ``seeds`` of run ``tag`` (as ``_k57``) from ``figures`` (a tau-parts
    file's; ``where`` names it in errors): per seed ``oneshot_seed<i>_kendall_tau_pool`` (the
    proxy over the pool), ``..._tau_pool_pairs`` and, where the file has one,
    ``..._kendall_tau_predicted`` (the bounded predictor's); then the worst of the seeds,
    ``kendall_tau_pool_min`` and ``kendall_tau_predicted_min``. Scores through the supernet's one
    over-arch (keys ending in ``_shared``) are read where both are in the file, as the searches
    that read the fine weights score. Where the seeds trained no draws of their own (``own_min``,
    the report's ``kendall_tau_min`` from their studies, is None), ``kendall_tau_min`` is the
    pool's, and ``kendall_tau_source`` names the file. A seed not in the file is a SystemExit
    naming the key."""
    name, out = tag.lstrip("_"), {}
    pool, predicted = [], []
    for seed in seeds:
        prefix = f"{name}_seed{seed}"
        end = "_shared" if f"{prefix}_tau_joint_shared" in figures else ""
        joint = f"{prefix}_tau_joint{end}"
        if joint not in figures:
            raise SystemExit(f"--tau-parts: {where} has no {joint} (nor {prefix}_tau_joint); "
                             f"score seed {seed}'s supernet with benchmarks.oneshot_tau_parts --tag {tag}")
        out[f"oneshot_seed{seed}_kendall_tau_pool"] = figures[joint]
        out[f"oneshot_seed{seed}_tau_pool_pairs"] = figures.get(f"{prefix}_pairs")
        pool.append(figures[joint])
        bounded = figures.get(f"{prefix}_tau_predicted_nonnegative{end}")
        if bounded is not None:
            out[f"oneshot_seed{seed}_kendall_tau_predicted"] = bounded
            predicted.append(bounded)
    out["kendall_tau_pool_min"] = min(pool) if pool else None
    out["kendall_tau_predicted_min"] = min(predicted) if len(predicted) == len(pool) and pool else None
    if own_min is None:
        out["kendall_tau_min"] = out["kendall_tau_pool_min"]
        out["kendall_tau_source"] = f"pool ({where})"
    return out
