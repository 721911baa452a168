"""The precision probe: which parts of a trained model tolerate which format, in the manner
of LoKA (measure every site on real batches, then decide per layer).

Two levels, both against the same fp32 model on the same real batches:

- sites, every dense module (Linear, Conv1d, CrossNet, MultiheadAttention): the amax and the
  kurtosis of its input activations and of its weights (outliers show as a kurtosis far above
  a Gaussian's 3), the share of scale blocks that saturate (MX formats clip values in blocks
  whose amax lies just under a power of two), and the relative error of the site's output with
  its inputs and weights in each format, ``||y_f - y|| / ||y||``;
- parts, what an ArchSpec gives a precision (``dense_arch``, ``layers.<i>``, ``over_arch``):
  the relative error of the model's logits and the drop of AUC when that part alone runs its
  forward products in each format. A part is *unsafe* in a format when the AUC drop exceeds
  ``auc_tolerance`` or the logit error exceeds ``error_tolerance``.

The data (:class:`ProbeResult`) is computed apart from the drawing (:func:`probe_figure`).

Example:
    >>> from autorec.arch import ArchSpec, TableSpec, WukongConfig
    >>> from autorec.models import build_model
    >>> from torchrec.datasets.utils import Batch
    >>> from torchrec.sparse.jagged_tensor import KeyedJaggedTensor
    >>> spec = ArchSpec(dim=8, n_dense=1, dense_arch=(8,), over_arch=(8,),
    ...     tables=(TableSpec(name="t", features=("f",), num_embeddings=50, dim=8),),
    ...     layers=(WukongConfig(n_fm=2, n_lcb=2, rank=2, mlp=(16,)),))
    >>> _ = torch.manual_seed(0)
    >>> ids = torch.randint(0, 50, (256,))
    >>> kjt = KeyedJaggedTensor.from_lengths_sync(["f"], ids, torch.ones(256, dtype=torch.int32))
    >>> batch = Batch(dense_features=torch.randn(256, 1), sparse_features=kjt, labels=(ids % 2).float())
    >>> result = probe(build_model(spec), [batch], formats=("mxfp8_e4m3", "mxfp4_e2m1"))
    >>> [p.part for p in result.parts]
    ['dense_arch', 'layers.0', 'over_arch']
    >>> all(s.error["mxfp4_e2m1"] > s.error["mxfp8_e4m3"] for s in result.sites)
    True
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from autorec.metrics import binary_metrics
from autorec.precision.layers import QUANTISED, as_precision, dense_parts, quantise_module_
from autorec.precision.quantisers import quantiser
from autorec.precision.recipes import recipe

DEFAULT_FORMATS = ("bf16", "fp8_e4m3", "fp8_e4m3_rowwise", "mxfp8_e4m3", "mxfp6_e2m3", "mxfp4_e2m1")


@dataclass(frozen=True)
class SiteStats:
    """One dense module: its inputs' and weights' statistics, and its output error per format."""

    part: str
    site: str
    kind: str
    act_amax: float
    act_kurtosis: float
    weight_amax: float
    weight_kurtosis: float
    act_saturated: dict[str, float] = field(default_factory=dict)
    weight_saturated: dict[str, float] = field(default_factory=dict)
    error: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class PartResult:
    """One part of the ArchSpec alone in each format: logits' relative error, AUC drop, verdict."""

    part: str
    logit_error: dict[str, float]
    auc_drop: dict[str, float]
    unsafe: dict[str, bool]


@dataclass(frozen=True)
class ProbeResult:
    """What :func:`probe` measured; :meth:`to_dict` is the CLI's ``--json``."""

    formats: tuple[str, ...]
    baseline_auc: float
    rows: int
    auc_tolerance: float
    error_tolerance: float
    parts: tuple[PartResult, ...]
    sites: tuple[SiteStats, ...]

    def unsafe_parts(self, fmt: str) -> list[str]:
        """The parts flagged unsafe in ``fmt``, in model order."""
        return [p.part for p in self.parts if p.unsafe[fmt]]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def kurtosis(x: torch.Tensor) -> float:
    """Pearson's kurtosis E[(x - mean)^4] / var^2 (3 for a Gaussian); 0 for a constant."""
    x = x.detach().double().flatten()
    centred = x - x.mean()
    var = centred.square().mean()
    return float(centred.pow(4).mean() / var.square()) if var > 0 else 0.0


def _axis(module: nn.Module) -> int:
    """The reduction axis of the module's input and weights (Conv1d: the channels)."""
    return 1 if isinstance(module, nn.Conv1d) else -1


def _call_as(module: nn.Module, precision: str, args: tuple, kwargs: dict) -> torch.Tensor:
    """The module's forward in ``precision``, its forward hooks bypassed."""
    with as_precision(module, precision):
        out = module.forward(*args, **kwargs)
    return out[0] if isinstance(out, tuple) else out


def _relative_error(approx: torch.Tensor, exact: torch.Tensor) -> float:
    norm = exact.double().norm()
    return float((approx.double() - exact.double()).norm() / norm) if norm > 0 else 0.0


def _saturated(fmt: str, tensors: Sequence[torch.Tensor], axis: int) -> float:
    q = quantiser(recipe(fmt).activation)
    sizes = [t.numel() for t in tensors]
    return float(np.average([q.saturated(t, axis) for t in tensors], weights=sizes)) if tensors else 0.0


def _site_stats(model: nn.Module, parts: dict[str, nn.Module], batch: Any,
                formats: Sequence[str]) -> list[SiteStats]:
    captured: dict[str, tuple[str, nn.Module, tuple, dict, torch.Tensor]] = {}
    hooks = []
    for part, root in parts.items():
        for name, module in root.named_modules():
            if type(module) not in QUANTISED:
                continue
            site = f"{part}.{name}" if name else part

            def hook(module: nn.Module, args: tuple, kwargs: dict, out: Any, site: str = site,
                     part: str = part) -> None:
                captured[site] = (part, module, args, kwargs, out[0] if isinstance(out, tuple) else out)

            hooks.append(module.register_forward_hook(hook, with_kwargs=True))
    try:
        model(batch.dense_features, batch.sparse_features)
    finally:
        for handle in hooks:
            handle.remove()
    sites = []
    for site, (part, module, args, kwargs, out) in captured.items():
        x, axis = args[0], _axis(module)
        weights = [p.detach() for p in module.parameters() if p.dim() >= 2]
        flat = torch.cat([w.flatten() for w in weights]) if weights else torch.zeros(1)
        sites.append(SiteStats(
            part=part, site=site, kind=type(module).__name__,
            act_amax=float(x.abs().max()), act_kurtosis=kurtosis(x),
            weight_amax=float(flat.abs().max()), weight_kurtosis=kurtosis(flat),
            act_saturated={f: _saturated(f, [x], axis) for f in formats},
            weight_saturated={f: _saturated(f, weights, axis) for f in formats},
            error={f: _relative_error(_call_as(module, f, args, kwargs), out) for f in formats}))
    return sites


def _predict(model: nn.Module, batches: Sequence[Any]) -> tuple[np.ndarray, torch.Tensor]:
    labels, logits = [], []
    for batch in batches:
        logits.append(model(batch.dense_features, batch.sparse_features).detach().double())
        labels.append(batch.labels)
    return torch.cat(labels).numpy(), torch.cat(logits)


def _auc(labels: np.ndarray, logits: torch.Tensor) -> float:
    return binary_metrics(labels, torch.sigmoid(logits).numpy())["auc"]


@torch.no_grad()
def probe(model: nn.Module, batches: Sequence[Any], formats: Sequence[str] = DEFAULT_FORMATS,
          auc_tolerance: float = 0.001, error_tolerance: float = 0.05) -> ProbeResult:
    """Probe every site and part of ``model`` in each of ``formats`` on ``batches``.

    Args:
        model: a :class:`~autorec.models.RecModel` (unwrapped; trained for meaningful
            statistics). Its parts are probed from fp32 and left in the precisions they had.
        batches: real batches (``Batch``); the first gives the site statistics, all of them
            the logits and the AUC.
        formats: layer precisions to try (names of ``autorec.arch.PRECISIONS``).
        auc_tolerance: a part whose AUC drops by more is unsafe in that format.
        error_tolerance: a part whose logits' relative error exceeds it is unsafe too.
    """
    for fmt in formats:
        recipe(fmt)
    if not batches:
        raise ValueError("probe: no batches to measure on")
    original = {name: precision for name, (_, precision) in dense_parts(model).items()}
    parts = {name: module for name, (module, _) in dense_parts(model).items()}
    was_training = model.training
    model.eval()
    try:
        for module in parts.values():
            quantise_module_(module, "fp32")
        labels, base = _predict(model, batches)
        base_auc = _auc(labels, base)
        sites = _site_stats(model, parts, batches[0], formats)
        results = []
        for name, module in parts.items():
            errors, drops = {}, {}
            for fmt in formats:
                quantise_module_(module, fmt)
                _, logits = _predict(model, batches)
                quantise_module_(module, "fp32")
                errors[fmt] = _relative_error(logits, base)
                drops[fmt] = base_auc - _auc(labels, logits)
            unsafe = {f: bool(drops[f] > auc_tolerance or errors[f] > error_tolerance) for f in formats}
            results.append(PartResult(name, errors, drops, unsafe))
    finally:
        for name, module in parts.items():
            quantise_module_(module, original[name])
        model.train(was_training)
    return ProbeResult(tuple(formats), base_auc, len(labels), auc_tolerance, error_tolerance,
                       tuple(results), tuple(sites))


def probe_figure(result: ProbeResult) -> Any:
    """Plotly figure: parts x formats coloured by how far past its tolerance each part is
    (``max(AUC drop / auc_tolerance, logit error / error_tolerance)``; above 1 is unsafe), above
    sites x formats coloured by log10 of the relative output error. Rows in model order."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    formats = list(result.formats)
    parts, sites = result.parts[::-1], result.sites[::-1]  # heat maps draw their first row lowest
    fig = make_subplots(rows=2, cols=1, vertical_spacing=0.12, row_heights=[0.3, 0.7],
                        subplot_titles=(f"one part in a format: unsafe past AUC drop {result.auc_tolerance} "
                                        f"or logit error {result.error_tolerance}",
                                        "log10 relative output error of each site"))
    badness = [[max(p.auc_drop[f] / result.auc_tolerance, p.logit_error[f] / result.error_tolerance)
                for f in formats] for p in parts]
    text = [[f"AUC {-p.auc_drop[f]:+.4f}, err {p.logit_error[f]:.3f}<br>{'UNSAFE' if p.unsafe[f] else 'safe'}"
             for f in formats] for p in parts]
    fig.add_trace(go.Heatmap(z=badness, x=formats, y=[p.part for p in parts], text=text,
                             texttemplate="%{text}", colorscale="RdYlGn_r", zmin=0, zmid=1,
                             zmax=max(2.0, *map(max, badness)),
                             colorbar={"title": "x tolerance", "y": 0.85, "len": 0.3},
                             hovertemplate="%{y} in %{x}<br>%{text}<extra></extra>"), row=1, col=1)
    errors = [[float(np.log10(max(s.error[f], 1e-12))) for f in formats] for s in sites]
    fig.add_trace(go.Heatmap(z=errors, x=formats, y=[s.site for s in sites], colorscale="Viridis",
                             colorbar={"title": "log10 error", "y": 0.35, "len": 0.6},
                             hovertemplate="%{y}<br>%{x}: 10^%{z:.2f}<extra></extra>"), row=2, col=1)
    fig.update_layout(height=320 + 22 * len(sites), title="autorec precision probe: safe and unsafe sites "
                      f"(fp32 AUC {result.baseline_auc:.4f} on {result.rows} rows)")
    return fig


def write_probe_html(result: ProbeResult, path: str | Path) -> Path:
    """The chart as one self-contained HTML file (plotly.js inlined: opens offline)."""
    path = Path(path)
    probe_figure(result).write_html(str(path), include_plotlyjs=True, full_html=True)
    return path
