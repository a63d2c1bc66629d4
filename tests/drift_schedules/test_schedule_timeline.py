"""The timeline as text (one line per phase) and as a PNG."""

from __future__ import annotations

from pathlib import Path

import pytest

from sao_online.drift_schedules import (
    Schedule,
    ScheduleError,
    default_horizon,
    format_timeline,
    load_schedule,
    plot_timeline,
)

CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "schedules"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_paper_timeline_text():
    text = format_timeline(load_schedule(CONFIGS / "style_shift_paper.yaml"))
    assert text.splitlines() == [
        "clock: episodes  seed: 0  3 phase(s) up to t = 4500",
        "phase  start   end  theta",
        "    0      0  1500  preferred=cute  pool=academic_cute_chuunibyou",
        "    1   1500  3000  preferred=chuunibyou  pool=academic_cute_chuunibyou",
        "    2   3000   ...  preferred=classical  pool=classical_cute_chuunibyou",
    ]


def test_timeline_stops_at_until_and_describes_ramps_and_mixtures():
    schedule = Schedule(
        {
            "slip": {"kind": "linear", "from": 0, "to": 1, "start": 100, "end": 300},
            "tool": {
                "kind": "gradual",
                "from": "calc",
                "to": "compute",
                "start": 100,
                "width": 200,
            },
        }
    )
    lines = format_timeline(schedule, until=250).splitlines()
    assert lines[0] == "clock: episodes  seed: 0  3 phase(s) up to t = 250"
    assert lines[2:] == [
        # p(100) = sigmoid(-4) = 0.018, p(200) = 0.5, p(250) = sigmoid(2) = 0.88.
        "    0      0  100  slip=0  tool=calc|compute (p(compute) 0.00->0.02)",
        "    1    100  200  slip=0->0.5  tool=calc|compute (p(compute) 0.02->0.50)",
        "    2    200  ...  slip=0.5->0.75  tool=calc|compute (p(compute) 0.50->0.88)",
    ]


def test_default_horizon():
    assert default_horizon(load_schedule(CONFIGS / "style_shift_paper.yaml")) == 4500
    assert default_horizon(Schedule.stationary({"x": 1})) == 100
    cyclic = Schedule({"goal": {"kind": "cyclic", "values": ["n", "s"], "period": 500}})
    assert default_horizon(cyclic) == 2000  # two full cycles
    random_changes = Schedule({"mix": {"kind": "change_points", "values": [0, 1], "rate": 0.001}})
    assert default_horizon(random_changes) == 5000  # about five changes
    assert default_horizon(load_schedule(CONFIGS / "examples.yaml")) == 5000


def test_unbounded_schedules_get_a_timeline_without_until():
    text = format_timeline(
        Schedule({"goal": {"kind": "cyclic", "values": ["n", "s"], "period": 500}})
    )
    assert text.splitlines()[0] == "clock: episodes  seed: 0  4 phase(s) up to t = 2000"
    assert text.splitlines()[-1] == "    3   1500   ...  goal=s"


@pytest.mark.parametrize("until", [0, -5])
def test_bad_until_is_an_error(until):
    with pytest.raises(ValueError, match="^until"):
        format_timeline(Schedule.stationary({"x": 1}), until=until)


def test_plot_writes_a_png_for_every_kind(tmp_path):
    written = plot_timeline(load_schedule(CONFIGS / "examples.yaml"), tmp_path / "out" / "all.png")
    assert written == tmp_path / "out" / "all.png"
    content = written.read_bytes()
    assert content.startswith(PNG_SIGNATURE) and len(content) > 20_000


def test_plot_handles_numeric_steps_seconds_and_no_parameters(tmp_path):
    schedule = Schedule(
        {
            "level": {"kind": "abrupt", "values": [1, 3, 2], "at": [0, 2.5, 7]},
            "noise": {"kind": "gradual", "from": 0.0, "to": 0.4, "start": 1, "width": 4},
        },
        clock="seconds",
    )
    for path in (
        plot_timeline(schedule, tmp_path / "numeric.png", until=10),
        plot_timeline(Schedule({}), tmp_path / "empty.png"),
    ):
        assert path.read_bytes().startswith(PNG_SIGNATURE)
    with pytest.raises(ScheduleError, match="^until"):
        plot_timeline(schedule, tmp_path / "never.png", until=float("nan"))
