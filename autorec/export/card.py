"""MODEL_CARD.md: an export's metrics, costs and architecture layer by layer, for people.

Example:
    >>> _human_bytes(2_500_000), _fmt(1234567), _fmt(0.1234567)
    ('2.5 MB', '1,234,567', '0.123457')
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from autorec.arch import ArchSpec
from autorec.costs import ArchCost, tensor_bytes
from autorec.export.layout import ARCH, MANIFEST, PREDICTIONS, PROGRAM, WEIGHTS


def model_card(spec: ArchSpec, cost: ArchCost, manifest: Mapping[str, Any]) -> str:
    """MODEL_CARD.md: metrics, costs, the architecture layer by layer, how to use and retrain."""
    lines = [f"# {spec.name}: autorec model card", "",
             f"Exported {manifest['created']} with " +
             ", ".join(f"{k} {v}" for k, v in manifest["versions"].items()) + ".", ""]
    lines += ["## Metrics", "", *_key_value_table(manifest["metrics"]), ""]
    lines += ["## Costs", "", *_key_value_table(manifest["costs"], skip=("parts",)), ""]
    lines += ["## Architecture", "", *_architecture(spec, cost), ""]
    lines += ["## Files", "",
              f"- `{ARCH}`: the ArchSpec; `ArchSpec.load` reads it.",
              f"- `{WEIGHTS}`: every parameter, keyed like `build_model(arch).state_dict()`.",
              f"- `{PROGRAM}`: a `torch.export` program: (dense [B, {spec.n_dense}] float32, values [N] "
              f"int64, lengths [{len(spec.feature_names)}, B] int64) -> logits [B]; any B and N.",
              f"- `{PREDICTIONS}`: a sample batch and its logits at export time.",
              f"- `{MANIFEST}`: metrics, costs, versions and file checksums.", ""]
    lines += ["## Use", "", "```python",
              "from autorec.export import load_model, load_program, program_inputs",
              "model = load_model(export_dir)      # a RecModel in eval mode",
              "logits = model(dense, kjt)          # dense [B, n_dense], a KeyedJaggedTensor",
              "program = load_program(export_dir)  # torch.export.ExportedProgram",
              "logits = program.module()(*program_inputs(model.spec, dense, kjt))",
              "```", ""]
    lines += ["## Retrain", "", "```sh", manifest["retrain_command"] or "(not recorded)", "```", ""]
    return "\n".join(lines)


def _architecture(spec: ArchSpec, cost: ArchCost) -> list[str]:
    widths = spec.layer_widths()
    parts = {p.name: p for p in cost.parts}
    lines = [f"Embedding dim D = {spec.dim}; {spec.n_dense} dense features; "
             f"{len(spec.feature_names)} sparse features in {len(spec.tables)} tables; "
             f"{widths[0]} vectors enter the interaction stack.", "",
             "| table | features | rows | dim | precision | size |", "|---|---|---:|---:|---|---:|"]
    lines += [f"| {t.name} | {', '.join(t.features)} | {t.num_embeddings:,} | {t.dim} | {t.precision} | "
              f"{_human_bytes(tensor_bytes(t.num_embeddings * t.dim, t.precision))} |"
              for t in spec.tables]
    lines += ["", "| part | kind | configuration | vectors in -> out | precision | params | FLOPs/sample |",
              "|---|---|---|---|---|---:|---:|"]

    def row(name: str, kind: str, config: str, shape: str, precision: str) -> str:
        part = parts.get(name)
        params, flops = (part.params, part.forward_flops) if part else (0, 0)
        return f"| {name} | {kind} | {config} | {shape} | {precision} | {params:,} | {flops:,} |"

    if spec.n_dense:
        lines.append(row("dense_arch", "mlp", f"sizes {[spec.n_dense, *spec.dense_arch, spec.dim]}",
                         "dense -> 1", "fp32"))
    if "projections" in parts:
        lines.append(row("projections", "linear", f"tables narrower or wider than {spec.dim}", "-", "fp32"))
    for i, layer in enumerate(spec.layers):
        config = ", ".join(f"{f.name}={getattr(layer, f.name)}" for f in dataclasses.fields(layer)
                           if f.name != "precision")
        lines.append(row(f"layers.{i}", layer.kind, config or "-", f"{widths[i]} -> {widths[i + 1]}",
                         layer.precision))
    lines.append(row("over_arch", "mlp", f"sizes {[widths[-1] * spec.dim, *spec.over_arch, 1]}",
                     f"{widths[-1]} -> logit", "fp32"))
    return lines


def _human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000:
            return f"{n:.3g} {unit}"
        n /= 1000
    return f"{n:,.1f} TB"


def _key_value_table(values: Mapping[str, Any], skip: tuple[str, ...] = ()) -> list[str]:
    flat = _flatten({k: v for k, v in values.items() if k not in skip})
    if not flat:
        return ["(none recorded)"]
    return ["| name | value |", "|---|---:|", *(f"| {k} | {_fmt(v)} |" for k, v in flat.items())]


def _flatten(values: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in values.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_flatten(value, f"{name}."))
        elif isinstance(value, list):
            text = json.dumps(value)
            out[name] = text if len(text) <= 80 else f"({len(value)} entries; see {MANIFEST})"
        else:
            out[name] = value
    return out


def _fmt(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value).replace("|", "\\|")
