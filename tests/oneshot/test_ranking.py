"""The one-shot study's orderings (:mod:`autorec.oneshot.ranking`), on hand-made trials."""

from __future__ import annotations

import optuna

from autorec.oneshot.ranking import (
    crossing_bases,
    family_bests,
    halving,
    in_family_turns,
    kind_neighbours,
    prefer_capacity,
    prefer_speed,
    rerank_order,
    rung_runs,
    winner,
)
from autorec.oneshot.search import PROXY_ATTR


def _candidate(number: int, kinds: tuple[str, ...], score: float,
               flops: float = 1.0) -> optuna.trial.FrozenTrial:
    made = optuna.trial.create_trial(value=score, user_attrs={
        "arch": {"layers": [{"kind": k} for k in kinds]}, PROXY_ATTR: {"val_auc": score},
        "costs": {"flops": flops}})
    made.number = number
    return made


def test_family_turns_and_bests():
    kinds = [("dcnv2",), ("dcnv2",), ("dhen",), ("dcnv2",), ("dhen", "dcnv2"), ("dhen",)]
    ranked = [_candidate(i, k, 0.9 - 0.1 * i) for i, k in enumerate(kinds)]
    assert [t.number for t in in_family_turns(ranked)] == [0, 2, 4, 1, 5, 3]
    assert [t.number for t in family_bests(ranked, 2)] == [0, 2]
    assert [t.number for t in family_bests(ranked, 4)] == [0, 2, 4, 1]  # three families: then the next best
    assert in_family_turns([]) == [] and family_bests([], 2) == []
    # by the first layer's kind: the DHEN + DCNv2 stack is of the DHEN family
    assert [t.number for t in in_family_turns(ranked, "kind")] == [0, 2, 1, 4, 3, 5]
    assert [t.number for t in family_bests(ranked, 3, "kind")] == [0, 2, 1]


def test_crossing_bases_take_each_kinds_best_layers_first_by_kind():
    # seed 1 of the `k4f2` run (BENCHMARKS.md): the screen's best layer settings all began with
    # Wukong or DHEN, so by layer sequence the crossings never gave DCNv2 or DLRM an all-alike
    # embedding setting; by kind each kind's best layers are crossed before any kind's second
    kinds = [("wukong", "wukong"), ("wukong",), ("wukong", "dhen"), ("wukong", "dlrm"), ("dhen", "dlrm"),
             ("dcnv2",), ("dlrm", "dcnv2"), ("wukong", "wukong")]
    screen = []
    for i, k in enumerate(kinds):
        t = _candidate(i, k, 0.9 - 0.01 * i)
        t.user_attrs["arch"]["over_arch"] = [16 * (i + 1)]  # distinct layer settings
        screen.append(t)
    screen.append(_candidate(8, ("wukong", "wukong"), 0.5))  # the same layers as 0, scored worse
    screen[8].user_attrs["arch"]["over_arch"] = [16]
    assert [t.number for t in crossing_bases(screen, 4)] == [0, 1, 2, 3]
    assert [t.number for t in crossing_bases(screen, 4, "kind")] == [0, 4, 5, 6]
    assert [t.number for t in crossing_bases(screen, 6, "kind")] == [0, 4, 5, 6, 1, 2]
    assert crossing_bases([], 3, "kind") == []


def test_capacity_breaks_ties_within_the_margin_only():
    scores, flops = [0.700, 0.699, 0.6985, 0.690, 0.689], [10, 30, 20, 99, 5]
    ranked = [_candidate(i, ("dlrm",), s, f) for i, (s, f) in enumerate(zip(scores, flops, strict=True))]

    def auc(t):
        return t.user_attrs[PROXY_ATTR]["val_auc"]
    # within 0.002 of the best: 0, 1, 2, by FLOPs; 3 (the largest, 0.010 behind) keeps its rank
    assert [t.number for t in prefer_capacity(ranked, auc, 0.002)] == [1, 2, 0, 3, 4]
    assert [t.number for t in prefer_capacity(ranked, auc, 0.0)] == [0, 1, 2, 3, 4]
    assert [t.number for t in prefer_capacity(ranked, auc, 0.2)] == [3, 1, 2, 0, 4]
    assert prefer_capacity([], auc, 0.01) == []


def test_the_winner_is_the_largest_within_the_margin_of_the_best_trained():
    chosen = [_candidate(0, ("dlrm",), 0.5, flops=10), _candidate(1, ("dhen",), 0.5, flops=40),
              _candidate(2, ("wukong",), 0.5, flops=90)]
    trained = {0: 0.650, 1: 0.6495, 2: 0.640}

    def auc(t):
        return trained[t.number]
    assert winner(chosen, auc, 0.0).number == 0  # off: the best trained
    assert winner(chosen, auc, 0.001).number == 1  # 1 ties with 0 and is larger; 2 is 0.010 behind
    assert winner(chosen, auc, 0.02).number == 2


def test_a_rerank_tie_is_broken_by_the_proxy_that_chose_the_candidates():
    # o3k's re-rank, seed 0: 174 led 154 by 0.0007 after 150 steps, the proxy had 154 first
    chosen = [_candidate(154, ("dcnv2",), 0.5949), _candidate(174, ("dcnv2", "dcnv2"), 0.5939),
              _candidate(21, ("wukong",), 0.5932)]
    trained = {154: 0.6200, 174: 0.6207, 21: 0.6164}

    def auc(t):
        return trained[t.number]

    def proxy(t):
        return t.user_attrs[PROXY_ATTR]["val_auc"]
    assert winner(chosen, auc, 0.0, proxy, 0.0).number == 174  # off: the best trained
    assert winner(chosen, auc, 0.0, proxy, 0.001).number == 154  # 154 ties 174 and the proxy has it first
    assert winner(chosen, auc, 0.0, proxy, 0.0005).number == 174  # 0.0007 apart: no tie
    assert winner(chosen, auc, 0.0, proxy, 0.01).number == 154  # all tie: the proxy's best
    trained[21] = 0.6300
    assert winner(chosen, auc, 0.0, proxy, 0.001).number == 21  # a clear lead stands


def test_a_speed_tie_sends_the_fastest_of_the_near_best_to_the_final():
    # k5 seed 2's re-rank: the two costliest stacks led the 150-step trainings by < 0.0045
    chosen = [_candidate(124, ("dhen", "dhen"), 0.6125), _candidate(174, ("wukong", "dhen"), 0.6133),
              _candidate(144, ("dcnv2", "dhen"), 0.5984), _candidate(154, ("dlrm", "dcnv2"), 0.5886)]
    trained = {124: 0.6209, 174: 0.6202, 144: 0.6181, 154: 0.6166}
    speed = {124: 7316.0, 174: 9121.0, 144: 12793.0, 154: 19424.0}

    def auc(t):
        return trained[t.number]

    def fast(t):
        return speed[t.number]
    order = [t.number for t in rerank_order(chosen, auc, 0.0, speed=fast, speed_tie=0.01)]
    assert order == [154, 144, 174, 124]  # all within 0.0043: fastest first
    assert [t.number for t in rerank_order(chosen, auc, 0.0, speed=fast)] == [124, 174, 144, 154]  # off
    # 0.0030 takes 124, 174 and 144 (0.0028 behind), not 154 (0.0043 behind), which keeps its rank
    order = [t.number for t in rerank_order(chosen, auc, 0.0, speed=fast, speed_tie=0.003)]
    assert order == [144, 174, 124, 154]
    assert winner(chosen, auc, 0.0, speed=fast, speed_tie=0.001).number == 174  # 124 and 174 tie
    trained[154] = 0.6300
    assert winner(chosen, auc, 0.0, speed=fast, speed_tie=0.001).number == 154  # a clear lead stands
    assert prefer_speed([], auc, fast, 0.01) == []


def test_kind_neighbours_change_one_layer_kind_and_nothing_else():
    names = {"layer0.kind": ["dcnv2", "wukong", "dlrm"], "layer1.kind": ["skip", "dcnv2", "dlrm"],
             "layer0.dcnv2.rank": ["0", "16"], "layer10.kind": ["skip", "dhen"], "emb.c1": ["0", "8"],
             "towers.kind": ["none", "two"]}  # not an interaction layer's kind: never changed
    base = {"layer0.kind": "dcnv2", "layer1.kind": "skip", "layer0.dcnv2.rank": "16", "layer10.kind": "skip",
            "emb.c1": "8", "towers.kind": "none"}
    out = kind_neighbours(base, names)
    assert len(out) == 2 + 2 + 1  # every other value of each of the three layer kinds
    for params in out:
        changed = {k for k in base if params[k] != base[k]}
        assert len(changed) == 1 and changed <= {"layer0.kind", "layer1.kind", "layer10.kind"}
    assert {p["layer1.kind"] for p in out} == {"skip", "dcnv2", "dlrm"}  # a second layer added (and kept off)
    assert base == {"layer0.kind": "dcnv2", "layer1.kind": "skip", "layer0.dcnv2.rank": "16",
                    "layer10.kind": "skip", "emb.c1": "8", "towers.kind": "none"}  # not modified
    assert kind_neighbours({"emb.c1": "8"}, {"emb.c1": ["0", "8"]}) == []  # no layer kind chosen


def test_the_rung_asks_for_its_trainings_in_order_and_restarts_only_the_leader():
    val = {("a", 0): 0.61, ("a", 1): 0.60, ("b", 0): 0.62, ("b", 1): 0.64, ("b", 2): 0.63, ("b", 3): 0.66}
    asked: list[tuple[str, int]] = []

    def auc(run: tuple[str, int]) -> float:
        asked.append(run)
        return val[run]

    best, runs = rung_runs(["a", "b"], 2, 4, auc)
    # every finalist under 2 seeds, then the leader ("b", via its 0.64) under seeds 2 and 3
    assert runs == asked == [("a", 0), ("a", 1), ("b", 0), ("b", 1), ("b", 2), ("b", 3)]
    assert best == ("b", 3)
    assert rung_runs(["a", "b"], 2, 2, val.get) == (("b", 1), runs[:4])  # no restarts past the seeds
    assert rung_runs(["a"], 1, 1, val.get) == (("a", 0), [("a", 0)])
    assert rung_runs(["a", "c"], 1, 1, val.get) is None  # "c" has no training on record


def test_halving_keeps_the_better_half_at_each_read_and_asks_only_for_the_survivors():
    val = {("a", 0): 0.60, ("b", 0): 0.63, ("c", 0): 0.61, ("d", 0): 0.62, ("e", 0): 0.59,
           ("b", 1): 0.64, ("c", 1): 0.67, ("d", 1): 0.65, ("c", 2): 0.70, ("d", 2): 0.71}
    asked: list[tuple[str, int]] = []

    def auc(f: str, read: int) -> float | None:
        asked.append((f, read))
        return val.get((f, read))

    # five finalists: three (rounded up) go on from the first read, two from the second
    best, runs = halving(list("abcde"), 3, auc)  # type: ignore[misc]
    assert best == "d" and runs == asked
    assert [f for f, read in runs if read == 1] == ["b", "d", "c"]  # by the first read's order
    assert [f for f, read in runs if read == 2] == ["c", "d"]
    assert halving(list("abcde"), 2, lambda f, r: val.get((f, r))) == ("c", runs[:8])
    # equals: the first given goes on; a record that lacks a read gives None
    assert halving(["x", "y"], 1, lambda f, r: 0.5) == ("x", [("x", 0), ("y", 0)])
    assert halving(["a", "e"], 2, lambda f, r: val.get((f, r))) is None  # a went on, (a, 1) is missing
