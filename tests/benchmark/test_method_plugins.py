"""Methods from a user's module (``algorithm.name: MODULE:FACTORY``): loaded where runs and
rollout workers start, and every way a factory can be wrong is one line naming the method."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest
from tiny_model import SMALLEST_MODEL, tiny_overrides

from sao_online.algorithms import MethodLoadError, build_method, load_method_factory
from sao_online.config import ConfigError, load_config
from sao_online.rundir.runlog import RunLog

PLUGINS = textwrap.dedent("""
    import os

    from sao_online.algorithms import DoubleSidedIS, Method, RunningMeanAdvantage

    RECORD = os.environ.get("PLUGIN_IMPORT_RECORD")
    if RECORD:  # every process that imports this module says so
        with open(RECORD, "a") as record:
            record.write(f"{os.getpid()}\\n")


    def window_32(cfg, max_action_tokens):
        return Method("window_32", 1, RunningMeanAdvantage(window=32),
                      DoubleSidedIS(cfg.dis_eps_low, cfg.dis_eps_high))


    def raises(cfg, max_action_tokens):
        raise RuntimeError("no GPU here")


    def not_a_method(cfg, max_action_tokens):
        return {"name": "dict"}


    def bad_name(cfg, max_action_tokens):
        return Method("a/b", 1, RunningMeanAdvantage(), DoubleSidedIS(0.3, 5.0))


    def builtin_name(cfg, max_action_tokens):
        return Method("sao", 1, RunningMeanAdvantage(), DoubleSidedIS(0.3, 5.0))


    def no_estimator(cfg, max_action_tokens):
        return Method("broken", 1, "estimator", DoubleSidedIS(0.3, 5.0))


    NOT_CALLABLE = 3
""")


@pytest.fixture
def plugin_module(tmp_path, monkeypatch):
    (tmp_path / "my_plugins.py").write_text(PLUGINS)
    (tmp_path / "broken_plugins.py").write_text("raise ImportError('needs jax')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "my_plugins"
    for name in ("my_plugins", "broken_plugins"):
        sys.modules.pop(name, None)


def test_a_factory_in_a_module_builds_the_method(plugin_module):
    config = load_config(None, [f"algorithm.name={plugin_module}:window_32"])
    method = build_method(config)
    assert method.name == "window_32" and method.group_size == 1
    assert method.estimator.window == 32 and method.updates_policy


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            "nowhere_module:make",
            "method 'nowhere_module:make': cannot import module 'nowhere_module'",
        ),
        (
            "broken_plugins:make",
            "method 'broken_plugins:make': cannot import module 'broken_plugins' (needs jax)",
        ),
        ("my_plugins:missing", "method 'my_plugins:missing': module 'my_plugins' has no 'missing'"),
        ("my_plugins:NOT_CALLABLE", "'NOT_CALLABLE' is a int, not a factory"),
        (
            "my_plugins:raises",
            "method 'my_plugins:raises': the factory raised RuntimeError: no GPU here",
        ),
        (
            "my_plugins:not_a_method",
            "the factory returned dict, not a sao_online.algorithms.Method",
        ),
        ("my_plugins:bad_name", "Method.name 'a/b' cannot name a folder"),
        ("my_plugins:builtin_name", "Method.name 'sao' is a built-in method's name"),
        ("my_plugins:no_estimator", "Method.estimator must be an advantage estimator"),
    ],
)
def test_a_wrong_factory_is_one_line_naming_the_method(plugin_module, spec, message):
    config = load_config(None, [f"algorithm.name={spec}"])
    with pytest.raises(MethodLoadError) as caught:
        build_method(config)
    text = str(caught.value)
    assert message in text and "\n" not in text
    assert text.startswith("algorithm.name: ")
    assert isinstance(caught.value, ConfigError)  # the CLI prints it as one line


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (":make", "unknown method ':make'"),
        ("not_a_builtin", "unknown method 'not_a_builtin'; choose from sao"),
    ],
)
def test_a_name_of_neither_form_is_refused_on_load(spec, message):
    with pytest.raises(ConfigError) as caught:
        load_config(None, [f"algorithm.name={spec}"])
    assert message in str(caught.value) and "MODULE:FACTORY" in str(caught.value)
    with pytest.raises(MethodLoadError, match="unknown method ':make'"):
        load_method_factory(":make")  # the registry says the same on its own


def test_built_in_names_load_without_importing_anything():
    assert load_method_factory("frozen").__name__ == "frozen"


@pytest.mark.e2e
def test_workers_of_the_local_backend_import_the_method_module(
    plugin_module, tmp_path, monkeypatch
):
    from sao_online.runtime.launch import run_experiment

    record = tmp_path / "imports.txt"
    monkeypatch.setenv("PLUGIN_IMPORT_RECORD", str(record))
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    )
    config = load_config(
        None,
        [*TINY_RUN, "runtime.backend=local", "runtime.num_workers=1"]
        + [f"algorithm.name={plugin_module}:window_32"],
    )
    summary = run_experiment(config, tmp_path / "run", threads=1)
    assert summary["method"] == "window_32" and summary["episodes"] == 16
    importers = set(record.read_text().split())
    assert str(os.getpid()) in importers  # the learner's process built the method
    assert len(importers - {str(os.getpid())}) == 1  # and the one rollout worker imported it
    saved = RunLog(tmp_path / "run").read("episodes")
    assert len(saved) == 16


TINY_RUN = tiny_overrides(
    "rollout.max_action_tokens=6",
    "rollout.max_episode_tokens=96",
    "rollout.num_slots=8",
    "runtime.backend=sync",
    "logging.checkpoint_every=0",
    "budget.episodes=16",
    model=SMALLEST_MODEL,
)


def test_a_factory_method_runs_in_the_folder_of_its_methods_name(
    plugin_module, tmp_path, monkeypatch
):
    # A run directory cannot hold ':': compare's runs of MODULE:FACTORY go in the folder of
    # the Method.name the factory returns (checked to name a folder), as a lone run's do.
    from sao_online.commands.compare import compare
    from sao_online.rundir.layout import read_config_file
    from sao_online.runtime.launch import run_experiment

    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    )
    spec = f"{plugin_module}:window_32"
    experiment = compare(
        load_config(None, [*TINY_RUN, "experiment=plugins"]),
        methods=["sao_running_mean", spec],
        seeds=1,
        out=tmp_path / "runs",
        parallel=2,
        progress=False,
    )
    assert sorted(path.name for path in experiment.iterdir()) == ["sao_running_mean", "window_32"]
    saved = read_config_file(experiment / "window_32" / "seed-0" / "config.yaml")
    assert saved["algorithm"]["name"] == spec  # the run says which factory made it
    assert len(RunLog(experiment / "window_32" / "seed-0").read("episodes")) == 16

    monkeypatch.chdir(tmp_path)  # logging.out is relative: runs/<experiment>/<method>/seed-<k>
    config = load_config(None, [*TINY_RUN, "experiment=alone", f"algorithm.name={spec}"])
    summary = run_experiment(config, threads=1)
    assert Path(summary["run_dir"]).resolve() == (tmp_path / "runs/alone/window_32/seed-0")
