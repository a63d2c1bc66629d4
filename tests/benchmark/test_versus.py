"""One method against others per family, on scores built by hand."""

from __future__ import annotations

import pytest
from benchmark_synthetic import protocol, record, scores_of, write_results

from sao_online.benchmark.tables import TableSpecError, refresh
from sao_online.benchmark.versus import ALL, versus_table


def _records():
    """Frozen at 0.0, oracle 1.0: a phase-1 reward is the score. On family A, base beats other
    in every seed (0.8, 0.6, 0.7 against 0.2, 0.3, 0.1: paired differences 0.6, 0.3, 0.6);
    on family B they are equal, seed for seed."""
    out = []
    for seed, (a_base, a_other, b) in enumerate(
        [(0.8, 0.2, 0.5), (0.6, 0.3, 0.4), (0.7, 0.1, 0.6)]
    ):
        for task in ("A", "B"):
            out.append(record(task, task, "frozen", seed, [0.0, 0.0], [1.0, 1.0]))
        out.append(record("A", "A", "base", seed, [0.5, a_base], [1.0, 1.0]))
        out.append(record("A", "A", "other", seed, [0.5, a_other], [1.0, 1.0]))
        out.append(record("B", "B", "base", seed, [0.5, b], [1.0, 1.0]))
        out.append(record("B", "B", "other", seed, [0.5, b], [1.0, 1.0]))
    return out


def test_a_clear_win_and_a_tie_per_family_and_pooled():
    table = versus_table(scores_of(_records()), "base", ["other"], reps=500).set_index("family")
    assert table.loc["A", "pairs"] == 3
    assert table.loc["A", "P(base > other) [95% CI]"] == "1.00 [1.00, 1.00]"
    assert table.loc["A", "score difference, base - other [95% CI]"].startswith("0.50 [")
    assert table.loc["A", "verdict"] == "base better"
    # equal scores: P = 1/2 (ties count one half), its unpaired interval wide on 3 seeds; the
    # paired difference is exactly 0, so the effect can be no larger than 0
    assert table.loc["B", "P(base > other) [95% CI]"].startswith("0.50 [")
    assert table.loc["B", "score difference, base - other [95% CI]"] == "0.00 [0.00, 0.00]"
    assert table.loc["B", "verdict"] == "not separated; the difference is within ±0.00"
    # pooled: P = mean of the families' (1 + 0.5) / 2; the mean difference over 6 pairs 0.25
    assert table.loc[ALL, "P(base > other) [95% CI]"].startswith("0.75 [")
    assert table.loc[ALL, "score difference, base - other [95% CI]"].startswith("0.25 [")
    assert table.loc[ALL, "pairs"] == 6


def test_the_families_can_be_chosen_and_a_wrong_name_is_named():
    scores = scores_of(_records())
    table = versus_table(scores, "base", ["other"], families=["B"], reps=100)
    assert list(table["family"]) == ["B"]  # one family: no pooled row
    with pytest.raises(ValueError, match="method 'nope'"):
        versus_table(scores, "base", ["nope"], reps=100)
    with pytest.raises(ValueError, match="family C"):
        versus_table(scores, "base", ["other"], families=["A", "C"], reps=100)


def test_a_generated_versus_block(tmp_path):
    write_results(tmp_path / "bench", _records(), protocol({"A": "A", "B": "B"}, ["base", "other"]))
    block = "<!-- benchmark-table: versus bench base other A -->\n<!-- /benchmark-table -->\n"
    filled = refresh(block, tmp_path, "page.md")
    assert "| other | A | 3 | 1.00 [1.00, 1.00] |" in filled and "base better" in filled
    with pytest.raises(TableSpecError, match="versus: expected DIR BASE"):
        refresh("<!-- benchmark-table: versus bench -->\n<!-- /benchmark-table -->\n", tmp_path)
