"""Bundled configs by name (``sao-online run smoke`` from any folder), ``configs list`` and
``configs copy``, and the names a user types checked with a suggestion."""

from __future__ import annotations

import pytest
import yaml

from sao_online.cli import main
from sao_online.config import load_config
from sao_online.config.bundled import bundled_configs, configs_folder, resolve_config
from sao_online.drift_schedules import load_schedule


@pytest.mark.parametrize("name", ["smoke", "smoke.yaml", "configs/smoke.yaml", "configs/smoke"])
def test_a_bundled_config_is_found_by_name_from_any_folder(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no configs/ folder here
    assert resolve_config(name) == configs_folder() / "smoke.yaml"
    assert resolve_config("schedules/style_shift_demo").name == "style_shift_demo.yaml"


def test_a_file_that_exists_wins_over_a_bundled_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "smoke.yaml").write_text("experiment: mine\n")
    assert resolve_config("smoke.yaml").resolve() == tmp_path / "smoke.yaml"
    assert load_config(str(resolve_config("smoke.yaml"))).experiment == "mine"


def test_an_unknown_name_suggests_the_closest_and_lists_the_bundled_ones(capsys, tmp_path):
    with pytest.raises(FileNotFoundError) as error:
        resolve_config("smok")
    message = str(error.value)
    assert message.startswith("config file not found: smok (did you mean 'smoke'?)")
    assert all(name in message for name in bundled_configs())
    assert main(["run", "dmeo", "--out", str(tmp_path / "run")]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("sao-online run: error: config file not found: dmeo (did you mean")
    assert not (tmp_path / "run").exists()


def test_configs_list_names_and_describes_every_bundled_config(capsys):
    assert main(["configs", "list"]) == 0
    out = capsys.readouterr().out
    lines = {line.split()[0]: line for line in out.splitlines() if line.strip()}
    for name in bundled_configs():
        assert name in lines and len(lines[name].split(None, 1)[1]) > 20, name
    assert lines["demo"].split(None, 1)[1].startswith("The demo (`make demo`)")


def test_configs_copy_brings_the_schedule_file_and_loads_as_the_original(
    capsys, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    assert main(["configs", "copy", "demo", "mine"]) == 0
    assert (tmp_path / "mine" / "demo.yaml").is_file()
    assert (tmp_path / "mine" / "schedules" / "style_shift_demo.yaml").is_file()
    out = capsys.readouterr().out
    assert "run it: sao-online run mine/demo.yaml" in out
    copy = load_config(str(tmp_path / "mine" / "demo.yaml")).to_dict()
    original = load_config(str(resolve_config("demo"))).to_dict()
    assert copy.pop("schedule") != original.pop("schedule")  # paths: the copy's own file
    assert copy == original
    # The copy reads its own schedule: editing it changes the run.
    schedule = tmp_path / "mine" / "schedules" / "style_shift_demo.yaml"
    schedule.write_text(schedule.read_text().replace("1000", "900"))
    edited = load_schedule(load_config(str(tmp_path / "mine" / "demo.yaml")).schedule)
    assert edited.change_points(until=3000)[0] == 900
    assert main(["configs", "copy", "demo", "mine"]) == 2  # never replaces an edited copy
    assert "already exist" in capsys.readouterr().err
    assert main(["configs", "copy", "demo", "mine", "--force"]) == 0
    assert main(["configs", "copy", "smoke", "solo.yaml"]) == 0  # a file name
    assert yaml.safe_load((tmp_path / "solo.yaml").read_text())["experiment"] == "smoke"
    assert main(["configs", "copy", "smokee"]) == 2
    assert "(did you mean 'smoke'?)" in capsys.readouterr().err


def test_run_and_schedules_show_take_bundled_names(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["schedules", "show", "schedules/style_shift_paper"]) == 0
    assert "1500" in capsys.readouterr().out
    args = ["run", "smoke", "--set", "model.warm_start=false", "--set", "budget.episodes=16"]
    assert main([*args, "--threads", "1", "--set", f"logging.out={tmp_path / 'runs'}"]) == 0
    assert (tmp_path / "runs" / "smoke" / "sao" / "seed-0" / "episodes.parquet").is_dir()


@pytest.mark.parametrize(
    "args, expected",
    [
        (
            ["--set", "algorithm.name=grpoo"],
            "algorithm.name: unknown method 'grpoo' (did you mean 'grpo'?); choose from sao, ",
        ),
        (
            ["--set", "env.id=sao_online/StyleShift-v1"],
            "env.id: 'sao_online/StyleShift-v1': not a "
            "registered environment (did you mean 'sao_online/StyleShift-v0'?)",
        ),
    ],
)
def test_a_misspelt_method_or_env_id_gets_a_suggestion(capsys, tmp_path, args, expected):
    assert main(["run", "smoke", *args, "--out", str(tmp_path / "run")]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"sao-online run: error: {expected}")
    assert not (tmp_path / "run").exists()


def test_compare_checks_method_names_with_a_suggestion(capsys, tmp_path):
    assert main(["compare", "smoke", "--methods", "sao,dr_grpo2", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--methods: unknown method 'dr_grpo2' (did you mean 'dr_grpo'?)" in err


def test_version_and_the_method_names_in_help(capsys):
    from sao_online import __version__

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"sao-online {__version__}"
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    from sao_online.algorithms import METHODS

    help_text = " ".join(capsys.readouterr().out.split())
    assert ", ".join(METHODS) in help_text
