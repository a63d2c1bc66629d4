"""The README's Python API example run as a user runs it (a script in its own process), the
API's config forms, and the error for a script without a ``__main__`` guard."""

from __future__ import annotations

import multiprocessing
import os
import re
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from sao_online.api import as_config
from sao_online.config import ConfigError, ExperimentConfig
from sao_online.runtime.host import main_guard
from sao_online.runtime.host.main_guard import MissingMainGuardError, require_main_guard

ROOT = Path(__file__).resolve().parent.parent


def readme_api_example() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Python API", 1)[1].split("\n## ", 1)[0]
    [block] = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    return block


def run_script(path: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "SAO_ONLINE_CACHE": str(path.parent / "cache")}
    return subprocess.run(
        [sys.executable, str(path)],
        cwd=path.parent,
        env=env,
        timeout=timeout,
        capture_output=True,
        text=True,
    )


@pytest.mark.e2e
def test_the_readme_example_runs_compares_and_reports(tmp_path):
    script = tmp_path / "example.py"
    script.write_text(readme_api_example())
    result = run_script(script)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (
        "sao_running_mean 64 episodes in runs/api_example/sao_running_mean/seed-0" in result.stdout
    )
    assert "report: runs/api_example/report/report.md" in result.stdout
    runs = tmp_path / "runs" / "api_example"
    for method in ("sao", "grpo"):
        for seed in (0, 1):
            assert (runs / method / f"seed-{seed}" / "config.yaml").exists()
    report = (runs / "report" / "report.md").read_text()
    assert "sao_running_mean" in report and "grpo" in report


@pytest.mark.e2e
def test_a_script_without_a_main_guard_stops_at_once_saying_why(tmp_path):
    script = tmp_path / "unguarded.py"
    script.write_text(
        textwrap.dedent("""
        from sao_online.api import run
        run({"runtime": {"backend": "local"}, "budget": {"episodes": 8}})
    """)
    )
    result = run_script(script, timeout=120)
    assert result.returncode != 0
    assert "MissingMainGuardError" in result.stderr
    assert 'put the code that starts runs under `if __name__ == "__main__":`' in result.stderr
    assert "died" not in result.stderr and not (tmp_path / "runs").exists()


def test_the_guard_check_reads_the_main_script_and_the_spawn_import(tmp_path, monkeypatch):
    guarded, unguarded = tmp_path / "a.py", tmp_path / "b.py"
    guarded.write_text("if __name__ == '__main__':\n    pass\n")
    unguarded.write_text("print('hi')\n")
    monkeypatch.setitem(sys.modules, "__main__", types.SimpleNamespace(__file__=str(guarded)))
    require_main_guard("compare")
    monkeypatch.setitem(sys.modules, "__main__", types.SimpleNamespace(__file__=str(unguarded)))
    with pytest.raises(MissingMainGuardError, match=r"compare starts processes .*/b\.py again"):
        require_main_guard("compare")
    monkeypatch.setitem(sys.modules, "__main__", types.SimpleNamespace())  # a notebook
    require_main_guard("compare")
    # A spawned child importing the parent's script: refused even if the text has a guard.
    monkeypatch.setattr(main_guard.multiprocessing, "parent_process", lambda: object())
    monkeypatch.setattr(multiprocessing.current_process(), "_inheriting", True, raising=False)
    with pytest.raises(MissingMainGuardError):
        require_main_guard("the local backend")


def test_as_config_takes_a_path_a_dict_or_a_config_and_applies_overrides(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("experiment: x\nbudget: {episodes: 64}\n")
    from_path = as_config(path, ["algorithm.name=grpo"])
    from_dict = as_config({"experiment": "x", "budget": {"episodes": 64}}, ["algorithm.name=grpo"])
    from_object = as_config(
        ExperimentConfig(), ["budget.episodes=64", "experiment=x", "algorithm.name=grpo"]
    )
    assert from_path == from_dict
    # A config object has every field set, the paper's KL 0 included: the tiny model's preset
    # (sao_online.config.model_presets) fills in only what a YAML file or dict leaves out.
    assert (from_dict.regularizers.kl_coef, from_object.regularizers.kl_coef) == (0.6, 0.0)
    from_object.regularizers.kl_coef = 0.6
    assert from_object == from_dict
    assert from_path.algorithm.name == "grpo" and from_path.budget.episodes == 64
    with pytest.raises(ConfigError, match=r"budget.episodes: must be in \[1, "):
        as_config(ExperimentConfig(), ["budget.episodes=0"])


@pytest.mark.parametrize(
    ("seeds", "first_seed", "message"),
    [
        (0, 0, r"--seeds: must be an integer in \[1, 10000\], got 0"),
        (2, -1, r"--first-seed: must be an integer in \[0, 4294967294\], got -1"),
    ],
)
def test_compare_names_a_bad_seed_range_before_starting_anything(
    tmp_path, seeds, first_seed, message
):
    from sao_online.commands.compare import compare

    with pytest.raises(ConfigError, match=message):
        compare(
            Path(__file__).parents[1] / "configs" / "smoke.yaml",
            methods=["sao"],
            seeds=seeds,
            first_seed=first_seed,
            out=tmp_path,
            progress=False,
        )
    assert list(tmp_path.iterdir()) == []
