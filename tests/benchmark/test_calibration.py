"""The calibration checks (learnable, the shift costs) on result tables built by hand."""

from __future__ import annotations

import pandas as pd
import pytest
from benchmark_synthetic import protocol, record, scores_of, write_results

from sao_online.benchmark import calibration
from sao_online.benchmark.scorecard import write_scorecard
from sao_online.benchmark.tables import refresh


def _records():
    return [
        # Good: frozen 0.4 -> 0.1 (shortfall 0.6 -> 0.9, +0.3 in both seeds); a scores
        # (0.85 - 0.4) / 0.6 = 0.75 and (0.67 - 0.4) / 0.6 = 0.45 on phase 0: mean 0.6.
        record("Good", "G", "frozen", 0, [0.4, 0.1], [1.0, 1.0]),
        record("Good", "G", "frozen", 1, [0.4, 0.1], [1.0, 1.0]),
        record("Good", "G", "a", 0, [0.85, 0.5], [1.0, 1.0]),
        record("Good", "G", "a", 1, [0.67, 0.5], [1.0, 1.0]),
        # Flat: the shift costs frozen +0.2 on seed 0 and -0.05 on seed 1 (mean +0.075):
        # neither enough on average nor in every seed; a's mean phase-0 score is 0.25.
        record("Flat", "F", "frozen", 0, [0.5, 0.3], [1.0, 1.0]),
        record("Flat", "F", "frozen", 1, [0.5, 0.55], [1.0, 1.0]),
        record("Flat", "F", "a", 0, [0.625, 0.6], [1.0, 1.0]),
        record("Flat", "F", "a", 1, [0.625, 0.6], [1.0, 1.0]),
        # Solved: the warm start is at the oracle in phase 0 (not scored), so learnability is
        # judged on phase 1: (0.75 - 0.2) / (0.9 - 0.2) = 0.786. The oracle drops to 0.9
        # after the shift and frozen to 0.2: the shortfall goes 0.0 -> 0.7.
        record("Solved", "S", "frozen", 0, [1.0, 0.2], [1.0, 0.9]),
        record("Solved", "S", "a", 0, [1.0, 0.75], [1.0, 0.9]),
    ]


def test_each_check_is_decided_on_hand_computed_numbers():
    table = calibration.checks(scores_of(_records()), "frozen").set_index("task")
    assert table.loc["Good", "learnable"] == "yes"
    assert table.loc["Good", "best score (phase)"] == "a 0.60 (phase 0)"
    assert table.loc["Good", "shift costs"] == "yes"
    assert table.loc["Good", "frozen shortfall: phase 0 -> 1"] == (
        "0.600 -> 0.900 (+0.300; seeds +0.300 to +0.300)"
    )
    assert table.loc["Flat", "learnable"] == "no"
    assert table.loc["Flat", "best score (phase)"] == "a 0.25 (phase 0)"
    assert table.loc["Flat", "shift costs"] == "no"
    assert table.loc["Flat", "frozen shortfall: phase 0 -> 1"] == (
        "0.500 -> 0.575 (+0.075; seeds -0.050 to +0.200)"
    )
    assert table.loc["Solved", "learnable"] == "yes"
    assert table.loc["Solved", "best score (phase)"] == "a 0.79 (phase 1)"
    assert table.loc["Solved", "shift costs"] == "yes"
    # What to change, where a check fails: the settings that fix it, by name.
    assert table.loc["Good", "what to change"] == "nothing"
    assert table.loc["Flat", "what to change"] == (
        "a longer first phase, or optim.lr / regularizers.kl_coef; a warm start leaning to the "
        "first regime: model.warm_start_oracle_share > 0"
    )


def test_a_scorecard_led_by_the_floor_points_to_the_calibration(tmp_path):
    records = [
        record("T", "F", method, seed, [0.5, 0.5 - drop], [1.0, 1.0])
        for method, drop in (("frozen", 0.0), ("a", 0.2))
        for seed in (0, 1)
    ]
    write_results(tmp_path, records, protocol({"T": "F"}, ["frozen", "a"]))
    text = write_scorecard(tmp_path, reps=50).read_text()
    assert "`frozen` ranks first: no method scores above the warm start" in text
    assert "model.warm_start_oracle_share: 0" in text
    assert "Not learnable: no method got far enough in the first phase" in text


def test_a_shift_that_costs_on_average_but_not_in_every_seed_does_not_count():
    records = [
        record("T", "F", "frozen", 0, [0.5, 0.0], [1.0, 1.0]),  # +0.5
        record("T", "F", "frozen", 1, [0.5, 0.55], [1.0, 1.0]),  # -0.05: mean +0.225
        record("T", "F", "a", 0, [0.9, 0.9], [1.0, 1.0]),
    ]
    assert calibration.checks(scores_of(records), "frozen").loc[0, "shift costs"] == "no"


def test_the_phase_table_shows_floor_oracle_and_each_method_over_seeds():
    table = calibration.phase_table(scores_of(_records()), ["a", "frozen"], "frozen")
    good = table[table["task"] == "Good"].set_index("phase")
    assert list(table.columns) == ["task", "phase", "frozen reward", "oracle", "a"]
    assert good.loc["0: regime 0", "a"] == "0.60 [0.45, 0.75]"
    assert good.loc["0: regime 0", "frozen reward"] == "0.400"
    assert good.loc["1: regime 1", "a"] == "0.44 [0.44, 0.44]"  # (0.5 - 0.1) / 0.9
    solved = table[table["task"] == "Solved"].set_index("phase")
    assert solved.loc["0: regime 0", "a"] == "not scored"


def test_the_scorecard_and_a_generated_table_carry_the_calibration(tmp_path):
    records = _records()
    out = write_results(
        tmp_path / "bench", records, protocol({"Good": "G", "Flat": "F", "Solved": "S"}, ["a"])
    )
    text = write_scorecard(out, reps=50).read_text()
    assert "## Calibration" in text and "| Flat | no | a 0.25 (phase 0) | no |" in text
    page = tmp_path / "page.md"
    block = "<!-- benchmark-table: calibration bench -->\n<!-- /benchmark-table -->\n"
    filled = refresh(block, tmp_path, str(page))
    assert "| Good | yes | a 0.60 (phase 0) | yes |" in filled
    assert "| Solved | 1: regime 1 | 0.200 | 0.900 | 0.79 [0.79, 0.79] |" in filled


def _curve(task, method, seed, rewards, width=10):
    return [
        {
            "task": task,
            "method": method,
            "seed": seed,
            "start": float(i * width),
            "end": float((i + 1) * width),
            "episodes": width,
            "reward_mean": r,
        }
        for i, r in enumerate(rewards)
    ]


def test_the_drop_at_the_first_shift_compares_the_quarters_around_it():
    # shift at 80 of 160 (8 bins of 10 each side): last quarter before = bins 60-79, first
    # quarter after = bins 80-99. a: (0.8 + 0.6) / 2 - (0.1 + 0.3) / 2 = 0.5 on seed 0,
    # 0.7 - 0.6 = 0.1 on seed 1: mean 0.3. b never drops.
    curves = pd.DataFrame(
        _curve("T", "a", 0, [0.0] * 6 + [0.8, 0.6] + [0.1, 0.3] + [0.5] * 6)
        + _curve("T", "a", 1, [0.0] * 6 + [0.7, 0.7] + [0.6, 0.6] + [0.5] * 6)
        + _curve("T", "b", 0, [0.2] * 16)
        + _curve("T", "frozen", 0, [0.9] * 8 + [0.0] * 8)
    )
    shifts = pd.DataFrame(
        [
            {"task": "T", "method": m, "seed": s, "shift": 1, "tau": 80.0}
            for m, s in [("a", 0), ("a", 1), ("b", 0), ("frozen", 0)]
        ]
    )
    drops = calibration.shift_drops(curves, shifts).set_index(["method", "seed"])["drop"]
    assert drops[("a", 0)] == pytest.approx(0.5)
    assert drops[("a", 1)] == pytest.approx(0.1)
    assert drops[("b", 0)] == pytest.approx(0.0)
    largest = calibration._largest_drop(calibration.shift_drops(curves, shifts), "frozen")
    assert largest == {  # frozen drops 0.9 but is not an adapted method
        "costs an adapted method": "yes",
        "largest drop at shift 1": "a 0.30 (seeds 0.10 to 0.50)",
    }
    # a second shift ends the window after the first: shift 2 at 120 -> quarter 80-89
    second = pd.concat(
        [shifts, pd.DataFrame([{"task": "T", "method": "a", "seed": 0, "shift": 2, "tau": 120.0}])]
    )
    drops = calibration.shift_drops(curves, second).set_index(["method", "seed"])["drop"]
    assert drops[("a", 0)] == pytest.approx(0.7 - 0.1)
