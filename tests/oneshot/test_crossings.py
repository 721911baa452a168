"""The crossings' layer settings cut to their first layer (``crossing_layers: first``): every
all-alike embedding setting is scored on the screen's best layer settings, each a plain one-layer
model of its first layer's kind."""

from __future__ import annotations

from pathlib import Path

from autorec.oneshot.ranking import crossing_bases
from autorec.oneshot.run import screen_trials
from tests.oneshot.test_run import of_stage, run_oneshot


def test_crossing_layers_first_crosses_each_bases_first_layer_alone(tmp_path: Path) -> None:
    space = tmp_path / "two.yaml"
    space.write_text("dim: [8]\nembedding: {dim: [4, 8]}\nover_arch: [[16]]\n"
                     "layers: {num: {low: 1, high: 2}, kinds: [dlrm, dcnv2], dcnv2: {num_layers: [1, 2]}}\n")
    _, study = run_oneshot(tmp_path, {"steps": 6, "candidates": 12, "rerank": 2, "calibrate": 0,
                                      "shared_crossings": 3, "crossing_layers": "first"}, space=str(space))
    crossings = [t for t in of_stage(study, "proxy") if "crossing" in t.user_attrs]
    bases = {t.number: t for t in crossing_bases(screen_trials(study), 3)}
    assert {t.user_attrs["crossing"] for t in crossings} == set(bases)
    assert any(len(t.user_attrs["arch"]["layers"]) == 2 for t in bases.values())  # a stack was cut
    for t in crossings:
        base = bases[t.user_attrs["crossing"]]
        layers = t.user_attrs["arch"]["layers"]
        assert layers == base.user_attrs["arch"]["layers"][:1]  # its first layer, as the screen had it
        assert t.params["layer1.kind"] == "skip"
        assert {k: v for k, v in t.params.items() if k.startswith("layer0.")} == {
            k: v for k, v in base.params.items() if k.startswith("layer0.")}
    # the re-rank still reads them: the re-ranked models are trained one-layer ones or screen ones
    assert len(of_stage(study, "rerank")) == 2
