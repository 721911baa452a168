"""A learned latency model of the dense parts of an ArchSpec, fitted to timings on one device.

FLOPs rank architectures only roughly by time: a DHEN layer's attention, a Wukong layer's
LayerNorms and a dot interaction's gather cost more per FLOP than one large matrix product.
So each part of :func:`~autorec.costs.arch_cost` (an interaction layer, the dense arch, the
projections, the over-arch) gets its time from a linear model of its kind,

    seconds = a + b * forward_flops + c * params + d * inputs + sum_m e_m * inputs,

with every coefficient >= 0. ``inputs`` is the part's input elements per sample: F_in x D for a
layer, times the cross layers of a DCNv2 layer (each runs its elementwise ops over them). The
``e_m`` terms are a DHEN layer's, one per module ``m`` of its ensemble (attention, conv, dcn,
dot, linear), whose costs per FLOP differ most. The coefficients are fitted by non-negative
least squares on relative error, against the measured forward + backward time of each part
alone, at one batch size, with one torch thread. A kind the profiles did not cover falls back
to a fit over every part. The ``linear`` kind (the per-feature projections: one part that sums
independent matrix products) has no intercept, so the part's time is the sum of its features'
times, as the supernet's E[cost] adds them.

Timings come from :func:`profile_parts` over architectures sampled from a search space:
each sampled layer is built alone (``build_block``) and timed on random inputs of its real
width, as is the over-arch MLP. ``autorec profile latency`` runs it and writes
``cost_models/<device>/latency.json``; the supernet's ``cost_metric: latency`` reads it.
"""

from __future__ import annotations

import functools
import json
import math
import random
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from scipy.optimize import nnls
from torch import nn

from autorec.arch import ArchSpec, BlockConfig
from autorec.blocks import build_block, kind, out_features
from autorec.costs.analytic import arch_cost, layer_part

COST_MODELS_DIR = Path(__file__).resolve().parents[2] / "cost_models"
LATENCY_FILE = "latency.json"
VERSION = 1
NO_INTERCEPT = frozenset({"linear"})


DHEN_MODULES = ("attention", "conv", "dcn", "dot", "linear")
NUM_COEFFICIENTS = 4 + len(DHEN_MODULES)
Coefficients = tuple[float, ...]  # a, b, c, d, then e_m per DHEN module


def _features(flops: float, params: float, inputs: float, modules: Sequence[str],
              intercept: bool) -> list[float]:
    return [1.0 if intercept else 0.0, float(flops), float(params), float(inputs),
            *(float(inputs) if m in modules else 0.0 for m in DHEN_MODULES)]


def layer_inputs(config: BlockConfig, f_in: int, dim: int) -> int:
    """The ``inputs`` feature of a layer: its kind's (F_in x D unless the kind says otherwise,
    e.g. times the cross layers of a DCNv2 layer)."""
    return kind(config.kind).latency_inputs(config, f_in, dim)


def part_modules(config: BlockConfig) -> tuple[str, ...]:
    """The sub-modules the model prices apart in a layer (a DHEN layer's modules; else none)."""
    return kind(config.kind).latency_modules(config)


@dataclass(frozen=True)
class LatencyModel:
    """Seconds of one forward + backward of a part, per part kind (see the module docstring).

    Args:
        device: what the profiles were measured on (``cpu``, ``cuda``).
        batch_size: samples per timed step.
        coefficients: kind -> (a, b, c, d, e_attention, ..., e_linear): seconds, per FLOP, per
            parameter, per input element, per input element of each DHEN module.
        fallback: coefficients fitted over every part, for kinds without their own.
        heldout_mape: kind -> mean absolute percentage error on held-out parts ("all" overall).

    Example:
        >>> coef = (1e-4, 1e-9) + (0.0,) * 7
        >>> model = LatencyModel("cpu", 512, {"dlrm": coef}, coef)
        >>> round(model.predict("dlrm", flops=10**6, params=0, inputs=64) * 1e6)  # 100 us + 1 ms
        1100
    """

    device: str
    batch_size: int
    coefficients: dict[str, Coefficients]
    fallback: Coefficients
    heldout_mape: dict[str, float] = field(default_factory=dict)

    def predict(self, kind: str, flops: float, params: float, inputs: float,
                modules: Sequence[str] = ()) -> float:
        """Seconds of a part of ``kind`` (``modules``: a DHEN layer's ensemble)."""
        coef = self.coefficients.get(kind) or self.fallback
        x = _features(flops, params, inputs, modules, kind not in NO_INTERCEPT)
        return float(sum(w * v for w, v in zip(coef, x, strict=True)))

    def part_seconds(self, spec: ArchSpec) -> dict[str, float]:
        """Predicted seconds of each dense part of ``spec`` (the names of ``arch_cost(spec).parts``)."""
        out = {}
        f_in = (len(spec.tables) if spec.towers is None else spec.towers.num_towers * spec.towers.n_out) \
            + (1 if spec.n_dense else 0)
        inputs = {"dense_arch": spec.n_dense, "projections": sum(t.dim for t in spec.tables),
                  "towers": len(spec.tables) * spec.dim}
        kinds = {"dense_arch": "mlp", "projections": "linear", "towers": "towers", "over_arch": "mlp"}
        by_layer = {}
        for i, config in enumerate(spec.layers):
            by_layer[f"layers.{i}"] = (config, layer_inputs(config, f_in, spec.dim))
            f_in = out_features(config, f_in, spec.dim)
        inputs["over_arch"] = f_in * spec.dim
        for part in arch_cost(spec).parts:
            if part.name in by_layer:
                config, size = by_layer[part.name]
                out[part.name] = 0.0 if kind(config.kind).identity else self.predict(
                    config.kind, part.forward_flops, part.params, size, part_modules(config))
            else:
                out[part.name] = self.predict(kinds[part.name], part.forward_flops, part.params,
                                              inputs[part.name])
        return out

    def spec_seconds(self, spec: ArchSpec) -> float:
        """Predicted seconds of one training step's dense forward + backward for ``spec``."""
        return sum(self.part_seconds(spec).values())

    def to_dict(self) -> dict[str, Any]:
        return {"version": VERSION, **asdict(self)}

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=1) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> LatencyModel:
        path = Path(path)
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise FileNotFoundError(
                f"{path}: no latency model for this device; measure one with "
                f"`autorec profile latency --out {path.parent}`") from None
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: line {exc.lineno}: not valid JSON ({exc.msg})") from None
        if not isinstance(data, dict) or data.get("version") != VERSION:
            found = data.get("version") if isinstance(data, dict) else data
            raise ValueError(f"{path}: expected a latency model of version {VERSION}, got version {found!r}")
        try:
            return cls(device=str(data["device"]), batch_size=int(data["batch_size"]),
                       coefficients={k: _coefficients(v, f"coefficients.{k}")
                                     for k, v in data["coefficients"].items()},
                       fallback=_coefficients(data["fallback"], "fallback"),
                       heldout_mape={k: float(v) for k, v in data.get("heldout_mape", {}).items()})
        except KeyError as exc:
            raise ValueError(f"{path}: missing key {exc.args[0]!r}") from None
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{path}: {exc}") from None


def _coefficients(value: Any, key: str) -> Coefficients:
    if not isinstance(value, (list, tuple)) or len(value) != NUM_COEFFICIENTS:
        raise ValueError(f"{key}: expected a list of {NUM_COEFFICIENTS} coefficients, got {value!r}")
    out = tuple(float(v) for v in value)
    if any(v < 0 or not math.isfinite(v) for v in out):
        raise ValueError(f"{key}: expected finite numbers >= 0, got {value!r}")
    return out


def default_path(device: str = "cpu") -> Path:
    return COST_MODELS_DIR / device / LATENCY_FILE


@functools.cache
def load_latency_model(device: str = "cpu") -> LatencyModel:
    """The fitted model at ``cost_models/<device>/latency.json`` (loaded once)."""
    return LatencyModel.load(default_path(device))


# ---- profiling -----------------------------------------------------------------------------

def _time(module: nn.Module, x: torch.Tensor, repeats: int) -> float:
    """Min over ``repeats`` of one forward + backward of ``module`` on ``x`` (after a warm-up)."""
    best = math.inf
    for i in range(repeats + 2):
        module.zero_grad(set_to_none=True)
        inp = x.detach().requires_grad_(True)
        start = time.perf_counter()
        module(inp).float().sum().backward()
        if i >= 2:
            best = min(best, time.perf_counter() - start)
    return best


def _over_arch(num_in: int, dim: int, sizes: Sequence[int]) -> nn.Module:
    from torchrec.modules.mlp import MLP

    return nn.Sequential(nn.Flatten(), MLP(num_in * dim, list(sizes)), nn.Linear(sizes[-1], 1))


def profile_parts(specs: Iterable[ArchSpec], batch_size: int = 512, repeats: int = 5,
                  seed: int = 0) -> list[dict[str, Any]]:
    """Time every interaction layer and the over-arch of each spec alone (forward + backward on
    random inputs of the part's real width, one process): one record per distinct part with its
    kind (``mlp`` for the over-arch), DHEN modules, FLOPs, parameters, input elements per sample
    and seconds."""
    torch.manual_seed(seed)
    seen: set[tuple[Any, ...]] = set()
    records = []
    for spec in specs:
        f_in = len(spec.tables) + (1 if spec.n_dense else 0)
        parts = {p.name: p for p in arch_cost(spec).parts}
        for config in spec.layers:
            key = ("layer", config, f_in, spec.dim)
            if key not in seen and not kind(config.kind).identity:
                seen.add(key)
                part = layer_part(config, f_in, spec.dim)
                x = torch.randn(batch_size, f_in, spec.dim)
                seconds = _time(build_block(config, f_in, spec.dim), x, repeats)
                records.append({"kind": config.kind, "modules": list(part_modules(config)),
                                "flops": part.forward_flops, "params": part.params,
                                "inputs": layer_inputs(config, f_in, spec.dim), "seconds": seconds})
            f_in = out_features(config, f_in, spec.dim)
        key = ("over_arch", f_in, spec.dim, spec.over_arch)
        if key not in seen:
            seen.add(key)
            part = parts["over_arch"]
            x = torch.randn(batch_size, f_in, spec.dim)
            seconds = _time(_over_arch(f_in, spec.dim, spec.over_arch), x, repeats)
            records.append({"kind": "mlp", "modules": [], "flops": part.forward_flops,
                            "params": part.params, "inputs": f_in * spec.dim, "seconds": seconds})
    return records


def sample_specs(space: Any, num_specs: int, seed: int = 0,
                 num_features: Sequence[int] = (8, 16, 26, 39)) -> list[ArchSpec]:
    """``num_specs`` architectures of ``space`` on probe schemas of ``num_features`` sparse
    features (and 13 dense ones), so layer widths span small and Criteo-sized inputs."""
    from autorec.data.schema import Schema, SparseFeature

    rng = random.Random(seed)
    out = []
    for k in range(num_specs):
        n = rng.choice(list(num_features))
        schema = Schema(tuple(f"d{j}" for j in range(13)),
                        tuple(SparseFeature(f"s{j}", 1000) for j in range(n)))
        out.append(space.sample(schema, seed=seed * 100_003 + k))
    return out


# ---- fitting -------------------------------------------------------------------------------

def _fit(rows: Sequence[dict[str, Any]], intercept: bool) -> Coefficients:
    """NNLS on relative error: each row's equation divided by its measured seconds."""
    x = np.array([_features(r["flops"], r["params"], r["inputs"], r.get("modules", ()), intercept)
                  for r in rows], dtype=np.float64)
    y = np.array([r["seconds"] for r in rows], dtype=np.float64)
    scale = x.max(axis=0)
    scale[scale == 0] = 1.0
    coef, _ = nnls((x / scale) / y[:, None], np.ones(len(rows)))
    return tuple((coef / scale).tolist())


def _mape(model: LatencyModel, rows: Sequence[dict[str, Any]]) -> float:
    errors = [abs(model.predict(r["kind"], r["flops"], r["params"], r["inputs"], r.get("modules", ()))
                  - r["seconds"]) / r["seconds"] for r in rows]
    return float(np.mean(errors)) if errors else float("nan")


def fit_latency_model(records: Sequence[dict[str, Any]], device: str = "cpu", batch_size: int = 512,
                      holdout: float = 0.25, seed: int = 0, min_rows: int = 5) -> LatencyModel:
    """Fit coefficients per kind on ``1 - holdout`` of
    ``records`` (each kind split alike), report the held-out MAPE per kind and overall, then refit
    on every record for the returned model.

    Example:
        >>> rows = [{"kind": "dlrm", "flops": f, "params": 0, "inputs": 0, "seconds": 1e-4 + 1e-9 * f}
        ...         for f in range(10**5, 2 * 10**6, 10**5)]
        >>> model = fit_latency_model(rows)
        >>> round(model.heldout_mape["all"], 6), [round(v, 12) for v in model.coefficients["dlrm"][:2]]
        (0.0, [0.0001, 1e-09])
    """
    if len(records) < min_rows:
        raise ValueError(f"latency model: expected at least {min_rows} profiled parts, got {len(records)}")
    rng = random.Random(seed)
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by_kind.setdefault(r["kind"], []).append(r)
    train, test = [], []
    for rows in by_kind.values():
        rows = rows[:]
        rng.shuffle(rows)
        cut = len(rows) - int(len(rows) * holdout) if len(rows) >= 2 * min_rows else len(rows)
        train += rows[:cut]
        test += rows[cut:]

    def fitted(rows: Sequence[dict[str, Any]]) -> LatencyModel:
        groups: dict[str, list[dict[str, Any]]] = {}
        for r in rows:
            groups.setdefault(r["kind"], []).append(r)
        coefficients = {k: _fit(v, k not in NO_INTERCEPT) for k, v in groups.items() if len(v) >= min_rows}
        return LatencyModel(device, batch_size, coefficients, _fit(rows, True))

    probe = fitted(train)
    mape = {k: _mape(probe, [r for r in test if r["kind"] == k]) for k in by_kind}
    mape = {k: v for k, v in mape.items() if not math.isnan(v)}
    mape["all"] = _mape(probe, test)
    final = fitted(records)
    return LatencyModel(final.device, final.batch_size, final.coefficients, final.fallback, mape)
