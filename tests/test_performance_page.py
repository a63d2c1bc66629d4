"""docs/performance.md: its tables are the kept results, rendered, and stay in step with them."""

import json

import pytest

from sao_online.commands import performance_page
from sao_online.commands.performance_page import PAGE, render


def test_the_pages_tables_are_generated_from_the_kept_results():
    page = PAGE.read_text()
    assert page.count("<!-- table: ") == len(performance_page.TABLES)
    assert render(page) == page, "run: python -m sao_online.commands.performance_page"
    assert performance_page.main(["--check"]) == 0


def _learner_result():
    row = {"seconds_per_update": 2.0, "cpu_seconds_per_update": 1.0}
    sao = {
        **row,
        "seconds_per_update": 3.0,
        "critic_lane_cpu_seconds": 1.2,
        "policy_lane_cpu_seconds": 0.9,
    }
    return {
        "per_method": {"sao": sao, "sao_running_mean": row},
        "ratio_to_running_mean": {"sao": 1.5, "sao_running_mean": 1.0},
        "cpu_ratio_to_running_mean": {"sao": 2.1, "sao_running_mean": 1.0},
        "sao": {
            "ratio_to_running_mean": 1.5,
            "in_line_ratio_to_running_mean": 2.2,
            "critical_path_cpu_over_running_mean": 1.234,
            "target_ratio_to_running_mean": 1.3,
        },
    }


def test_a_table_shows_its_files_numbers_and_command(tmp_path):
    kept = {"command": "sao-online bench learner", "load": "load 5", "result": _learner_result()}
    (tmp_path / "bench_learner.json").write_text(json.dumps(kept))
    page = "# P\n<!-- table: learner -->\nstale\n<!-- end table -->\nafter\n"
    rendered = render(page, tmp_path)
    assert "stale" not in rendered and rendered.endswith("<!-- end table -->\nafter\n")
    assert "| `sao` | 3.000 | 1.50x | 1.000 | 2.10x | 1.200 / 0.900 |" in rendered
    assert "is 1.23x the running mean's CPU time (target 1.30x)" in rendered
    assert "Command: `sao-online bench learner`; load 5." in rendered
    assert render(rendered, tmp_path) == rendered


def test_unknown_tables_and_missing_files_are_named(tmp_path):
    with pytest.raises(ValueError, match="unknown table 'speed'"):
        render("<!-- table: speed -->\n<!-- end table -->\n", tmp_path)
    with pytest.raises(ValueError, match="no kept result .*bench_learner.json"):
        render("<!-- table: learner -->\n<!-- end table -->\n", tmp_path)
