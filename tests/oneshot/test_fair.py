"""Strictly fair path sampling: each step runs every value of every choice, evenly."""

from collections import Counter

import torch

from autorec.oneshot.fair import fair_paths
from autorec.supernet.mixed import Choice

CHOICES = [Choice("kind", ("dlrm", "dcnv2", "wukong", "dhen")), Choice("width", (4, 8)),
           Choice("fixed_ish", ("a", "b", "c"))]


def test_each_step_runs_every_value_of_the_widest_choice_once_and_the_others_evenly():
    generator = torch.Generator().manual_seed(0)
    for _ in range(50):
        paths = fair_paths(CHOICES, generator)
        assert len(paths) == 4
        assert sorted(p["kind"] for p in paths) == [0, 1, 2, 3]
        assert Counter(p["width"] for p in paths) == {0: 2, 1: 2}
        counts = Counter(p["fixed_ish"] for p in paths)
        assert set(counts) <= {0, 1, 2} and max(counts.values()) - min(counts.values()) <= 1


def test_pairings_vary_and_are_seeded():
    a = [fair_paths(CHOICES, torch.Generator().manual_seed(1)) for _ in range(2)]
    assert a[0] == a[1]
    generator = torch.Generator().manual_seed(1)
    steps = [tuple((p["kind"], p["width"]) for p in fair_paths(CHOICES, generator)) for _ in range(20)]
    assert len(set(steps)) > 5  # not one fixed pairing


def test_no_choices_is_one_empty_path():
    assert fair_paths([], torch.Generator()) == [{}]
