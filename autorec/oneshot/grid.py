"""Every layer setting of a one-shot space, scored with inherited weights at one all-alike
embedding setting: the bases the all-alike embedding settings are crossed with when
``crossing_from: grid`` (:mod:`autorec.oneshot.run`), instead of the screen's best.

The layer part of a space is small (the ``scale`` workload's: 264 settings, each layer's kind
with each of its own options, and the over-arch), so every setting can be scored, where the
screen's sampler, drawing the per-feature choices too, meets a few: on that workload's seed 0 the
screen never proposed a DCNv2 stack other than one rank-16 layer, which the grid ranks 58th.

Example:
    >>> names = {"layer0.kind": ["dcnv2", "dlrm"], "layer0.dcnv2.rank": ["0", "16"],
    ...          "layer1.kind": ["skip", "dlrm"], "over_arch": ["256-128"], "emb.a": ["4", "8"]}
    >>> layer_settings(names)[:2]  # doctest: +NORMALIZE_WHITESPACE
    [{'layer0.kind': 'dcnv2', 'layer0.dcnv2.rank': '0', 'layer1.kind': 'skip', 'over_arch': '256-128'},
     {'layer0.kind': 'dcnv2', 'layer0.dcnv2.rank': '0', 'layer1.kind': 'dlrm', 'over_arch': '256-128'}]
    >>> len(layer_settings(names))  # (dcnv2 rank 0, rank 16, dlrm) x (skip, dlrm)
    6
    >>> kinds({"layer0.kind": "dcnv2", "layer1.kind": "skip", "layer2.kind": "dlrm"})
    ('dcnv2', 'dlrm')
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

LAYER = re.compile(r"layer(\d+)\.kind$")


def layer_settings(names: Mapping[str, Sequence[str]]) -> list[dict[str, str]]:
    """Every layer setting of a supernet's choices (choice name -> value names; the ``emb.``
    ones left out): each layer's kind with every combination of its own options (the other
    kinds' options at their first value, which the derived model does not read), crossed over
    the layers and the other non-embedding choices (the over-arch)."""
    layer_names = [n for n in names if not n.startswith("emb.")]
    layers = sorted({int(m.group(1)) for n in layer_names if (m := LAYER.match(n))})
    base = {n: names[n][0] for n in layer_names}
    per_layer = []
    for i in layers:
        options = []
        for kind in names[f"layer{i}.kind"]:
            own = [n for n in layer_names if n.startswith(f"layer{i}.{kind}.")]
            for combo in itertools.product(*(names[n] for n in own)):
                options.append({f"layer{i}.kind": kind, **dict(zip(own, combo, strict=True))})
        per_layer.append(options)
    others = [n for n in layer_names if not n.startswith("layer")]
    out = []
    for picks in itertools.product(*per_layer, *(names[n] for n in others)):
        setting = dict(base)
        for pick in picks[:len(per_layer)]:
            setting.update(pick)
        setting.update(dict(zip(others, picks[len(per_layer):], strict=True)))
        out.append(setting)
    return out


def kinds(setting: Mapping[str, str]) -> tuple[str, ...]:
    """The layer kinds of a setting in order, skipped layers left out."""
    order = sorted((int(m.group(1)), value) for name, value in setting.items() if (m := LAYER.match(name)))
    return tuple(value for _, value in order if value != "skip")


def in_turns(ranked: list[dict[str, str]], by: str) -> list[dict[str, str]]:
    """``ranked`` (best first) in turns over families: by ``kind`` the first layer's kind, by
    ``layers`` the sequence of kinds; each family's best first (in the order of their bests), then
    each one's second, and so on (as :func:`autorec.oneshot.ranking.in_family_turns` for trials)."""
    groups: dict[tuple[str, ...], list[dict[str, str]]] = {}
    for setting in ranked:
        groups.setdefault(kinds(setting)[:1] if by == "kind" else kinds(setting), []).append(setting)
    longest = max((len(members) for members in groups.values()), default=0)
    return [members[i] for i in range(longest) for members in groups.values() if i < len(members)]


def grid_bases(search: Any, k: int, by: str, log: Callable[[str], None]) -> tuple[list[dict[str, str]], dict]:
    """Score every layer setting (:func:`layer_settings`) with ``search`` (a
    :class:`~autorec.oneshot.search.CandidateSearch`: inherited weights, with its kind heads if
    any, on its selection samples) at the all-alike embedding setting of most embedding bytes
    (the widest width, every row); returns the ``k`` best taken in turns over families ``by``
    (:func:`in_turns`), and a record of the grid (its size, seconds and embedding setting, and
    each base's score) for the study's ``oneshot`` attribute."""
    from autorec.costs import arch_cost

    start = time.perf_counter()
    settings = layer_settings(search.names)
    shared = search.shared_settings()
    if not settings or not shared:
        raise ValueError("crossing_from: grid needs layer choices and all-alike embedding settings "
                         "in the space")
    widest = max(shared, key=lambda s: arch_cost(search.net.derive(search.values_of({**settings[0], **s})))
                 .summary()["embedding_bytes"])
    scores = [search.evaluate(search.values_of({**s, **widest}))[1]["val_auc"] for s in settings]
    order = sorted(range(len(settings)), key=lambda i: -scores[i])  # (stable: the first of equals first)
    bases = in_turns([settings[i] for i in order], by)[:k]
    score = {id(settings[i]): scores[i] for i in order}
    record = {"settings": len(settings), "embedding": widest, "seconds": time.perf_counter() - start,
              "bases": [{"params": b, "val_auc": score[id(b)]} for b in bases]}
    log(f"layer grid: {len(settings)} layer settings scored at one all-alike width in "
        f"{record['seconds']:.0f} s; crossing the {len(bases)} best in turns over families")
    return bases, record
