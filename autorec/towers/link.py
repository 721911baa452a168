"""A slower link on the clock, and where towers start to pay for themselves.

On one machine the ranks talk over loopback, where bytes cost almost nothing, so the exchange
that DMT towers save (:func:`autorec.towers.sharding.predicted_bytes_per_sample`) cannot show as
time, while the tower modules' extra compute does. :class:`ThrottledLink` emulates a slower
network for real: it meters every collective like :class:`~autorec.towers.sharding.CommMeter`
and makes the calling rank wait ``bytes sent / bandwidth`` before the transfer, as a NIC of that
bandwidth would (per rank, full duplex). Steps timed under it are wall-clock steps on a link of
that speed, compute included.

:func:`crossing_gbps` is the link model: a step costs its compute plus its bytes over the link,
``t(bw) = t0 + bytes / bw``, so from two layouts' step times on a fast link and their bytes per
step the bandwidth below which the layout that sends less wins follows,
``bw* = (bytes_a - bytes_b) / (t0_b - t0_a)``.

Example:
    >>> round(crossing_gbps(bytes_flat=4e6, bytes_towers=1e6, seconds_flat=0.010, seconds_towers=0.013), 6)
    1.0
    >>> crossing_gbps(4e6, 1e6, 0.010, 0.009)  # towers faster even on a free link
    inf
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch

from autorec.towers.sharding import CommMeter


@dataclass
class ThrottledLink(CommMeter):
    """A :class:`CommMeter` that also waits ``bytes / (gbps x 1e9)`` seconds before each
    collective this rank calls (``gbps``: GB/s per rank; ``inf`` meters without waiting)."""

    gbps: float = math.inf
    waited: float = 0.0  # seconds waited so far

    def __post_init__(self) -> None:
        if not self.gbps > 0:
            raise ValueError(f"gbps: expected a positive bandwidth in GB/s, got {self.gbps}")

    def _add(self, op: str, tensor: torch.Tensor, nbytes: float) -> None:
        super()._add(op, tensor, nbytes)
        if math.isfinite(self.gbps) and nbytes > 0:
            wait = nbytes / (self.gbps * 1e9)
            time.sleep(wait)
            self.waited += wait


def crossing_gbps(bytes_flat: float, bytes_towers: float, seconds_flat: float,
                  seconds_towers: float) -> float:
    """The link bandwidth (GB/s per rank) below which the towers' step is faster than the flat
    one's, from their bytes sent per rank and step and their step seconds on a fast link (the
    module docstring's model); ``inf`` when towers win at any bandwidth, 0 when they never do."""
    saved = bytes_flat - bytes_towers
    extra = seconds_towers - seconds_flat
    if extra <= 0:
        return math.inf if saved >= 0 else 0.0
    return max(saved, 0.0) / extra / 1e9
