"""The layer grid (``crossing_from: grid``): every layer setting of a space, families taken in
turns, and a study whose crossings take the grid's best layer settings instead of the screen's."""

from __future__ import annotations

from pathlib import Path

import optuna

from autorec.oneshot.grid import in_turns, kinds, layer_settings
from autorec.oneshot.run import ONESHOT_ATTR
from autorec.study import open_storage, run_study
from tests.oneshot.test_run import of_stage, quiet, run_oneshot


def grid_space(tmp_path: Path) -> Path:
    """A space of 1-2 layers of DLRM and DCNv2 (rank 0 or 16), all-alike widths 4 and 8."""
    space = tmp_path / "grid.yaml"
    space.write_text("dim: [8]\nembedding: {dim: [4, 8], hash: [1]}\nover_arch: [[16], [32]]\n"
                     "layers: {num: {low: 1, high: 2}, kinds: [dlrm, dcnv2]}\n")
    return space


def test_every_layer_setting_once_each_layer_with_its_own_options():
    names = {"layer0.kind": ["dcnv2", "dlrm"], "layer0.dcnv2.rank": ["0", "16"],
             "layer1.kind": ["dcnv2", "dlrm", "skip"], "layer1.dcnv2.rank": ["0", "16"],
             "over_arch": ["256-128", "512-256"], "emb.a": ["4", "8"], "emb.a.hash": ["1", "0.25"]}
    settings = layer_settings(names)
    assert len(settings) == 3 * 4 * 2  # layer0: dcnv2 x 2 ranks + dlrm; layer1: 2 + 1 + skip; over-arch
    assert all(not any(n.startswith("emb.") for n in s) for s in settings)
    assert {"layer0.kind": "dlrm", "layer0.dcnv2.rank": "0", "layer1.kind": "skip",
            "layer1.dcnv2.rank": "0", "over_arch": "512-256"} in settings


def test_families_take_turns_by_first_kind_or_by_every_kind():
    a = {"layer0.kind": "dcnv2", "layer1.kind": "skip"}
    b = {"layer0.kind": "dcnv2", "layer1.kind": "dlrm"}
    c = {"layer0.kind": "dlrm", "layer1.kind": "skip"}
    assert kinds(b) == ("dcnv2", "dlrm") and kinds(a) == ("dcnv2",)
    assert in_turns([a, b, c], "kind") == [a, c, b]  # each first kind's best, then the seconds
    assert in_turns([a, b, c], "layers") == [a, b, c]  # three families of one each
    assert in_turns([], "kind") == []


def test_a_grid_study_crosses_the_grids_best_layer_settings_of_each_kind(tmp_path: Path) -> None:
    """On a space of 1-2 layers of DLRM and DCNv2 (rank 0 or 16), the grid scores all of its layer
    settings; the two bases are the best of each first-layer kind, and every crossing carries one
    of them (``crossing: grid``) with one width for every feature; the rerank takes crossings only.
    Crossing again from the record scores nothing more (a rerun crosses the same bases)."""
    space = grid_space(tmp_path)
    config, study = run_oneshot(tmp_path, {"steps": 6, "candidates": 6, "rerank": 2, "calibrate": 0,
                                           "diverse": True, "family": "kind", "shared_crossings": 2,
                                           "crossing_from": "grid", "rerank_from": "crossings"},
                                space=str(space))
    record = study.user_attrs[ONESHOT_ATTR]
    grid = record["layer_grid"]
    proxies = of_stage(study, "proxy")
    names = {name: [str(c) for c in dist.choices] for t in proxies for name, dist in t.distributions.items()}
    assert grid["settings"] == len(layer_settings(names)) > 4
    bases = [b["params"] for b in grid["bases"]]
    assert [kinds(b)[0] for b in bases] in (["dlrm", "dcnv2"], ["dcnv2", "dlrm"])
    assert grid["bases"][0]["val_auc"] >= grid["bases"][1]["val_auc"]
    crossings = [t for t in proxies if t.user_attrs.get("crossing") == "grid"]
    scored = [{k: str(v) for k, v in t.params.items()} for t in proxies]

    def widths(params: dict[str, str]) -> set[str]:
        return {v for k, v in params.items() if k.startswith("emb.") and not k.endswith(".hash")}

    for base in bases:  # each base at each all-alike width (4, 8; every row), once: a crossing
        for dim in ("4", "8"):  # the screen met already is not scored again
            assert sum(all(p.get(k) == v for k, v in base.items()) and widths(p) == {dim}
                       for p in scored) == 1
    assert 0 < len(crossings) <= 2 * 2
    for t in crossings:
        own = {k: str(v) for k, v in t.params.items() if not k.startswith("emb.")}
        assert own in bases
        assert len({v for k, v in t.params.items() if k.startswith("emb.") and not k.endswith(".hash")}) == 1
    reranked = {t.user_attrs["proxy_trial"] for t in of_stage(study, "rerank")}
    assert reranked <= {t.number for t in crossings} and len(reranked) == 2
    assert record["search_seconds"] >= grid["seconds"] > 0

    trials = len(study.trials)  # a rerun reads the grid off the record: nothing more is scored
    run_study(config, log=quiet)
    again = optuna.load_study(study_name=study.study_name, storage=open_storage(config.storage_url))
    assert again.user_attrs[ONESHOT_ATTR]["layer_grid"] == grid and len(again.trials) == trials


def test_a_grid_study_without_a_screen_scores_only_the_grids_crossings(tmp_path: Path) -> None:
    """``candidates: 0``: no TPE screen; the grid's two best layer settings, each at both all-alike
    widths, are the study's only candidates, and the re-rank takes two of them."""
    space = grid_space(tmp_path)
    _, study = run_oneshot(tmp_path, {"steps": 6, "candidates": 0, "rerank": 2, "calibrate": 0,
                                      "diverse": True, "family": "kind", "shared_crossings": 2,
                                      "crossing_from": "grid", "rerank_from": "crossings"},
                           space=str(space))
    proxies = of_stage(study, "proxy")
    assert len(proxies) == 2 * 2 and all(t.user_attrs.get("crossing") == "grid" for t in proxies)
    reranked = {t.user_attrs["proxy_trial"] for t in of_stage(study, "rerank")}
    assert reranked <= {t.number for t in proxies} and len(reranked) == 2
