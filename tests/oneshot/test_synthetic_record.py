"""The flat record of ``benchmarks.oneshot_synthetic`` (no training: a run's output is built here)."""

from benchmarks.oneshot_synthetic import flat, pairwise


def layer(kind: str, modules: tuple[str, ...] = ()) -> dict:
    return {"kind": kind, **({"modules": list(modules)} if kind == "dhen" else {})}


def output(layers: list[dict]) -> dict:
    return {"data": "order2", "seed": 1, "bayes_test_auc": 0.92, "study_seconds": 10.0,
            "arch": {"layers": layers},
            "models": {"derived": {"test_auc": 0.905}, "dlrm": {"test_auc": 0.91},
                       "dcnv2": {"test_auc": 0.90}}}


def test_pairwise_layers_are_dots_crosses_and_dhen_of_dot_and_dcn_only():
    assert pairwise(layer("dlrm")) and pairwise(layer("dcnv2")) and pairwise(layer("dhen", ("dot", "dcn")))
    assert not pairwise(layer("wukong"))
    assert not pairwise(layer("dhen", ("dot", "attention", "dcn")))


def test_the_record_says_which_layers_are_pairwise_and_the_gap_to_the_best_preset():
    record = flat(output([layer("dhen", ("dot", "dcn")), layer("wukong")]))
    assert record["order2_seed1_layers"] == "dhen (dot+dcn), wukong"
    assert record["order2_seed1_first_layer_pairwise"] == 1
    assert record["order2_seed1_all_layers_pairwise"] == 0
    assert abs(record["order2_seed1_gap_to_best_preset"] - (0.905 - 0.91)) < 1e-12
    assert record["order2_seed1_dcnv2_test_auc"] == 0.90
    first_wukong = flat(output([layer("wukong"), layer("dlrm")]))
    assert first_wukong["order2_seed1_first_layer_pairwise"] == 0
    assert flat(output([]))["order2_seed1_first_layer_pairwise"] == 0


def test_a_key_names_a_run_with_other_options_apart():
    record = flat(output([layer("dcnv2")]), "_bykind")
    assert record["order2_seed1_bykind_layers"] == "dcnv2"
    assert record["order2_seed1_bykind_first_layer_pairwise"] == 1
    assert not any(k.startswith("order2_seed1_layers") for k in record)
