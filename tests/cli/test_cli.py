import json

import pytest

from sao_online.cli import main


def test_envs_lists_ids_drift_parameters_and_descriptions(capsys):
    assert main(["envs"]) == 0
    out = capsys.readouterr().out
    assert "sao_online/StyleShift-v0" in out and "sao_online/ToolShift-v0" in out
    assert "sao_online/ReasonShift-v0" in out and "sao_online/GridShift-v1" in out
    assert "drift answer_format: one of answer, tags, boxed" in out
    assert "drift moves: one of compass, rotated, mirrored" in out
    assert "drift preferred: one of academic, cute, chuunibyou, classical" in out
    assert "drift failure: a number in [0.0, 0.5]" in out


def test_schedules_show_prints_the_timeline_and_draws_it(capsys, tmp_path):
    png = tmp_path / "timeline.png"
    assert (
        main(["schedules", "show", "configs/schedules/style_shift_paper.yaml", "--png", str(png)])
        == 0
    )
    out = capsys.readouterr().out
    assert "1500" in out and "3000" in out and "classical" in out
    assert png.stat().st_size > 1000


def test_config_errors_name_the_field_without_a_traceback(capsys, tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("algorithm: {name: sao, dis_eps_lo: 0.2}\n")
    assert main(["run", str(config)]) == 2
    err = capsys.readouterr().err
    assert "algorithm.dis_eps_lo: unknown key; did you mean 'dis_eps_low'?" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "override, field",
    [
        ("rollout.batch_size=zero", "rollout.batch_size"),
        ("algorithm.name=ppo", "algorithm.name"),
        ("runtime.backend=cluster", "runtime.backend"),
        ("algorithm.dis_eps_low=1.5", "algorithm.dis_eps_low"),
    ],
)
def test_bad_overrides_are_named(capsys, tmp_path, override, field):
    config = tmp_path / "c.yaml"
    config.write_text("experiment: x\n")
    assert main(["run", str(config), "--set", override, "--out", str(tmp_path / "run")]) == 2
    assert field in capsys.readouterr().err
    assert not (tmp_path / "run").exists()  # nothing is created for a config that fails


def test_each_bench_takes_its_own_flags_and_verbose_goes_anywhere():
    from sao_online.cli import build_parser

    parser = build_parser()
    args = parser.parse_args(["bench", "throughput", "--quick", "--peer", "trl", "--verbose"])
    assert (args.bench_command, args.quick, args.peer, args.verbose) == (
        "throughput",
        True,
        "trl",
        True,
    )
    assert parser.parse_args(["bench", "rollout", "--model", "smollm2-135m"]).model == (
        "smollm2-135m"
    )
    # --verbose after a subcommand of a subcommand, as after a command.
    assert parser.parse_args(["schedules", "show", "x.yaml", "--verbose"]).verbose is True
    assert parser.parse_args(["configs", "list", "--verbose"]).verbose is True
    for flags in (["learner", "--model", "tiny"], ["sandbox", "--max-staleness", "4"]):
        with pytest.raises(SystemExit):
            parser.parse_args(["bench", *flags])


def test_bench_rollout_quick_prints_one_json_object(capsys):
    assert main(["bench", "rollout", "--quick"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["engine"]["tokens_per_second"] > 0 and result["generate"]["tokens_per_second"] > 0
    assert result["speedup"] == pytest.approx(
        result["engine"]["tokens_per_second"] / result["generate"]["tokens_per_second"]
    )
