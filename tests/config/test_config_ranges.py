"""Config values that would train wrongly, hang or blow up: each refused on load, named."""

from __future__ import annotations

import functools
import math
import types
import typing
import warnings

import annotated_types
import pytest
from pydantic import BaseModel
from tiny_model import SMALLEST_MODEL, tiny_overrides

from sao_online.config import ConfigError, ConfigWarning, ExperimentConfig, load_config
from sao_online.rundir.layout import RunDirError, run_directory
from sao_online.runtime.host.machine_fit import check_machine_fit
from sao_online.runtime.launch import run_experiment

LOW, HIGH = (annotated_types.Ge, annotated_types.Gt), (annotated_types.Le, annotated_types.Lt)
#: The fields where infinity means "no bound": no upper edge of a band, no truncation.
INFINITY_MEANS_NO_BOUND = {"algorithm.dis_eps_high", "algorithm.tis_cap", "algorithm.mis_high"}


def _constraints(annotation):
    """(base type, constraints) of a possibly Annotated type."""
    found = []
    while typing.get_origin(annotation) is typing.Annotated:
        annotation, *extras = typing.get_args(annotation)
        for extra in extras:
            found.extend(getattr(extra, "metadata", None) or [extra])
    return annotation, found


def numeric_slots(model=ExperimentConfig, prefix=""):
    """(path, int or float, constraints) of every number a config holds: fields, the members of
    ``X | None`` and unions, list items (``path[*]``) and mapping values (``path[*]``)."""
    for name, spec in model.model_fields.items():
        path = prefix + name
        if isinstance(spec.annotation, type) and issubclass(spec.annotation, BaseModel):
            yield from numeric_slots(spec.annotation, path + ".")
            continue
        base, outer = _constraints(spec.annotation)
        union = typing.get_origin(base) in (typing.Union, types.UnionType)
        for member in typing.get_args(base) if union else (base,):
            kind, inner = _constraints(member)
            if typing.get_origin(kind) in (list, dict):
                kind, inner = _constraints(typing.get_args(kind)[-1])
                if kind in (int, float):
                    yield f"{path}[*]", kind, inner
            elif kind in (int, float):
                yield path, kind, [*spec.metadata, *outer, *inner]


def test_every_numeric_field_has_a_range():
    slots = {path: constraints for path, _, constraints in numeric_slots()}
    assert {"optim.max_grad_norm", "seed", "runtime.torch_threads", "optim.betas[*]"} <= set(slots)
    assert all(any(isinstance(c, LOW) for c in found) for found in slots.values())
    unbounded = {p for p, found in slots.items() if not any(isinstance(c, HIGH) for c in found)}
    # Infinity means "no upper band"; a Ray resource is whatever amount a cluster declares.
    assert unbounded == INFINITY_MEANS_NO_BOUND | {"runtime.ray_worker_resources[*]"}


def scalar_numbers():
    return [(path, kind, found) for path, kind, found in numeric_slots() if "[" not in path]


# What the largest value of these needs from other fields (a group divides the batch; the
# staleness bound is lowered to the updates the budget allows).
COMPANIONS = {
    "algorithm.group_size": ["rollout.batch_size=4096"],
    "runtime.max_staleness": ["rollout.batch_size=1", "budget.episodes=1000000000"],
    "budget.start": ["budget.episodes=1000000000"],  # a run starts before its budget ends
}


@pytest.mark.parametrize(
    ("path", "kind", "found"), [pytest.param(*slot, id=slot[0]) for slot in scalar_numbers()]
)
def test_each_range_is_enforced_at_both_ends(path, kind, found):
    low = next(c for c in found if isinstance(c, LOW))
    high = next((c for c in found if isinstance(c, HIGH)), None)
    ends = [(low, getattr(low, "ge", None), getattr(low, "gt", None), -1)]
    if high is not None:
        ends.append((high, getattr(high, "le", None), getattr(high, "lt", None), 1))
    for _, closed, opened, direction in ends:
        edge = closed if closed is not None else opened
        step = 1 if kind is int else max(abs(edge), 1) * 1e-6
        outside = edge if closed is None else edge + direction * step
        with pytest.raises(ConfigError) as caught:
            load_config(None, [f"{path}={outside!r}"])
        assert str(caught.value).startswith(f"{path}: "), str(caught.value)
        assert f"{float(edge):g}" in str(caught.value)
        if closed is not None:  # the bound itself is allowed
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConfigWarning)
                loaded = load_config(None, [f"{path}={closed!r}", *COMPANIONS.get(path, [])])
            *sections, name = path.split(".")
            holder = functools.reduce(getattr, sections, loaded)
            assert getattr(holder, name) == closed


@pytest.mark.parametrize(
    "path", [p for p, kind, _ in scalar_numbers() if kind is float], ids=lambda v: v
)
def test_numbers_are_finite_unless_infinity_means_no_bound(path):
    with pytest.raises(ConfigError, match=rf"^{path}: must be a number in .*, got nan$"):
        load_config(None, [f"{path}=.nan"])
    if path in INFINITY_MEANS_NO_BOUND:
        name = path.rpartition(".")[2]
        assert math.isinf(getattr(load_config(None, [f"{path}=.inf"]).algorithm, name))
    else:
        with pytest.raises(ConfigError, match=rf"^{path}: must be finite, in "):
            load_config(None, [f"{path}=.inf"])


@pytest.mark.parametrize(
    "override, message",
    [
        ("optim.max_grad_norm=-1", "optim.max_grad_norm: must be in (0, 1e+09], got -1"),
        (
            "optim.max_grad_norm=.nan",
            "optim.max_grad_norm: must be a number in (0, 1e+09], got nan",
        ),
        ("regularizers.kl_coef=.inf", "regularizers.kl_coef: must be finite"),
        ("optim.lr=.inf", "optim.lr: must be finite"),
        ("env.latency_mean=-1", "env.latency_mean: must be in [0, 3600], got -1"),
        ("env.latency_mean=.nan", "env.latency_mean: must be a number"),
        ("eval.episodes_per_phase=0", "eval.episodes_per_phase: must be in [1, 1e+06], got 0"),
        ("seed=-1", "seed: must be in [0, 4.29497e+09], got -1"),
        (
            "seed=100000000000000000000000000000000000",
            "seed: must be in [0, 4.29497e+09], got 1000",
        ),
        ("optim.betas=[0.9]", "optim.betas: expected 2 numbers, got 1"),
        ("optim.betas=[0.9, 1.0]", "optim.betas[1]: must be in [0, 1), got 1"),
        ("algorithm.dual_clip=1", "algorithm.dual_clip: must be in (1, 1e+06], got 1"),
        # An off-policy correction whose band is empty, or excludes on-policy data.
        ("algorithm.tis_cap=0", "algorithm.tis_cap: must be in (0, inf], got 0"),
        ("algorithm.tis_cap=-2", "algorithm.tis_cap: must be in (0, inf], got -2"),
        ("algorithm.mis_low=2", "algorithm.mis_low: must be in [0, 1), got 2"),
        ("algorithm.mis_high=0.5", "algorithm.mis_high: must be in (1, inf], got 0.5"),
        (
            "algorithm.decoupled_weight_cap=0.5",
            "algorithm.decoupled_weight_cap: must be in [1, 1e+06], got 0.5",
        ),
    ],
)
def test_values_out_of_range_are_refused_naming_the_field(override, message):
    with pytest.raises(ConfigError) as caught:
        load_config(None, [override])
    assert str(caught.value).startswith(message)
    assert len(str(caught.value)) < 120


def test_infinity_is_allowed_only_where_it_means_no_bound():
    assert load_config(None, ["algorithm.dis_eps_high=.inf"]).algorithm.dis_eps_high == float("inf")


def test_a_staleness_bound_beyond_the_budget_is_lowered_with_a_warning():
    with pytest.warns(ConfigWarning, match=r"runtime.max_staleness=1000000000 .* using 2"):
        config = load_config(
            None,
            ["runtime.max_staleness=1000000000", "budget.episodes=64", "rollout.batch_size=32"],
        )
    assert config.runtime.max_staleness == 2


@pytest.mark.e2e
def test_a_huge_staleness_bound_runs_to_its_budget(tmp_path):
    # The local backend computes its capacity from the bound, never loops over its values:
    # a bound of 10^9 runs like any other.
    overrides = tiny_overrides(
        "rollout.max_action_tokens=8",
        "rollout.max_episode_tokens=96",
        "budget.episodes=16",
        "runtime.backend=local",
        "runtime.num_workers=1",
        "runtime.max_staleness=1000000000",
        "algorithm.critic_warmup_steps=0",
        model=SMALLEST_MODEL,
    )
    with pytest.warns(ConfigWarning):
        config = load_config(None, overrides)
    summary = run_experiment(config, out=tmp_path / "run", threads=1)
    assert summary["episodes"] == 16 and summary["updates"] == 2


def test_local_workers_far_beyond_the_cores_are_refused_and_a_few_more_warned():
    config = load_config(None, ["runtime.backend=local", "runtime.num_workers=64"])
    with pytest.raises(ConfigError, match=r"runtime.num_workers: 64 worker processes on 2 CPU"):
        check_machine_fit(config, cores=2)
    config = load_config(None, ["runtime.backend=local", "runtime.num_workers=3"])
    with pytest.warns(ConfigWarning, match=r"runtime.num_workers=3 is more than the 2 CPU"):
        check_machine_fit(config, cores=2)
    check_machine_fit(
        load_config(None, ["runtime.backend=ray", "runtime.num_workers=64"]), cores=2
    )  # a Ray cluster brings its own cores


def alias_bomb(levels: int) -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for level in range(1, levels + 1):
        refs = ", ".join([f"*a{level - 1}"] * 10)
        lines.append(f"a{level}: &a{level} [{refs}]")
    return "env:\n  kwargs:\n" + "\n".join(f"    {line}" for line in lines) + "\n"


def test_a_yaml_alias_bomb_is_refused_at_once(tmp_path):
    config = tmp_path / "bomb.yaml"
    config.write_text(alias_bomb(9))
    # Refused while parsing, naming the first alias: nothing was expanded.
    with pytest.raises(ConfigError, match=r"bomb.yaml: line 4: YAML aliases \(\*a0\) are not "):
        load_config(config)
    with pytest.raises(ConfigError, match="aliases"):
        load_config(None, ["env.kwargs={a: &x [1, 2], b: *x}"])


def test_a_key_given_twice_is_refused_with_both_lines(tmp_path):
    """YAML keeps the last of two equal keys: the first would be dropped without a word."""
    from sao_online.drift_schedules import ScheduleError, load_schedule

    config = tmp_path / "twice.yaml"
    config.write_text("model:\n  warm_start: false\n  num_layers: 1\n  warm_start: true\n")
    with pytest.raises(
        ConfigError,
        match=r"twice.yaml: line 4: duplicate key 'warm_start' \(first given at line 2\)",
    ):
        load_config(config)
    config.write_text("seed: 1\nmodel: {num_layers: 1}\nseed: 2\n")
    with pytest.raises(ConfigError, match=r"line 3: duplicate key 'seed' \(first given at line 1"):
        load_config(config)
    with pytest.raises(ConfigError, match="duplicate key 'a'"):
        load_config(None, ["env.kwargs={a: 1, a: 2}"])
    schedule = tmp_path / "schedule.yaml"
    schedule.write_text(
        "parameters:\n  preferred: {kind: stationary, value: cute}\n"
        "  preferred: {kind: stationary, value: classical}\n"
    )
    with pytest.raises(ScheduleError, match=r"line 3: duplicate key 'preferred'"):
        load_schedule(schedule)


def test_error_messages_quote_only_a_short_prefix_of_a_value(tmp_path):
    huge = "y" * 1_000_000
    for override in (
        f"rollout.batch_size={huge}",
        f"experiment=[{huge}]",
        f"env.id={{k: [{', '.join(['1'] * 50_000)}]}}",
    ):
        with pytest.raises(ConfigError) as caught:
            load_config(None, [override])
        assert len(str(caught.value)) < 200, str(caught.value)[:300]


@pytest.mark.parametrize("name", ["../escaped_exp", "/tmp/abs", "a/b", "..", ".hidden", ""])
def test_names_that_would_leave_the_runs_root_are_refused(name, tmp_path):
    with pytest.raises(ConfigError, match="experiment: .* cannot name a folder"):
        load_config(None, [f"experiment={name!r}" if name else "experiment=''"])
    with pytest.raises(RunDirError, match="cannot name a folder"):
        run_directory(tmp_path, name, "sao", 0)
    with pytest.raises(RunDirError, match="algorithm.name: .* cannot name a folder"):
        run_directory(tmp_path, "fine", name, 0)


def test_schedule_files_get_the_same_bounds(tmp_path):
    from sao_online.drift_schedules import ScheduleError, load_schedule

    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("parameters:\n  x: &a [1, 2]\n  y: *a\n")
    with pytest.raises(ScheduleError, match=r"bomb.yaml: line 3: YAML aliases \(\*a\)"):
        load_schedule(bomb)
    huge = {
        "parameters": {"preferred": {"kind": "abrupt", "values": ["cute"] * 100_000, "at": "soon"}}
    }
    with pytest.raises(ScheduleError) as caught:
        load_schedule(huge)
    assert len(str(caught.value)) <= 400


@pytest.mark.parametrize(
    "data",
    [
        {"optim": {"max_grad_norm": -1}},
        {"optim": {"betas": [0.9]}},
        {"eval": {"episodes_per_phase": 0}},
        {"seed": 2**40},
    ],
)
def test_the_json_schema_carries_the_ranges(data):
    import jsonschema

    from sao_online.config.schema import config_json_schema

    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, config_json_schema())
    with pytest.raises(ConfigError):
        load_config(data)
