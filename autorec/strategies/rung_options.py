"""The one-shot strategy's final-rung options checked: ``rung_fraction``, ``rung_price``,
``rung_probe`` and ``rung_margin`` (:class:`~autorec.strategies.oneshot.OneShotStrategy`; the
rung itself is :mod:`autorec.oneshot.rung`). Each error names the option at fault and what was
expected.

Example:
    >>> shares = rung_shares([0.6, 0.85], 2, 1, 1, margin=0.005)  # a race: two reads of two finalists
    >>> shares, rung_probe_share("seconds", None, shares, (1, 1), margin=0.005)
    ([0.6, 0.85], 0.05)
"""

from __future__ import annotations

import itertools
from typing import Any

RUNG_PRICES = ("steps", "seconds")  # at what the final's rung reads its finalists (rung_price)


def rung_margin_value(margin: Any, shares: list[float]) -> float:
    """``rung_margin`` checked against the rung's reads: 0 (off) or an AUC margin in (0, 0.5),
    which needs more than one read to race over.

    Example:
        >>> rung_margin_value(0.005, [0.6, 0.85]), rung_margin_value(0, [0.85])
        (0.005, 0.0)
        >>> rung_margin_value(0.005, [0.85])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: strategy 'oneshot': rung_margin: 0.005 is set with one rung read ...
    """
    if isinstance(margin, bool) or not isinstance(margin, int | float) or not 0.0 <= margin < 0.5:
        raise ValueError(f"strategy 'oneshot': rung_margin: expected 0 (off) or an AUC margin in (0, 0.5), "
                         f"got {margin!r}")
    if margin and len(shares) < 2:
        raise ValueError(f"strategy 'oneshot': rung_margin: {margin} is set with one rung read "
                         f"(rung_fraction {shares}); give rung_fraction a list of increasing shares "
                         "to race over")
    return float(margin)


def rung_probe_share(rung_price: str, rung_probe: float | None, shares: list[float],
                     seeds: tuple[int, int], margin: float = 0.0) -> float | None:
    """The share of the epoch at which a rung read at equal seconds measures each finalist's
    speed (``rung_price: seconds``; ``rung_probe``, default 0.05), or None for a read at equal
    steps. At equal seconds the rung is read once, or (with ``rung_margin``) at each of several
    shares, all inside the first epoch and after the probe.

    Example:
        >>> rung_probe_share("seconds", None, [0.6], (1, 1)), rung_probe_share("steps", None, [1.0], (1, 1))
        (0.05, None)
        >>> rung_probe_share("seconds", 0.7, [0.6], (1, 1))
        Traceback (most recent call last):
        ...
        ValueError: strategy 'oneshot': rung_probe: expected a share of the epoch in (0, 0.6), got 0.7
    """
    if rung_price not in RUNG_PRICES:
        raise ValueError(f"strategy 'oneshot': rung_price: expected one of {', '.join(RUNG_PRICES)}, "
                         f"got {rung_price!r}")
    if rung_price == "steps":
        if rung_probe is not None:
            raise ValueError("strategy 'oneshot': rung_probe: set without rung_price 'seconds' (only a read "
                             "at equal seconds measures speeds)")
        return None
    if (len(shares) != 1 and not margin) or shares[-1] >= 1.0 or seeds != (1, 1):
        raise ValueError(f"strategy 'oneshot': rung_price: 'seconds' reads a rung of finalists inside the "
                         f"epoch: expected one rung_fraction below 1 (or, with rung_margin, a list of them) "
                         f"and rung_seeds and rung_winner_seeds 1, got rung_fraction {shares}, "
                         f"seeds {list(seeds)}")
    probe = 0.05 if rung_probe is None else rung_probe
    if isinstance(probe, bool) or not 0.0 < probe < shares[0]:
        raise ValueError(f"strategy 'oneshot': rung_probe: expected a share of the epoch in "
                         f"(0, {shares[0]}), got {probe}")
    return float(probe)


def rung_shares(rung_fraction: Any, final_candidates: int, rung_seeds: int,
                rung_winner_seeds: int, margin: float = 0.0) -> list[float]:
    """The shares of the first epoch at which the final rung is read (``rung_fraction``: one
    share, or a list of increasing shares: successive halving, or with ``margin`` a race), checked
    against the rung they read.

    Example:
        >>> rung_shares(0.3, 4, 1, 1), rung_shares([0.25, 0.6], 4, 1, 1)
        ([0.3], [0.25, 0.6])
        >>> rung_shares([0.25, 0.5, 0.75], 4, 1, 1)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: strategy 'oneshot': rung_fraction: 3 reads of a rung of 4 finalists: ...
        >>> rung_shares([0.25, 0.5, 0.75], 2, 1, 1, margin=0.01)  # a race reads as often as it is asked
        [0.25, 0.5, 0.75]
    """
    shares = rung_fraction if isinstance(rung_fraction, list) else [rung_fraction]
    if not shares or any(isinstance(f, bool) or not isinstance(f, int | float) or not 0.0 < f <= 1.0
                         for f in shares):
        raise ValueError(f"strategy 'oneshot': rung_fraction: expected a share of an epoch in (0, 1], "
                         f"or a list of them, got {rung_fraction}")
    if any(b <= a for a, b in itertools.pairwise(shares)):
        raise ValueError(f"strategy 'oneshot': rung_fraction: expected increasing shares of the epoch, "
                         f"got {rung_fraction}")
    if shares != [1.0] and final_candidates == rung_seeds == rung_winner_seeds == 1:
        raise ValueError(f"strategy 'oneshot': rung_fraction: {rung_fraction} is set without a rung "
                         "(final_candidates, rung_seeds or rung_winner_seeds above 1)")
    if len(shares) > 1:
        if (rung_seeds, rung_winner_seeds) != (1, 1):
            raise ValueError(f"strategy 'oneshot': rung_fraction: a list ({rung_fraction}) reads the "
                             "finalists at several steps, one training seed each; set rung_seeds and "
                             "rung_winner_seeds to 1")
        alive, reads = final_candidates, 1  # the reads before halving leaves one
        while alive > 1:
            alive, reads = -(-alive // 2), reads + 1
        if not margin and len(shares) > reads - 1:
            raise ValueError(f"strategy 'oneshot': rung_fraction: {len(shares)} reads of a rung of "
                             f"{final_candidates} finalists: halving leaves one after {reads - 1}")
    return [float(f) for f in shares]
