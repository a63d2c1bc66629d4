"""Who starts the worker server early, and that a config that cannot run starts none.

``start_server_early`` itself is tested in ``test_processes.py``; here its callers are, with a
recorder in its place (no process is started).
"""

from __future__ import annotations

import pytest

from sao_online import cli
from sao_online.commands import compare as compare_command
from sao_online.config import ConfigError, load_config
from sao_online.runtime import launch
from sao_online.runtime.host import processes


@pytest.fixture
def starts(monkeypatch) -> list[str]:
    calls: list[str] = []
    record = lambda: calls.append("start")  # noqa: E731
    monkeypatch.setattr(processes, "start_server_early", record)
    monkeypatch.setattr(compare_command, "start_server_early", record)
    return calls


@pytest.mark.parametrize(("backend", "expected"), [("local", ["start"]), ("sync", [])])
def test_run_experiment_starts_it_for_the_local_backend_only(
    starts, monkeypatch, backend, expected
):
    monkeypatch.setattr(launch, "_run", lambda config, out, **kwargs: {"episodes": 0})
    launch.run_experiment(load_config(None, [f"runtime.backend={backend}"]), threads=1)
    assert starts == expected


def test_run_experiment_checks_the_config_first(starts):
    too_many = load_config(None, ["runtime.backend=local", "runtime.num_workers=4096"])
    with pytest.raises(ConfigError, match="runtime.num_workers"):
        launch.run_experiment(too_many, threads=1)
    unknown = load_config(None, ["runtime.backend=local"])
    unknown.env.id = "nowhere/Missing-v0"  # loading refuses it; a config changed in code
    with pytest.raises(ValueError, match="not a registered environment"):
        launch.run_experiment(unknown, threads=1)
    assert starts == []


def test_command_line_starts_nothing_for_a_config_that_cannot_run(starts, tmp_path, capsys):
    bad_env = tmp_path / "bad_env.yaml"
    bad_env.write_text("env: {id: nowhere/Missing-v0}\nruntime: {backend: local}\n")
    assert cli.main(["run", str(bad_env), "--out", str(tmp_path / "run")]) == 2
    assert "not a registered environment" in capsys.readouterr().err
    workers = tmp_path / "workers.yaml"
    workers.write_text("runtime: {backend: local, num_workers: 4096}\n")
    assert cli.main(["run", str(workers), "--out", str(tmp_path / "run")]) == 2
    assert "runtime.num_workers" in capsys.readouterr().err
    fine = tmp_path / "fine.yaml"
    fine.write_text("runtime: {backend: local}\n")
    arguments = ["compare", str(fine), "--seeds", "1", "--out", str(tmp_path / "cmp")]
    assert cli.main([*arguments, "--methods", "sao,nonsense"]) == 2
    assert "unknown method 'nonsense'" in capsys.readouterr().err
    assert starts == []
    assert not (tmp_path / "run").exists() and not (tmp_path / "cmp").exists()
