"""Costs of a spec with towers: the tower modules' FLOPs and bytes, and the exchanged bytes."""

from __future__ import annotations

from autorec.arch import ArchSpec, DotConfig, MLPConfig, TableSpec, TowerSpec
from autorec.costs.analytic import arch_cost


def _spec(towers: TowerSpec | None) -> ArchSpec:
    tables = tuple(TableSpec(name=f"t{i}", features=(f"f{i}",), num_embeddings=50, dim=8) for i in range(6))
    return ArchSpec(dim=8, n_dense=2, dense_arch=(8,), tables=tables, layers=(DotConfig(),), over_arch=(16,),
                    towers=towers)


def test_tower_modules_are_a_costed_part() -> None:
    # Each tower: MLP on [3 * 8] -> [2 * 8] (hidden 4): 24*4 + 4*16 multiply-adds, then the
    # compression [n_out=1, 3 + 2] x [5, 8]: 5 * 8 multiply-adds.
    towers = TowerSpec(groups=(("f0", "f1", "f2"), ("f3", "f4", "f5")),
                       module=MLPConfig(hidden=(4,), n_out=2), n_out=1)
    cost = arch_cost(_spec(towers))
    part = next(p for p in cost.parts if p.name == "towers")
    assert part.kind == "towers"
    assert part.forward_flops == 2 * 2 * (24 * 4 + 4 * 16 + 5 * 8)
    assert part.params == 2 * ((24 * 4 + 4) + (4 * 16 + 16) + 5 + 8)
    assert part.bytes == 4 * part.params
    assert cost.forward_flops == sum(p.forward_flops for p in cost.parts)


def test_exchanged_bytes_shrink_by_the_compression() -> None:
    towers = TowerSpec(groups=(("f0", "f1", "f2"), ("f3", "f4", "f5")), module=DotConfig(n_passthrough=0),
                       n_out=1)
    flat, towered = arch_cost(_spec(None)), arch_cost(_spec(towers))
    assert flat.exchange_bytes == 6 * 8 * 4
    assert towered.exchange_bytes == 2 * 1 * 8 * 4
    assert flat.to_dict()["exchange_bytes"] == flat.exchange_bytes
    assert not any(p.name == "towers" for p in flat.parts)


def test_exchanged_bytes_are_a_study_objective(tmp_path) -> None:
    """Where the link is slow towers pay (benchmarks/towers_crossing.py): a study can minimise
    the exchange beside AUC, and each trial records it from the cost model."""
    from pathlib import Path

    from autorec.study import OBJECTIVES, StudyConfig, cost_summary

    towers = TowerSpec(groups=(("f0", "f1", "f2"), ("f3", "f4", "f5")), module=DotConfig(n_passthrough=0),
                       n_out=1)
    assert OBJECTIVES["exchange_bytes"] == "minimize"
    towered, flat = cost_summary(_spec(towers)), cost_summary(_spec(None))
    assert towered["exchange_bytes"] == 2 * 1 * 8 * 4 < flat["exchange_bytes"]
    space = Path(__file__).parents[2] / "search_spaces" / "towers.yaml"
    config = StudyConfig.from_dict({"name": "s", "data": {"name": "movielens100k"}, "space": str(space),
                                    "objectives": ["val_auc", "exchange_bytes"]}, tmp_path / "s.yaml")
    assert config.directions == ["maximize", "minimize"]
