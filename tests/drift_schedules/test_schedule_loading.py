"""YAML/JSON round trips, validation errors that name the field, and drift-space checks."""

from __future__ import annotations

import copy
import json
import pickle
import re
from pathlib import Path

import pytest
import yaml

from sao_online.drift_schedules import (
    Choice,
    DriftState,
    DriftValueError,
    Range,
    Schedule,
    ScheduleError,
    load_schedule,
)

CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "schedules"
KINDS = {"stationary", "abrupt", "linear", "gradual", "cyclic", "random_walk", "change_points"}


def paper_dict() -> dict:
    return {
        "clock": "episodes",
        "seed": 0,
        "parameters": {
            "preferred": {
                "kind": "abrupt",
                "values": ["cute", "chuunibyou", "classical"],
                "at": [0, 1500, 3000],
            },
            "pool": {
                "kind": "abrupt",
                "values": [
                    "academic_cute_chuunibyou",
                    "academic_cute_chuunibyou",
                    "classical_cute_chuunibyou",
                ],
                "at": [0, 1500, 3000],
            },
        },
    }


# --- round trips ---------------------------------------------------------------------------


def test_examples_file_has_every_kind_and_round_trips(tmp_path):
    schedule = load_schedule(CONFIGS / "examples.yaml")
    assert {scheduler.kind for scheduler in schedule.parameters.values()} == KINDS
    data = schedule.to_dict()
    assert load_schedule(data).to_dict() == data
    written = tmp_path / "copy.yaml"
    schedule.to_yaml(written)
    reloaded = load_schedule(str(written))
    assert reloaded == schedule
    # Same seed, same draws, for every kind.
    for t in (0, 999, 1100, 1234.5, 4000):
        assert reloaded.at(t) == schedule.at(t)


def test_round_trip_keeps_integers_and_order():
    data = paper_dict()
    text = load_schedule(data).to_yaml()
    assert (
        "preferred: {kind: abrupt, values: [cute, chuunibyou, classical], at: [0, 1500, 3000]}"
        in text
    )
    assert load_schedule(data).to_dict() == data
    assert list(load_schedule(data).parameters) == ["preferred", "pool"]


def test_json_file_loads(tmp_path):
    path = tmp_path / "schedule.json"
    path.write_text(json.dumps(paper_dict()))
    assert load_schedule(path).to_dict() == paper_dict()


def test_defaults_clock_episodes_and_seed_zero():
    schedule = load_schedule({"parameters": {"x": {"kind": "stationary", "value": 1}}})
    assert (schedule.clock, schedule.seed) == ("episodes", 0)
    assert load_schedule(schedule) is schedule


def test_yaml_strings_that_look_like_other_types_survive_the_round_trip():
    data = {
        "clock": "steps",
        "seed": 3,
        "parameters": {
            "flag": {"kind": "abrupt", "values": ["yes", "no", "1.5", True], "at": [0, 1, 2, 3]},
            "odd name": {"kind": "stationary", "value": "a: b"},
        },
    }
    text = load_schedule(data).to_yaml()
    assert load_schedule(yaml.safe_load(text)).to_dict() == data


def test_to_dict_is_a_copy():
    schedule = load_schedule(paper_dict())
    data = schedule.to_dict()
    data["parameters"]["preferred"]["values"][0] = "academic"
    assert schedule.at(0).theta["preferred"] == "cute"


def test_pickled_schedule_gives_the_same_draws():
    schedule = load_schedule(CONFIGS / "examples.yaml")
    schedule.at(2500)  # warm the caches: they must not be what travels
    copied = pickle.loads(pickle.dumps(schedule))
    assert copied == schedule
    assert [copied.at(t) for t in range(0, 3000, 97)] == [
        schedule.at(t) for t in range(0, 3000, 97)
    ]


def test_stationary_constructor():
    schedule = Schedule.stationary({"preferred": "cute", "slip": 0.1})
    assert schedule.at(123) == DriftState(0, {"preferred": "cute", "slip": 0.1})
    assert schedule.change_points() == [] and schedule.phase_names() == ["phase 0"]


def test_paper_config_file():
    schedule = load_schedule(CONFIGS / "style_shift_paper.yaml")
    assert schedule.to_dict() == paper_dict()
    assert schedule.phase_names() == [
        "preferred=cute, pool=academic_cute_chuunibyou",
        "preferred=chuunibyou, pool=academic_cute_chuunibyou",
        "preferred=classical, pool=classical_cute_chuunibyou",
    ]


# --- errors that name the field ------------------------------------------------------------

ABRUPT = {"kind": "abrupt", "values": ["a", "b", "c"], "at": [0, 5, 10]}


def with_fields(base: dict, **changes) -> dict:
    spec = {**copy.deepcopy(base), **changes}
    return {name: value for name, value in spec.items() if value is not ...}


BAD_PARAMETERS = [
    ({"kind": "sudden"}, "parameters.p.kind: unknown kind 'sudden'"),
    ({"values": ["a"], "at": [0]}, "parameters.p.kind: missing field"),
    (["abrupt"], "parameters.p: expected a mapping with 'kind'"),
    (
        with_fields(ABRUPT, at=...),
        "parameters.p.at: missing field; kind abrupt needs kind, values, at",
    ),
    (with_fields(ABRUPT, period=5), "parameters.p.period: unknown field for kind abrupt"),
    (with_fields(ABRUPT, values="abc"), "parameters.p.values: expected a list"),
    (with_fields(ABRUPT, values=[]), "parameters.p.values: needs at least 1 item"),
    (with_fields(ABRUPT, values=["a", {"b": 1}, "c"]), "parameters.p.values[1]: expected a string"),
    (with_fields(ABRUPT, at=[0, "5", 10]), "parameters.p.at[1]: expected a finite number"),
    (
        with_fields(ABRUPT, at=[0, 5, 5]),
        "parameters.p.at: change points must be strictly increasing, got [0, 5, 5]",
    ),
    (with_fields(ABRUPT, at=[0, 10, 5]), "parameters.p.at: change points must be strictly"),
    (with_fields(ABRUPT, at=[1, 5, 10]), "parameters.p.at[0]: the first time must be 0"),
    (with_fields(ABRUPT, at=[0, 5]), "parameters.p.at: needs one time per value: 3 values, 2"),
    ({"kind": "stationary", "value": None}, "parameters.p.value: expected a string, number"),
    ({"kind": "linear", "from": 0, "to": 1, "start": 10, "end": 10}, "parameters.p.end: must be >"),
    (
        {"kind": "linear", "from": 0, "to": True, "start": 0, "end": 1},
        "parameters.p.to: expected a",
    ),
    (
        {"kind": "linear", "from": 0, "to": 1, "start": -1, "end": 1},
        "parameters.p.start: must be >= 0",
    ),
    (
        {"kind": "gradual", "from": "a", "to": "b", "start": 0, "width": 0},
        "parameters.p.width: must be > 0",
    ),
    (
        {"kind": "gradual", "from": "a", "to": "b", "start": float("nan"), "width": 5},
        "parameters.p.start: expected a finite number",
    ),
    ({"kind": "cyclic", "values": ["a", "b"], "period": -1}, "parameters.p.period: must be > 0"),
    ({"kind": "cyclic", "values": ["a"], "period": 5}, "parameters.p.values: needs at least 2"),
    (
        {"kind": "random_walk", "start": 0.6, "step": 0.1, "low": 0, "high": 0.5},
        "parameters.p.start: must lie in [low, high]",
    ),
    (
        {"kind": "random_walk", "start": 0, "step": 0.1, "low": 1, "high": 0},
        "parameters.p.high: must be >= low",
    ),
    (
        {"kind": "random_walk", "start": 0, "step": -0.1, "low": 0, "high": 1},
        "parameters.p.step: must be >= 0",
    ),
    ({"kind": "change_points", "values": ["a", "b"], "rate": 0}, "parameters.p.rate: must be > 0"),
]


@pytest.mark.parametrize(("spec", "message"), BAD_PARAMETERS)
def test_bad_parameter_names_the_field(spec, message):
    with pytest.raises(ScheduleError, match="^" + re.escape(message)) as raised:
        load_schedule({"parameters": {"p": spec}})
    assert isinstance(raised.value, ValueError)
    assert raised.value.field == message.split(":")[0]


BAD_DOCUMENTS = [
    (
        {"clock": "epochs", "parameters": {}},
        "clock: unknown clock 'epochs'; expected one of episodes, steps, versions, seconds",
    ),
    ({"seed": -1, "parameters": {}}, "seed: expected an integer >= 0"),
    ({"seed": True, "parameters": {}}, "seed: expected an integer >= 0"),
    ({"seed": "0", "parameters": {}}, "seed: expected an integer >= 0"),
    ({"clocks": "episodes", "parameters": {}}, "clocks: unknown field"),
    ({"clock": "episodes"}, "parameters: missing field"),
    ({"parameters": ["a"]}, "parameters: expected a mapping"),
    ({"parameters": {3: {"kind": "stationary", "value": 1}}}, "parameters: parameter names must"),
]


@pytest.mark.parametrize(("document", "message"), BAD_DOCUMENTS)
def test_bad_document_names_the_field(document, message):
    with pytest.raises(ScheduleError, match="^" + re.escape(message)):
        load_schedule(document)


def test_file_errors_name_the_field_and_the_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("parameters:\n  preferred: {kind: abrupt, values: [a, b, c], at: [0, 5, 5]}\n")
    with pytest.raises(
        ScheduleError,
        match=re.escape(
            "parameters.preferred.at: change points must be strictly increasing, got [0, 5, 5] "
            f"(in {path})"
        ),
    ):
        load_schedule(path)
    with pytest.raises(ScheduleError, match="no such schedule file"):
        load_schedule(tmp_path / "missing.yaml")
    (tmp_path / "broken.yaml").write_text("parameters: {x: [\n")
    with pytest.raises(ScheduleError, match="not valid YAML"):
        load_schedule(tmp_path / "broken.yaml")
    (tmp_path / "list.yaml").write_text("- parameters\n")
    with pytest.raises(ScheduleError, match="^expected a mapping with clock, seed, parameters"):
        load_schedule(tmp_path / "list.yaml")
    with pytest.raises(ScheduleError, match="expects a file path, a mapping or a Schedule"):
        load_schedule(42)


# --- validation against a drift space ------------------------------------------------------

SPACE = {
    "preferred": Choice(["academic", "cute", "chuunibyou", "classical"]),
    "slip": Range(0.0, 0.5),
}


def test_a_fitting_schedule_validates_and_may_leave_parameters_out():
    schedule = load_schedule(
        {
            "parameters": {
                "preferred": {"kind": "cyclic", "values": ["cute", "classical"], "period": 3},
                "slip": {
                    "kind": "random_walk",
                    "start": 0.1,
                    "step": 0.01,
                    "low": 0.0,
                    "high": 0.5,
                },
            }
        }
    )
    assert schedule.validate(SPACE) is schedule
    ramp = load_schedule(
        {"parameters": {"slip": {"kind": "linear", "from": 0, "to": 0.5, "start": 0, "end": 9}}}
    )
    assert ramp.validate(SPACE) is ramp


BAD_FOR_SPACE = [
    (
        "preferred",
        {"kind": "abrupt", "values": ["cute", "cuute"], "at": [0, 5]},
        "parameters.preferred.values[1]: value 'cuute' is not allowed; expected one of academic",
    ),
    (
        "prefered",
        {"kind": "stationary", "value": "cute"},
        "parameters.prefered: unknown drift parameter; the environment has preferred, slip",
    ),
    ("preferred", {"kind": "stationary", "value": "gothic"}, "parameters.preferred.value: value"),
    (
        "preferred",
        {"kind": "gradual", "from": "gothic", "to": "cute", "start": 0, "width": 5},
        "parameters.preferred.from: value 'gothic'",
    ),
    (
        "preferred",
        {"kind": "change_points", "values": ["cute", 3], "rate": 0.1},
        "parameters.preferred.values[1]: value 3",
    ),
    (
        "preferred",
        {"kind": "linear", "from": 0, "to": 1, "start": 0, "end": 5},
        "parameters.preferred: kind linear produces numbers in between its endpoints",
    ),
    (
        "slip",
        {"kind": "linear", "from": 0.0, "to": 0.9, "start": 0, "end": 5},
        "parameters.slip.to: value 0.9 is not allowed; expected a number in [0.0, 0.5]",
    ),
    (
        "slip",
        {"kind": "random_walk", "start": 0.1, "step": 0.1, "low": 0.0, "high": 0.9},
        "parameters.slip.high: value 0.9",
    ),
    (
        "slip",
        {"kind": "cyclic", "values": [0.1, "0.2"], "period": 4},
        "parameters.slip.values[1]: value '0.2'",
    ),
]


@pytest.mark.parametrize(("name", "spec", "message"), BAD_FOR_SPACE)
def test_values_outside_the_drift_space_name_the_parameter(name, spec, message):
    schedule = load_schedule({"parameters": {name: spec}})
    with pytest.raises(DriftValueError, match="^" + re.escape(message)):
        schedule.validate(SPACE)


def test_validate_needs_a_mapping():
    with pytest.raises(DriftValueError, match="^drift_space: expected a mapping"):
        load_schedule(paper_dict()).validate(["preferred"])
