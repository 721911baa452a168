"""Aligning a model's depth and structure with its target before the index plan is built.

Growth that adds layers first inserts identity-initialised ones (an MLP layer ``ReLU(I h) = h``
after a ReLU, a cross layer with ``W = 0, b = 0``), so that afterwards the two specs differ in
widths only and :mod:`autorec.growth.plan` can map every weight's axes from one to the other.
"""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import nn

from autorec.arch import (
    ArchSpec,
    CrossConfig,
    DhenConfig,
    MLPConfig,
    WukongConfig,
)

StateDict = dict[str, torch.Tensor]


def _mlp_prefixes(spec: ArchSpec) -> list[tuple[str, str, tuple[int, ...]]]:
    """(part path, torchrec MLP prefix, hidden widths) of every MLP whose depth may change."""
    out = [("dense_arch", "dense_arch", spec.dense_arch)] if spec.n_dense else []
    out.append(("over_arch", "over_arch.0", spec.over_arch))
    for i, config in enumerate(spec.layers):
        if isinstance(config, MLPConfig):
            out.append((f"layers.{i}.mlp", f"layers.{i}.mlp.0", config.hidden))
        elif isinstance(config, WukongConfig):
            out.append((f"layers.{i}.mlp", f"layers.{i}.fmb.mlp.0", config.mlp))
    return out


def _with_hidden(spec: ArchSpec, part: str, hidden: tuple[int, ...]) -> ArchSpec:
    if part in ("dense_arch", "over_arch"):
        return spec.replace(**{part: hidden})
    i = int(part.split(".")[1])
    config = spec.layers[i]
    layers = list(spec.layers)
    if isinstance(config, MLPConfig):
        layers[i] = replace(config, hidden=hidden)
    else:
        layers[i] = replace(config, mlp=hidden)
    return spec.replace(layers=tuple(layers))


def _deepen_mlps(spec: ArchSpec, target: ArchSpec, sd: StateDict) -> ArchSpec:
    """Identity layers appended after each MLP's last hidden layer, up to the target's depth."""
    deep = spec
    for (part, prefix, old), (_, _, new) in zip(_mlp_prefixes(spec), _mlp_prefixes(target), strict=True):
        if len(new) <= len(old):
            continue
        width = old[-1]
        if part == "dense_arch":  # its final layer (to D) is the MLP's last: move it to the end
            for key in ("weight", "bias"):
                sd[f"dense_arch._mlp.{len(new)}._linear.{key}"] = sd.pop(
                    f"dense_arch._mlp.{len(old)}._linear.{key}")
        for i in range(len(old), len(new)):
            sd[f"{prefix}._mlp.{i}._linear.weight"] = torch.eye(width)
            sd[f"{prefix}._mlp.{i}._linear.bias"] = torch.zeros(width)
        deep = _with_hidden(deep, part, old + (width,) * (len(new) - len(old)))
    return deep


def _cross_layers(sd: StateDict, prefix: str, old: CrossConfig, new: CrossConfig, full: int,
                  generator: torch.Generator | None) -> CrossConfig:
    """Align a cross network's layers and rank form with ``new``'s: zero (identity) layers
    added, low-rank turned full (W V), full turned low-rank (truncated SVD), layers dropped
    (the smallest by ||W|| + ||b||). Returns the aligned config; ``sd`` is edited in place."""
    def take(name: str) -> torch.Tensor:
        return sd.pop(f"{prefix}.{name}")

    layers: list[dict[str, torch.Tensor]] = []
    for layer in range(old.num_layers):
        if old.rank:
            layers.append({"W": take(f"W_kernels.{layer}"), "V": take(f"V_kernels.{layer}"),
                           "b": take(f"bias.{layer}")})
        else:
            layers.append({"K": take(f"kernels.{layer}"), "b": take(f"bias.{layer}").squeeze(-1)})
    rank = old.rank
    if new.num_layers < len(layers):
        def size(p: dict[str, torch.Tensor]) -> float:
            kernel = p["K"] if "K" in p else p["W"] @ p["V"]
            return float(kernel.norm() + p["b"].norm())
        keep = sorted(sorted(range(len(layers)), key=lambda i: -size(layers[i]))[:new.num_layers])
        layers = [layers[i] for i in keep]
    if rank and new.rank == 0:
        layers = [{"K": p["W"] @ p["V"], "b": p["b"]} for p in layers]
        rank = 0
    elif rank == 0 and new.rank:
        converted = []
        for p in layers:
            u, s, vh = torch.linalg.svd(p["K"])
            root = s[:new.rank].sqrt()
            converted.append({"W": u[:, :new.rank] * root, "V": root[:, None] * vh[:new.rank], "b": p["b"]})
        layers, rank = converted, new.rank
    while len(layers) < new.num_layers:  # x0 * (0 x + 0) + x = x
        if rank:
            v = torch.empty(rank, full)
            nn.init.xavier_normal_(v, generator=generator)
            layers.append({"W": torch.zeros(full, rank), "V": v, "b": torch.zeros(full)})
        else:
            layers.append({"K": torch.zeros(full, full), "b": torch.zeros(full)})
    for layer, p in enumerate(layers):
        if rank:
            sd[f"{prefix}.W_kernels.{layer}"], sd[f"{prefix}.V_kernels.{layer}"] = p["W"], p["V"]
            sd[f"{prefix}.bias.{layer}"] = p["b"]
        else:
            sd[f"{prefix}.kernels.{layer}"], sd[f"{prefix}.bias.{layer}"] = p["K"], p["b"][:, None]
    return replace(old, num_layers=len(layers), rank=rank)


def align(spec: ArchSpec, target: ArchSpec, sd: StateDict, generator: torch.Generator | None
           ) -> ArchSpec:
    """Make ``spec`` (and ``sd``) the same depth and structure as ``target``, widths as they are."""
    aligned = _deepen_mlps(spec, target, sd)
    widths = spec.layer_widths()
    layers = list(aligned.layers)
    for i, (a, b) in enumerate(zip(spec.layers, target.layers, strict=True)):
        path = f"layers.{i}"
        if isinstance(a, CrossConfig):
            assert isinstance(b, CrossConfig)
            layers[i] = _cross_layers(sd, f"{path}.cross", a, b, widths[i] * spec.dim, generator)
        elif isinstance(a, DhenConfig):
            assert isinstance(b, DhenConfig)
            if "dcn" in a.modules and "dcn" in b.modules and a.dcn_layers != b.dcn_layers:
                full = widths[i] * spec.dim
                prefix = f"{path}.interactions.dcn.cross"
                _cross_layers(sd, prefix, CrossConfig(num_layers=a.dcn_layers),
                              CrossConfig(num_layers=b.dcn_layers), full, generator)
                layers[i] = replace(layers[i], dcn_layers=b.dcn_layers)
    aligned = aligned.replace(layers=tuple(layers))
    _identity_shortcuts(spec, target, sd)
    return aligned


def _identity_shortcuts(spec: ArchSpec, target: ArchSpec, sd: StateDict) -> None:
    """An identity residual/shortcut that the target turns into a FeatureLinear enters as I."""
    old_w, new_w = spec.layer_widths(), target.layer_widths()
    for i, (a, b) in enumerate(zip(spec.layers, target.layers, strict=True)):
        if not isinstance(a, (WukongConfig, DhenConfig)):
            continue
        name = "residual" if isinstance(a, WukongConfig) else "shortcut"
        if old_w[i] == old_w[i + 1] and new_w[i] != new_w[i + 1]:
            sd[f"layers.{i}.{name}.linear.weight"] = torch.eye(old_w[i])
        if isinstance(a, WukongConfig) and not a.n_lcb and isinstance(b, WukongConfig) and b.n_lcb:
            sd[f"layers.{i}.lcb.linear.weight"] = torch.zeros(0, old_w[i])

