"""The unit spaces of a model and, for every parameter, which spaces its axes are made of.

:func:`build_plan` walks two ArchSpecs of the same shape (same parts, same depth, same block
kinds: the caller aligns depth first) and returns a :class:`Plan`: one
:class:`~autorec.growth.layout.Space` per set of prunable units (old size from the first spec,
new size from the second) and, for every parameter of the model whose shape depends on them,
the (role, layout) of each of its axes. Parameters with no rule keep their shape and are
carried over as they are (embedding tables, LayerNorms over D, projections).

Space names are the part paths a user reads in errors: ``dense_arch[0]`` (hidden layer 0 of
the dense arch), ``over_arch[1]``, ``layers.2.mlp[0]``, ``layers.0.rank.1`` (rank of cross
layer 1), ``layers.1.rank`` (Wukong's FM rank), ``layers.1.n_fm``, ``layers.1.n_lcb``,
``layers.3.n_out.dot`` (rows of a DHEN module; ``layers.3.n_out`` when summed).

Example:
    >>> from autorec.arch import ArchSpec, TableSpec
    >>> t = (TableSpec(name="t", features=("f",), num_embeddings=10, dim=4),)
    >>> plan = build_plan(ArchSpec(dim=4, tables=t, over_arch=(8, 6)),
    ...                   ArchSpec(dim=4, tables=t, over_arch=(4, 6)))
    >>> [(s.name, s.old, s.new) for s in plan.spaces.values()]
    [('over_arch[0]', 8, 4), ('over_arch[1]', 6, 6)]
"""

from __future__ import annotations

from dataclasses import dataclass, field

from autorec.arch import (
    ArchSpec,
    BlockConfig,
    CrossConfig,
    DhenConfig,
    MLPConfig,
    WukongConfig,
)
from autorec.blocks import kind, out_features
from autorec.growth.layout import AxisRule, Concat, Fixed, Layout, Pairs, Product, Space, Units


class GrowthError(ValueError):
    """A target that is not a pruning or growth of the spec; the message names the part."""


@dataclass
class Plan:
    spaces: dict[str, Space] = field(default_factory=dict)
    rules: dict[str, tuple[AxisRule, ...]] = field(default_factory=dict)
    # (path, input rows, output rows) of identity shortcuts in the new model: exact only
    # when every new output row takes the input row its old self took.
    identities: list[tuple[str, Layout, Layout]] = field(default_factory=list)
    # Shortcuts that were a learned FeatureLinear and become an identity (rows in == rows out).
    lost: list[str] = field(default_factory=list)

    def space(self, name: str, old: int, new: int, stat: bool = False) -> Units:
        self.spaces[name] = Space(name, old, new, stat)
        return Units(name)

    def linear(self, prefix: str, out: Layout, inp: Layout, bias: bool = True) -> None:
        self.rules[f"{prefix}.weight"] = (("out", out), ("in", inp))
        if bias:
            self.rules[f"{prefix}.bias"] = (("out", out),)

    def mlp(self, part: str, prefix: str, inp: Layout, old: tuple[int, ...], new: tuple[int, ...]
            ) -> Layout:
        """torchrec ``MLP`` layers ``{prefix}._mlp.<i>._linear``; returns the last layer's units."""
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            out = self.space(f"{part}[{i}]", a, b)
            self.linear(f"{prefix}._mlp.{i}._linear", out, inp)
            inp = out
        return inp

    def mlp_to_rows(self, part: str, prefix: str, inp: Layout, old: tuple[int, ...],
                    new: tuple[int, ...], out: Layout) -> None:
        """:func:`autorec.blocks.mlp.mlp_to_rows`: an MLP (``{prefix}.0``) then a Linear."""
        last = self.mlp(part, f"{prefix}.0", inp, old, new) if old else inp
        self.linear(f"{prefix}.{1 if old else 0}", out, last)


def _stat_consumers(layers: tuple[BlockConfig, ...], others: tuple[BlockConfig, ...], i: int) -> bool:
    """Whether the rows leaving layer ``i`` reach a consumer that normalises over rows."""
    for config, other in zip(layers[i + 1:], others[i + 1:], strict=True):
        if isinstance(config, WukongConfig):
            return True
        if isinstance(config, DhenConfig):
            assert isinstance(other, DhenConfig)
            return "attention" in config.modules or "attention" in other.modules
        if not kind(config.kind).pass_through:  # rows handed on unchanged reach the next layer
            return False
    return False


def build_plan(src: ArchSpec, dst: ArchSpec) -> Plan:
    """The spaces and rules taking a model of ``src`` to one of ``dst`` (same depth and kinds)."""
    plan = Plan()
    dim = src.dim
    if src.n_dense:
        plan.mlp("dense_arch", "dense_arch", Fixed(src.n_dense), src.dense_arch, dst.dense_arch)
        last = (plan.spaces[f"dense_arch[{len(src.dense_arch) - 1}]"] if src.dense_arch else None)
        inp: Layout = Units(last.name) if last else Fixed(src.n_dense)
        plan.linear(f"dense_arch._mlp.{len(src.dense_arch)}._linear", Fixed(dim), inp)
    rows: Layout = Fixed(src.num_inputs)
    for i, (a, b) in enumerate(zip(src.layers, dst.layers, strict=True)):
        stat = _stat_consumers(src.layers, dst.layers, i)
        rows = _layer(plan, f"layers.{i}", a, b, rows, dim, stat)
    last = plan.mlp("over_arch", "over_arch.0", Product(rows, Fixed(dim)), src.over_arch, dst.over_arch)
    plan.linear("over_arch.1", Fixed(1), last)
    return plan


def _layer(plan: Plan, path: str, a: BlockConfig, b: BlockConfig, rows: Layout, dim: int,
           stat: bool) -> Layout:
    """Add the rules of one interaction layer; returns the layout of its output rows."""
    flat = Product(rows, Fixed(dim))
    if kind(a.kind).identity:
        return rows
    if isinstance(a, CrossConfig):
        assert isinstance(b, CrossConfig)
        for layer in range(a.num_layers):
            name = f"{path}.cross"
            if a.rank == 0:
                plan.rules[f"{name}.kernels.{layer}"] = (("out", flat), ("in", flat))
                plan.rules[f"{name}.bias.{layer}"] = (("elem", flat), None)
            else:
                rank = plan.space(f"{path}.rank.{layer}", a.rank, b.rank)
                plan.rules[f"{name}.W_kernels.{layer}"] = (("out", flat), ("in", rank))
                plan.rules[f"{name}.V_kernels.{layer}"] = (("out", rank), ("in", flat))
                plan.rules[f"{name}.bias.{layer}"] = (("elem", flat),)
        return rows
    if isinstance(a, MLPConfig):
        assert isinstance(b, MLPConfig)
        plan.mlp_to_rows(f"{path}.mlp", f"{path}.mlp", flat, a.hidden, b.hidden,
                         Fixed(a.n_out * dim))
        return Fixed(a.n_out)
    if isinstance(a, WukongConfig):
        assert isinstance(b, WukongConfig)
        return _wukong(plan, path, a, b, rows, dim, stat)
    if isinstance(a, DhenConfig):
        assert isinstance(b, DhenConfig)
        return _dhen(plan, path, a, b, rows, dim, stat)
    # dlrm (its output packs the pairwise dots into rows) and any kind without rules here: carried
    # as it is, weights and all, which needs its input rows as they are.
    if rows.spaces():
        raise GrowthError(f"{path}: a {a.kind} layer whose input rows are pruned or grown is not "
                          f"supported (it is carried as it is); change the rows of "
                          f"{', '.join(rows.spaces())} only after it")
    return Fixed(out_features(a, rows.old_size(plan.spaces), dim))


def _shortcut(plan: Plan, path: str, name: str, rows: Layout, out: Layout, old_identity: bool,
              new_identity: bool) -> None:
    if not new_identity:
        # An old identity becomes a FeatureLinear: the caller adds its identity matrix.
        plan.rules[f"{path}.{name}.linear.weight"] = (("out", out), ("in", rows))
    elif old_identity:
        plan.identities.append((f"{path}.{name}", rows, out))
    else:
        plan.lost.append(f"{path}.{name}")


def _wukong(plan: Plan, path: str, a: WukongConfig, b: WukongConfig, rows: Layout, dim: int,
            stat: bool) -> Layout:
    rank = plan.space(f"{path}.rank", a.rank, b.rank, stat=True)
    fm = plan.space(f"{path}.n_fm", a.n_fm, b.n_fm, stat=stat)
    plan.rules[f"{path}.fmb.proj"] = (("in", rows), ("out", rank))
    interactions = Product(rows, rank)
    plan.rules[f"{path}.fmb.norm.weight"] = (("elem", interactions),)
    plan.rules[f"{path}.fmb.norm.bias"] = (("elem", interactions),)
    plan.mlp_to_rows(f"{path}.mlp", f"{path}.fmb.mlp", interactions, a.mlp, b.mlp, Product(fm, Fixed(dim)))
    parts: list[Layout] = [fm]
    if a.n_lcb or b.n_lcb:
        lcb = plan.space(f"{path}.n_lcb", a.n_lcb, b.n_lcb, stat=stat)
        plan.linear(f"{path}.lcb.linear", lcb, rows, bias=False)
        parts.append(lcb)
    out = Concat(tuple(parts))
    num_in = rows.old_size(plan.spaces)
    _shortcut(plan, path, "residual", rows, out, num_in == a.n_fm + a.n_lcb,
              rows.new_size(plan.spaces) == b.n_fm + b.n_lcb)
    return out


def merged_modules(a: tuple[str, ...], b: tuple[str, ...], path: str) -> tuple[str, ...]:
    """Both module lists in one order that keeps each list's own order (a concat ensemble
    stacks its modules' rows in that order); raises when the common modules are reordered."""
    common_a = [m for m in a if m in b]
    common_b = [m for m in b if m in a]
    if common_a != common_b:
        raise GrowthError(f"{path}.modules: the modules both keep must stay in the same order, "
                          f"got {list(a)} -> {list(b)}")
    merged: list[str] = []
    ia = ib = 0
    while ia < len(a) or ib < len(b):
        if ia < len(a) and a[ia] not in b:
            merged.append(a[ia])
            ia += 1
        elif ib < len(b) and b[ib] not in a:
            merged.append(b[ib])
            ib += 1
        else:
            merged.append(a[ia])
            ia += 1
            ib += 1
    return tuple(merged)


def _dhen(plan: Plan, path: str, a: DhenConfig, b: DhenConfig, rows: Layout, dim: int,
          stat: bool) -> Layout:
    flat = Product(rows, Fixed(dim))
    summed = a.ensemble != "concat"
    shared = plan.space(f"{path}.n_out", a.n_out, b.n_out, stat=stat) if summed else None
    outs: list[Layout] = []
    for module in merged_modules(a.modules, b.modules, path):
        in_a, in_b = module in a.modules, module in b.modules
        out = shared or plan.space(f"{path}.n_out.{module}", a.n_out if in_a else 0,
                                   b.n_out if in_b else 0, stat=stat)
        outs.append(out)
        if not (in_a and in_b):
            continue  # a dropped module goes; an added one is initialised by the caller
        prefix = f"{path}.interactions.{module}"
        if module == "dot":
            plan.linear(f"{prefix}.linear", Product(out, Fixed(dim)), Pairs(rows))
        elif module == "attention":
            plan.rules[f"{prefix}.project.linear.weight"] = (("out", out), ("in", rows))
        elif module == "dcn":
            for layer in range(a.dcn_layers):
                plan.rules[f"{prefix}.cross.kernels.{layer}"] = (("out", flat), ("in", flat))
                plan.rules[f"{prefix}.cross.bias.{layer}"] = (("elem", flat), None)
            plan.linear(f"{prefix}.linear", Product(out, Fixed(dim)), flat)
        elif module == "linear":
            plan.rules[f"{prefix}.linear.weight"] = (("out", out), ("in", rows))
        elif module == "conv":
            plan.rules[f"{prefix}.conv.weight"] = (("out", out), ("in", rows), None)
            plan.rules[f"{prefix}.conv.bias"] = (("out", out),)
        else:  # pragma: no cover - DHEN_MODULES is closed
            raise GrowthError(f"{path}.modules: no rules for module {module!r}")
    out_rows: Layout = shared if shared is not None else Concat(tuple(outs))
    num_in = rows.old_size(plan.spaces)
    _shortcut(plan, path, "shortcut", rows, out_rows, num_in == out_rows.old_size(plan.spaces),
              rows.new_size(plan.spaces) == out_rows.new_size(plan.spaces))
    return out_rows
