"""Architectures another study trained, as paths of a one-shot supernet, with their trained AUC.

A multi-trial study of the same space and workload (TPE's, say) holds architectures trained
stand-alone on the trial budget: labels for what the supernet's inherited weights should rank
(:mod:`autorec.oneshot.predictor` learns from them). :func:`supernet_values` maps a trial's
parameters to the supernet's choices; :func:`trained_pairs` checks that each derives back to the
trial's own model, so a score is never of another model.

Example:
    >>> supernet_values({"num_layers": 1, "layer0.kind": "dcnv2", "emb.all": 8},
    ...                 {"layer0.kind": ["dlrm", "dcnv2"], "layer1.kind": ["dlrm", "skip"],
    ...                  "emb.a": ["0", "8"], "emb.b": ["0", "8"]})
    {'layer0.kind': 'dcnv2', 'layer1.kind': 'skip', 'emb.a': '8', 'emb.b': '8'}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import optuna
from optuna.trial import TrialState


def supernet_values(params: Mapping[str, Any], names: Mapping[str, list[str]]) -> dict[str, str]:
    """A multi-trial study's parameters as the supernet's choice names: a choice the trial did not
    draw (a hash of a dropped feature, the layers past ``num_layers``) is ``skip`` for a layer
    kind and the first value otherwise (derive() ignores it). A shared choice of a space whose
    embedding group is ``all`` (``emb.all``, ``emb.all.hash``) is every feature's.

    Example:
        >>> supernet_values({"num_layers": 1, "layer0.kind": "dlrm", "emb.a": 0},
        ...                 {"layer0.kind": ["dlrm", "dcnv2"], "layer1.kind": ["dlrm", "skip"],
        ...                  "emb.a": ["0", "8"], "emb.a.hash": ["1", "0.25"]})
        {'layer0.kind': 'dlrm', 'layer1.kind': 'skip', 'emb.a': '0', 'emb.a.hash': '1'}
    """
    params = dict(params)
    for key in [k for k in params if k.startswith("emb.all")]:  # one shared choice for every feature
        suffix = key[len("emb.all"):]
        for name in names:
            if name.startswith("emb.") and name.endswith(suffix) and name.count(".") == 1 + suffix.count("."):
                params.setdefault(name, params[key])
    out = {}
    for name, choices in names.items():
        if name in params:
            value = params[name]
            text = "-".join(map(str, value)) if isinstance(value, list | tuple) else str(value)
            if text not in choices:
                raise ValueError(f"{name}: {value!r} is not among the supernet's choices {choices}")
            out[name] = text
        elif name.endswith(".kind") and "skip" in choices:
            out[name] = "skip"
        else:
            out[name] = choices[0]
    return out


def same_model(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Two architectures' dicts (``ArchSpec.to_dict()``) describe the same model: equal but for
    their name and metadata."""
    strip = ("name", "metadata")
    return {k: v for k, v in a.items() if k not in strip} == {k: v for k, v in b.items() if k not in strip}


def trained_pairs(study: optuna.Study, search: Any, where: str) -> list[tuple[dict[str, str], float]]:
    """The complete trials of ``study`` that recorded their metrics, each as (the supernet's choice
    values, :func:`supernet_values`, its validation AUC), ``search`` a
    :class:`~autorec.oneshot.search.CandidateSearch`. A trial whose architecture does not derive
    back from those choices is a ValueError naming ``where`` (the study's file or storage) and the
    trial; so is a parameter value the supernet lacks."""
    out = []
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        if "metrics" not in t.user_attrs:
            continue
        try:
            params = supernet_values(t.params, search.names)
        except ValueError as exc:
            raise ValueError(f"{where}: trial {t.number}: {exc}") from None
        if not same_model(search.net.derive(search.values_of(params)).to_dict(), t.user_attrs["arch"]):
            raise ValueError(f"{where}: trial {t.number}'s architecture does not derive back from the "
                             f"supernet's choices; its score would be another model's")
        out.append((params, float(t.user_attrs["metrics"]["val"]["auc"])))
    return out
