"""A warm start moves between machines: ``pretrain --export`` copies it with its weights id and
the settings it was fitted for, ``pretrain --import`` makes it a config's cached warm start
after checking both, and the weights id is the SHA-256 of the weights' bytes."""

from __future__ import annotations

import hashlib
import json

import pytest
import torch
from test_warm_start_cache import small_warm_start_config

from sao_online.cli import main
from sao_online.config import ConfigError
from sao_online.learning.warm_start import (
    export_warm_start,
    import_warm_start,
    load_warm_start,
    warm_start,
    warm_start_path,
)
from sao_online.util.cache import weights_id


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SAO_ONLINE_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _rewrite_weights(folder, change):
    """Change the saved weights (as another machine's floating point would) and record the new
    id in the summary, as an export from that machine would have."""
    from safetensors.torch import load_file, save_file

    path = folder / "model.safetensors"
    tensors = load_file(path)
    save_file({name: change(tensor) for name, tensor in tensors.items()}, path)
    summary = json.loads((folder / "warm_start.json").read_text())
    summary["weights"] = weights_id(folder)
    (folder / "warm_start.json").write_text(json.dumps(summary))


def test_the_weights_id_is_the_sha256_of_the_safetensors_files(tmp_path):
    (tmp_path / "b.safetensors").write_bytes(b"second")
    (tmp_path / "a.safetensors").write_bytes(b"first")
    (tmp_path / "config.json").write_text("{}")  # not weights: not counted
    expected = hashlib.sha256(b"a.safetensors\0first" + b"b.safetensors\0second").hexdigest()
    assert weights_id(tmp_path) == expected[:16]
    (tmp_path / "config.json").write_text('{"changed": 1}')
    assert weights_id(tmp_path) == expected[:16]
    (tmp_path / "a.safetensors").write_bytes(b"firsT")
    assert weights_id(tmp_path) != expected[:16]
    assert weights_id(tmp_path / "missing") is None


def test_an_exported_warm_start_imported_elsewhere_is_the_one_runs_load(
    tmp_path, cache, monkeypatch, capsys
):
    config = small_warm_start_config()
    fitted = warm_start(config)
    summary = json.loads((fitted / "warm_start.json").read_text())
    assert summary["weights"] == weights_id(fitted)
    assert summary["settings"]["model"]["warm_start_steps"] == 8
    assert summary["fitted_on"]["cpu_model"]
    folder = tmp_path / "shared"
    assert (
        main(
            [
                "pretrain",
                "--set",
                "model.num_layers=1",
                "--set",
                "model.hidden_size=32",
                "--set",
                "model.warm_start_steps=8",
                "--set",
                "model.warm_start_batch_size=8",
                "--set",
                "rollout.max_turns=1",
                "--set",
                "rollout.max_action_tokens=24",
                "--set",
                "rollout.max_episode_tokens=96",
                "--export",
                str(folder),
            ]
        )
        == 0
    )
    assert f"warm start exported to {folder}" in capsys.readouterr().out
    # "Another machine": its own cache, where the same config fits other weights.
    monkeypatch.setenv("SAO_ONLINE_CACHE", str(tmp_path / "elsewhere"))
    _rewrite_weights(folder, lambda tensor: tensor + 0.01)
    theirs = json.loads((folder / "warm_start.json").read_text())["weights"]
    assert theirs != summary["weights"]
    installed = import_warm_start(config, folder)
    assert installed == warm_start_path(config) and installed.is_relative_to(tmp_path / "elsewhere")
    assert weights_id(installed) == theirs
    assert warm_start(config) == installed  # cached: not fitted again
    policy, _ = load_warm_start(config)
    name, tensor = next(iter(policy.state_dict().items()))
    from safetensors.torch import load_file

    assert torch.equal(tensor, load_file(folder / "model.safetensors")[name].to(tensor.dtype))
    assert main(["pretrain", "--list"]) == 0
    listed = capsys.readouterr().out
    assert f"weights {theirs}, imported from {folder.resolve()}" in listed


def test_importing_replaces_what_the_cache_held_for_the_config(tmp_path, cache):
    config = small_warm_start_config()
    mine = weights_id(warm_start(config))
    folder = export_warm_start(config, tmp_path / "shared")
    _rewrite_weights(folder, lambda tensor: tensor * 0.5)
    path = import_warm_start(config, folder)
    assert weights_id(path) != mine
    assert weights_id(path) == json.loads((folder / "warm_start.json").read_text())["weights"]
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # nothing left behind


def test_a_warm_start_for_other_settings_or_with_changed_weights_is_refused(tmp_path, cache):
    folder = export_warm_start(small_warm_start_config(), tmp_path / "shared")
    with pytest.raises(ConfigError) as refused:
        import_warm_start(small_warm_start_config(warm_start_steps=6), folder)
    assert str(refused.value) == (
        f"{folder} was fitted for other settings than this config: "
        "model.warm_start_steps: the folder's 8, the config's 6"
    )
    data = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    with pytest.raises(ConfigError, match=r"its weights are [0-9a-f]{16}, not the [0-9a-f]{16} "):
        import_warm_start(small_warm_start_config(), folder)
    with pytest.raises(ConfigError, match="no warm_start.json; not a warm start folder"):
        import_warm_start(small_warm_start_config(), tmp_path)
    with pytest.raises(FileExistsError, match="name a new folder"):
        export_warm_start(small_warm_start_config(), folder)


def test_a_warm_start_cached_before_weights_were_recorded_exports_with_them(tmp_path, cache):
    config = small_warm_start_config()
    fitted = warm_start(config)
    summary = json.loads((fitted / "warm_start.json").read_text())
    for key in ("weights", "settings"):
        del summary[key]
    (fitted / "warm_start.json").write_text(json.dumps(summary))
    folder = export_warm_start(config, tmp_path / "shared")
    exported = json.loads((folder / "warm_start.json").read_text())
    assert exported["weights"] == weights_id(fitted)
    assert exported["settings"]["env"]["id"] == "sao_online/StyleShift-v0"
    assert import_warm_start(config, folder) == fitted
