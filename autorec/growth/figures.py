"""The schedule drawn: width of each part of the model over the training steps.

The data (:func:`schedule_data`) is computed apart from the drawing (:func:`schedule_figure`),
as in :mod:`autorec.report`; plotly is imported only to draw.

Example:
    >>> from autorec.arch import ArchSpec, TableSpec
    >>> from autorec.growth.schedule import GrowthSchedule, Phase
    >>> spec = ArchSpec(dim=4, tables=(TableSpec(name="t", features=("f",), num_embeddings=10, dim=4),),
    ...                 over_arch=(64, 32))
    >>> data = schedule_data(spec, GrowthSchedule((Phase(60, {"over_arch": 0.5}), Phase(40))))
    >>> data.steps, data.ratios["over_arch"], data.sizes["over_arch"]
    ([0, 60, 100], [0.5, 1.0], ['32-16', '64-32'])
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from autorec.arch import ArchSpec
    from autorec.growth.schedule import GrowthSchedule


@dataclass
class ScheduleData:
    """Per part: the width ratio and the sizes in each phase; ``steps`` are the phase starts
    then the total (one more entry than phases)."""

    parts: list[str]
    steps: list[int]
    ratios: dict[str, list[float]]
    sizes: dict[str, list[str]]


def _size(spec: ArchSpec, part: str) -> str:
    if part in ("dense_arch", "over_arch"):
        return "-".join(map(str, getattr(spec, part)))
    layer = spec.layers[int(part.split(".")[1])]
    fields = {k: v for k, v in vars(layer).items() if k != "precision"}
    return ", ".join(f"{k}={'-'.join(map(str, v)) if isinstance(v, tuple) else v}" for k, v in fields.items())


def schedule_data(spec: ArchSpec, schedule: GrowthSchedule | None) -> ScheduleData | None:
    """What :func:`schedule_figure` draws for ``schedule`` training ``spec`` (None without one).
    Parts that no phase scales are left out; sizes come from each phase's architecture."""
    if schedule is None:
        return None
    parts = list(schedule.parts) or ["over_arch"]
    specs = schedule.phase_specs(spec)
    return ScheduleData(parts=parts, steps=[*schedule.starts, schedule.total_steps],
                        ratios={p: [ph.width(p) for ph in schedule.phases] for p in parts},
                        sizes={p: [_size(s, p) for s in specs] for p in parts})


def schedule_figure(data: ScheduleData,
                    title: str = "Growth schedule: width per part over steps") -> go.Figure:
    """A step line per part: its width ratio (1 = full size) from step 0 to the end; the hover
    shows the part's sizes in that phase."""
    try:
        import plotly.graph_objects as go
    except ImportError:
        raise ImportError("schedule figures need plotly: pip install 'autorec-nas[search]'") from None
    fig = go.Figure()
    for part in data.parts:
        ratios = data.ratios[part]
        sizes = data.sizes[part]
        fig.add_trace(go.Scatter(
            x=data.steps, y=[*ratios, ratios[-1]], mode="lines+markers", name=part,
            line_shape="hv", customdata=[*sizes, sizes[-1]],
            hovertemplate=f"{part}<br>from step %{{x}}: width %{{y:.2f}}<br>%{{customdata}}<extra></extra>"))
    fig.update_layout(title=title, xaxis_title="training step", yaxis_title="width (share of full size)",
                      yaxis_range=[0, 1.05], template="plotly_white")
    return fig


def trial_schedule_figure(user_attrs: Mapping[str, Any], trial_number: int) -> go.Figure | None:
    """The schedule figure of a study trial: the best schedule of its ``growth`` user attribute
    (autorec.strategies.growth) over its ``arch`` (None when the trial searched no schedule)."""
    from autorec.arch import ArchSpec
    from autorec.growth.schedule import GrowthSchedule

    arch, growth = user_attrs.get("arch"), user_attrs.get("growth")
    if not isinstance(arch, dict) or not isinstance(growth, dict) or not growth.get("best"):
        return None
    where = f"trial {trial_number}"
    schedule = GrowthSchedule.from_dict(growth["best"]["schedule"], f"{where} growth.best.schedule")
    data = schedule_data(ArchSpec.from_dict(arch, f"{where} arch"), schedule)
    return schedule_figure(data, f"Trial {trial_number}: growth schedule (width per part over steps)") \
        if data else None
