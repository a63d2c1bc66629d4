"""``sao-online benchmark --sweep``: what it reads, and every value it refuses, in one line and
before any run starts. (The whole sweep, run and resumed: test_benchmark_async.py.)"""

from __future__ import annotations

import textwrap

import pytest

from sao_online.benchmark.sweep import parse_sweep
from sao_online.benchmark.sweep_folder import Sweep, numeric_values
from sao_online.cli import main
from sao_online.config import ConfigError

# A method whose sequence-masked IS band is [4 x mis_low, 2): empty from mis_low = 0.5 on.
NARROW = textwrap.dedent("""
    from sao_online.algorithms import Method, RunningMeanAdvantage, SequenceMaskedIS


    def narrow_mis(cfg, max_action_tokens):
        return Method("narrow_mis", 1, RunningMeanAdvantage(),
                      SequenceMaskedIS(low=4 * cfg.mis_low, high=2.0))
""")


def test_a_sweep_is_a_field_and_its_values_each_with_its_folder():
    sweep = parse_sweep(" runtime.max_staleness = 0, 2,4 ")
    assert sweep == Sweep("runtime.max_staleness", ("0", "2", "4"))
    assert sweep.override("2") == "runtime.max_staleness=2"
    assert sweep.folder("4") == "runtime.max_staleness=4"
    assert parse_sweep("env.id=a/b:c").folder("a/b:c") == "env.id=a_b_c"
    assert numeric_values(("0", "2.5", "1.0e-3")) == [0.0, 2.5, 0.001]
    assert numeric_values(("0", "cute")) is None and numeric_values(("true",)) is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("runtime.max_staleness", "expected FIELD=V1,V2,..., e.g. runtime.max_staleness=0,2,4,8"),
        ("=0,4", "expected FIELD=V1,V2,..."),
        ("optim.lr=1e-3,,1e-4", "--sweep optim.lr: an empty value in '1e-3,,1e-4'"),
        ("optim.lr=0.5,.5", "--sweep optim.lr: .5 and 0.5 are the same value"),
        ("runtime.max_staleness=4,4.0", "--sweep runtime.max_staleness: 4.0 and 4 are the same"),
        ("env.id=a/b,a:b", "--sweep env.id: a/b and a:b would share the folder env.id=a_b"),
    ],
)
def test_a_malformed_sweep_is_refused_naming_it(text, message):
    with pytest.raises(ConfigError) as caught:
        parse_sweep(text)
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("sweep", "extra", "message"),
    [
        (
            "runtime.max_stalenes=0,4",
            [],
            "--sweep runtime.max_stalenes=0: task StyleShift: runtime.max_stalenes: unknown key; "
            "did you mean 'max_staleness'?",
        ),
        (
            "runtime.max_staleness=0,-1",
            [],
            "--sweep runtime.max_staleness=-1: task StyleShift: runtime.max_staleness: must be in",
        ),
        (
            "algorithm.mis_high=2,1",
            ["--methods", "sao_mis"],
            "--sweep algorithm.mis_high=1: task StyleShift: algorithm.mis_high: must be in (1, "
            "inf]",
        ),
        (
            "algorithm.mis_low=0.25,0.5",
            ["--methods", "my_narrow:narrow_mis"],
            "--sweep algorithm.mis_low=0.5: task StyleShift: algorithm.name: method "
            "'my_narrow:narrow_mis': the factory raised ValueError: SequenceMaskedIS: the band "
            "(low, high) = (2.0, 2.0) is empty",
        ),
        (
            "algorithm.name=sao,grpo",
            [],
            "--sweep algorithm.name=sao: task StyleShift: method grpo sets algorithm.name itself "
            "('grpo'); leave it out of --methods",
        ),
        (
            "runtime.max_staleness=0,8",
            ["--tier", "async", "--set", "budget.episodes=64"],
            "--sweep runtime.max_staleness=8: task StyleShift: runtime.max_staleness=8 is more "
            "than the 2 update(s) the budget allows",
        ),
        (  # the last value's plan is beyond the machine: refused before the first value runs
            "budget.episodes=64,900000000",
            ["--methods", "frozen"],
            "--sweep budget.episodes=900000000: the tasks' budget.episodes and model (--set): "
            "one run of",
        ),
        (
            "runtime.sim.publish_seconds=1,3",
            [],
            "--sweep runtime.sim.publish_seconds=1: task StyleShift: its config does not read "
            "runtime.sim.publish_seconds (backend sync)",
        ),
    ],
)
def test_a_value_that_cannot_run_as_given_is_refused_before_any_run(
    tmp_path, monkeypatch, capsys, sweep, extra, message
):
    (tmp_path / "my_narrow.py").write_text(NARROW)
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "sweep"
    args = ["benchmark", "--tier", "smoke", "--out", str(out), "--sweep", sweep]
    assert main([*args, *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("sao-online benchmark: error: ") and "\n" not in err
    assert message in err
    assert not out.exists()


def test_a_sweep_does_not_start_in_a_benchmarks_folder_nor_a_benchmark_in_a_sweeps(
    tmp_path, capsys
):
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    sweep = ["benchmark", "--tier", "smoke", "--sweep", "runtime.max_staleness=0,1"]
    assert main([*sweep, "--out", str(busy), "--methods", "frozen"]) == 2
    assert "is not empty and holds no sweep" in capsys.readouterr().err
    (tmp_path / "swept").mkdir()
    (tmp_path / "swept" / "sweep.json").write_text("{}")
    assert main(["benchmark", "--tier", "smoke", "--out", str(tmp_path / "swept")]) == 2
    assert "holds a sweep (--sweep with --resume continues it)" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--seeds", "0"], "--seeds: must be an integer in [1,"),
        (["--first-seed", "-1"], "--first-seed: must be an integer in [0,"),
        (["--parallel", "0"], "--parallel: must be an integer in [1,"),
        (["--address", "10.0.0.1:6379"], "--address: applies to --backend ray only"),
    ],
)
def test_an_option_no_value_could_run_with_is_refused_before_the_sweep_is_recorded(
    tmp_path, capsys, extra, message
):
    out = tmp_path / "sweep"
    args = ["benchmark", "--tier", "smoke", "--out", str(out)]
    assert main([*args, "--sweep", "runtime.max_staleness=0,1", *extra]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()  # no sweep.json: the same command, corrected, starts afresh


def test_a_field_a_tuned_suite_sets_for_one_method_is_refused_naming_the_method(tmp_path, capsys):
    import yaml

    from sao_online.benchmark.suite import suite_path

    suite = yaml.safe_load(suite_path("core").read_text())
    smoke = suite["tiers"]["smoke"]
    smoke.setdefault("tasks", {}).setdefault("StyleShift", {})["methods"] = {
        "sao": {"set": {"optim.lr": 1.0e-3}}
    }
    path = tmp_path / "tuned.yaml"
    path.write_text(yaml.safe_dump(suite, sort_keys=False))
    out = tmp_path / "sweep"
    args = ["benchmark", "--suite", str(path), "--tier", "smoke", "--methods", "sao"]
    assert main([*args, "--out", str(out), "--sweep", "optim.lr=1.0e-4,2.0e-4"]) == 2
    err = capsys.readouterr().err
    assert (
        "--sweep optim.lr=1.0e-4: task StyleShift: method sao sets optim.lr itself in the suite "
        "(0.001); leave it out of --methods" in err
    )
    assert not out.exists()


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"field": "runtime.max_staleness", "values": ["0", ', "truncated"),
        ("[1, 2]", "expected an object"),
        ("{}", "field: missing"),
        ('{"field": "runtime.max_staleness", "values": [0], "folders": {}}', "values[0]"),
        ('{"field": "runtime.max_staleness", "values": ["0"], "folders": {}}', "no folder"),
    ],
)
def test_a_damaged_sweep_file_is_named_in_one_line(tmp_path, capsys, text, problem):
    out = tmp_path / "sweep"
    out.mkdir()
    (out / "sweep.json").write_text(text)
    args = ["benchmark", "--tier", "smoke", "--out", str(out), "--methods", "frozen"]
    assert main([*args, "--sweep", "runtime.max_staleness=0,1", "--resume"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    assert str(out / "sweep.json") in err and problem in err
