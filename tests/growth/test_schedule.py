"""Growth schedules: phases, validation with clear errors, JSON, and schedule.json beside arch.json."""

import json

import pytest

from autorec.arch import ArchSpec, ArchSpecError
from autorec.data import Schema, SparseFeature
from autorec.growth.schedule import GrowthSchedule, Phase, ScheduleError
from autorec.presets import preset
from tests.doctests import assert_examples_run

SCHEMA = Schema(("x", "y"), (SparseFeature("u", 50), SparseFeature("i", 70)))
SPEC = preset("dcnv2", SCHEMA)


def test_examples_run():
    assert_examples_run("autorec.growth.schedule")


def test_phases_steps_and_lookup():
    s = GrowthSchedule((Phase(30, {"over_arch": 0.5, "layers.0": 0.25}), Phase(20, {"over_arch": 0.75}),
                        Phase(50)))
    assert s.total_steps == 100 and s.starts == (0, 30, 50)
    assert s.parts == ("layers.0", "over_arch")
    assert s.phase_at(0).width("layers.0") == 0.25 and s.phase_at(29).width("over_arch") == 0.5
    assert s.phase_at(30).width("layers.0") == 1.0 and s.phase_at(99).full
    with pytest.raises(IndexError, match="step 100 is outside the schedule's 100 steps"):
        s.phase_at(100)


def test_from_fractions_adds_up_and_drops_empty_phases():
    s = GrowthSchedule.from_fractions(101, [(0.33, {"over_arch": 0.5}), (0.0, {"over_arch": 0.25}),
                                            (0.67, {})])
    assert [p.steps for p in s.phases] == [33, 68] and s.total_steps == 101


def test_merged_joins_equal_neighbours():
    s = GrowthSchedule((Phase(10, {"over_arch": 0.5}), Phase(5, {"over_arch": 0.5}), Phase(5), Phase(7)))
    assert s.merged() == GrowthSchedule((Phase(15, {"over_arch": 0.5}), Phase(12)))


def test_ratio_one_is_the_default_so_equal_phases_compare_equal():
    assert Phase(5, {"over_arch": 1.0}) == Phase(5)


@pytest.mark.parametrize(("make", "message"), [
    (lambda: Phase(0), "steps: expected an integer >= 1, got 0"),
    (lambda: Phase(True), "steps: expected an integer >= 1"),
    (lambda: Phase(5, {"over_arch": 0.0}), r"widths.over_arch: expected a width ratio in \(0, 1\], got 0.0"),
    (lambda: Phase(5, {"over_arch": 1.5}), "expected a width ratio"),
    (lambda: Phase(5, {"tower": 0.5}),
     r"widths.tower: unknown part; expected dense_arch, layers.<i> or over_arch"),
    (lambda: Phase(5, {"layers.01": 0.5}), "unknown part"),
    (lambda: Phase(5, [0.5]), "expected an object of part: width ratio"),
    (lambda: GrowthSchedule(()), "schedule.phases: expected a non-empty list of phases"),
    (lambda: GrowthSchedule((Phase(5), Phase(5, {"over_arch": 0.5}))),
     r"schedule.phases\[1\]: the last phase must be at full size"),
    (lambda: GrowthSchedule((Phase(5),), method="random"),
     "schedule.method: expected one of magnitude, gates, got 'random'"),
    (lambda: GrowthSchedule(("phase",)), r"schedule.phases\[0\]: expected a Phase, got str"),
])
def test_bad_schedules_are_refused_with_the_field_at_fault(make, message):
    with pytest.raises(ScheduleError, match=message):
        make()


def test_json_round_trip_and_bad_json():
    s = GrowthSchedule((Phase(30, {"over_arch": 0.5}), Phase(20)), method="gates")
    assert GrowthSchedule.from_dict(json.loads(json.dumps(s.to_dict()))) == s
    with pytest.raises(ScheduleError, match=r"schedule.phases\[0\].steps: required key is missing"):
        GrowthSchedule.from_dict({"phases": [{"widths": {}}]})
    with pytest.raises(ScheduleError,
                       match=r"schedule.phases\[0\].length: unknown key; expected steps, widths"):
        GrowthSchedule.from_dict({"phases": [{"steps": 3, "length": 3}]})
    with pytest.raises(ScheduleError, match=r"schedule.order: unknown key; expected phases, method"):
        GrowthSchedule.from_dict({"phases": [{"steps": 3}], "order": 1})
    with pytest.raises(ScheduleError, match=r"schedule.phases\[0\].widths.over_arch: expected a width ratio"):
        GrowthSchedule.from_dict({"phases": [{"steps": 3, "widths": {"over_arch": "half"}}]})
    with pytest.raises(ScheduleError, match="schedule: expected an object with phases and method, got list"):
        GrowthSchedule.from_dict([])


def test_schedule_json_round_trips_beside_arch_json(tmp_path):
    s = GrowthSchedule((Phase(60, {"over_arch": 0.5, "layers.0": 0.5, "dense_arch": 0.25}), Phase(40)))
    s.save(tmp_path / "schedule.json")
    assert GrowthSchedule.load(tmp_path / "schedule.json", SPEC) == s
    assert "schedule" not in SPEC.to_dict()  # an ArchSpec is the architecture only


def test_an_arch_json_with_a_schedule_says_where_it_goes():
    data = SPEC.to_dict()
    data["schedule"] = GrowthSchedule.full_size(10).to_dict()
    with pytest.raises(ArchSpecError, match=r"arch.json: schedule: an arch.json holds the architecture "
                                            "only; a growth schedule goes in its own file"):
        ArchSpec.from_json(json.dumps(data))


def test_schedule_json_refuses_a_bad_schedule_naming_the_file_and_key(tmp_path):
    path = tmp_path / "schedule.json"
    path.write_text(json.dumps({"phases": [{"steps": 10, "widths": {"layers.4": 0.5}}, {"steps": 5}]}))
    with pytest.raises(ScheduleError, match=r"schedule.json: schedule.phases\[0\].widths.layers.4: the "
                                            "architecture has no such part; it has dense_arch, layers.0, "
                                            "over_arch"):
        GrowthSchedule.load(path, SPEC)
    path.write_text(json.dumps({"phases": [{"steps": 10, "widths": {"over_arch": 2}}]}))
    with pytest.raises(ScheduleError, match=r"schedule.phases\[0\].widths.over_arch: expected a width ratio"):
        GrowthSchedule.load(path)
    path.write_text("{")
    with pytest.raises(ScheduleError, match=r"schedule.json:1:2: invalid JSON"):
        GrowthSchedule.load(path)


def test_phase_specs_shrink_each_phase_and_keep_the_last_full():
    s = GrowthSchedule((Phase(60, {"over_arch": 0.5}), Phase(40)))
    small, full = s.phase_specs(SPEC)
    assert small.over_arch == tuple(w // 2 for w in SPEC.over_arch)
    assert full == SPEC
