"""``sao-online init task NAME``: a task module and a config that load, check and run."""

from __future__ import annotations

import importlib
import sys

import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env
from tiny_model import SMALLEST_MODEL

from sao_online.cli import main
from sao_online.commands.init_task import TEMPLATE_EPISODES, TEMPLATE_SHIFT, class_name_for
from sao_online.config import load_config
from sao_online.config.run_schedule import resolve_schedule


@pytest.fixture
def written_task(tmp_path, monkeypatch, capsys):
    """``init task colour_probe`` in an empty folder, which is then the current one."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))  # as the command line does for the cwd
    assert main(["init", "task", "colour_probe"]) == 0
    out = capsys.readouterr().out
    yield tmp_path, out
    sys.modules.pop("colour_probe", None)
    gymnasium.registry.pop("colour_probe/ColourProbe-v0", None)


def test_init_task_writes_a_module_and_a_config_and_says_what_to_run(written_task):
    folder, out = written_task
    assert (folder / "colour_probe.py").is_file() and (folder / "colour_probe.yaml").is_file()
    assert "sao-online compare colour_probe.yaml --methods sao,grpo --seeds 3" in out
    assert "sao-online report runs/colour_probe" in out


def test_the_template_task_passes_the_gymnasium_checks_and_drifts(written_task):
    importlib.import_module("colour_probe")
    env = gymnasium.make("colour_probe/ColourProbe-v0")
    check_env(env.unwrapped, skip_render_check=True)
    unwrapped = env.unwrapped
    for paying in ("red", "green", "blue"):
        observation, info = env.reset(seed=1, options={"drift": {"paying": paying}})
        assert observation == "Name one colour: red, green, blue."
        action = unwrapped.oracle_action(observation, info)
        _, reward, terminated, _, info = env.step(action)
        assert (action, reward, terminated, info["behavior"]) == (paying, 1.0, True, paying)
        assert unwrapped.oracle_reward(info["theta"]) == 1.0
    env.reset(seed=2, options={"drift": {"paying": "blue"}})
    assert env.step("Red.")[1:3] == (0.0, True)  # a known colour, not the paying one
    env.reset(seed=3)
    _, reward, _, _, info = env.step("\x00" * 900)  # garbage: a defined reward, no exception
    assert (reward, info["behavior"]) == (0.0, "other")
    # The warm start is shown every colour, so it does not know which one pays.
    env.reset(seed=4)
    shown = {unwrapped.demonstration_action("", {}) for _ in range(60)}
    assert shown == {"red", "green", "blue"}


def test_the_template_config_loads_with_the_tiny_preset_and_its_shift_inside(written_task):
    config = load_config("colour_probe.yaml")
    assert config.env.id == "colour_probe:colour_probe/ColourProbe-v0"
    assert config.regularizers.kl_coef == 0.6  # the tiny model's preset: the config sets none
    assert config.budget.episodes == TEMPLATE_EPISODES
    schedule = resolve_schedule(config)
    assert schedule.change_points(until=TEMPLATE_EPISODES) == [TEMPLATE_SHIFT]
    assert schedule.at(0).theta == {"paying": "red"}
    assert schedule.at(TEMPLATE_SHIFT).theta == {"paying": "blue"}


def test_the_template_runs_from_the_command_line(written_task, capsys):
    folder, _ = written_task
    args = ["run", "colour_probe.yaml", "--threads", "1", "--out", str(folder / "run")]
    small = [*SMALLEST_MODEL, "budget.episodes=64", "schedule.parameters.paying.at=[0, 32]"]
    assert main([*args, *(f"--set={item}" for item in small)]) == 0
    from sao_online.rundir.runlog import RunLog

    episodes = RunLog(folder / "run").read("episodes")
    assert len(episodes) == 64 and set(episodes["phase"]) == {0, 1}
    assert set(episodes["behavior"]) <= {"red", "green", "blue", "other", ""}  # "": cut by a cap


@pytest.mark.parametrize("name", ["My-Task", "class", "9lives", ""])
def test_a_name_that_cannot_be_a_module_is_refused(name, tmp_path, capsys):
    assert main(["init", "task", name, "--dir", str(tmp_path)]) == 2
    assert "cannot name a task module" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_existing_files_are_kept_unless_forced(tmp_path, capsys):
    (tmp_path / "my_task.py").write_text("# mine\n")
    assert main(["init", "task", "my_task", "--dir", str(tmp_path)]) == 2
    assert "my_task.py already exists (--force replaces them)" in capsys.readouterr().err
    assert (tmp_path / "my_task.py").read_text() == "# mine\n"
    assert not (tmp_path / "my_task.yaml").exists()
    assert main(["init", "task", "my_task", "--dir", str(tmp_path), "--force"]) == 0
    assert "class MyTask(DriftingTextEnv)" in (tmp_path / "my_task.py").read_text()
    assert class_name_for("grid_walk_2") == "GridWalk2"
