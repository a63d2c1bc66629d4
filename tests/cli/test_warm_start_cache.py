"""The warm start says what it is, how long it should take and where it is kept before it
trains; ``pretrain --list`` shows the cache and ``--clear`` empties it."""

from __future__ import annotations

import re

import pytest

from sao_online.cli import main
from sao_online.config import load_config
from sao_online.learning.warm_start import warm_start


def small_warm_start_config(**model):
    return load_config(
        {
            "model": {
                "num_layers": 1,
                "hidden_size": 32,
                "warm_start_steps": 8,
                "warm_start_batch_size": 8,
                **model,
            },
            "rollout": {"max_turns": 1, "max_action_tokens": 24, "max_episode_tokens": 96},
        }
    )


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SAO_ONLINE_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_a_warm_start_announces_itself_once_before_it_trains(cache, capsys):
    path = warm_start(small_warm_start_config(), progress=True)
    err = capsys.readouterr().err
    [line] = [line for line in re.split(r"[\r\n]", err) if line.startswith("warm start: ")]
    assert line.startswith(
        "warm start: 8 SFT steps of the tiny model on 2048 demonstrations of "
        "sao_online/StyleShift-v0, about "
    )
    assert re.search(r"about \d+ s at [\d.]+ steps/s; built once, cached in ", line)
    assert line.endswith(f"cached in {path} (`sao-online pretrain --list`)")
    assert path.is_relative_to(cache)
    # The line comes before the last SFT steps: the bar had not finished when it was written.
    before = err[: err.index("warm start: ")]
    assert "8/8" not in before
    warm_start(small_warm_start_config(), progress=True)  # cached: nothing to announce
    assert "warm start: " not in capsys.readouterr().err


def test_pretrain_list_shows_the_cache_and_clear_empties_it(cache, capsys):
    assert main(["pretrain", "--list"]) == 0
    assert capsys.readouterr().out.strip() == f"no cached warm start in {cache / 'warm-start'}"
    first = warm_start(small_warm_start_config())
    second = warm_start(small_warm_start_config(warm_start_steps=6))
    assert main(["pretrain", "--list"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    listed = {line.split()[0]: line for line in lines[:-1]}
    assert set(listed) == {first.name, second.name}
    assert "sao_online/StyleShift-v0  8 SFT steps, built in " in listed[first.name]
    assert "  6 SFT steps" in listed[second.name]
    size = sum(p.stat().st_size for p in first.rglob("*") if p.is_file())
    assert f"  {size / 1e3:.1f} kB  " in listed[first.name]  # a tiny model: about 100 kB
    assert lines[-1].startswith("2 warm start(s), ") and str(cache / "warm-start") in lines[-1]
    assert main(["pretrain", "--clear"]) == 0
    assert capsys.readouterr().out.startswith("removed 2 warm start(s), ")
    assert not first.exists() and not second.exists()
    assert main(["pretrain", "--list"]) == 0
    assert capsys.readouterr().out.startswith("no cached warm start")
