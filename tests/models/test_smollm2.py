"""SmolLM2-135M-Instruct (the `smollm2` extra, a GGUF file) through the whole loop on the CPU.

Slow (a few minutes on a loaded 2-core machine): loading dequantizes the GGUF weights, and every
update runs a 135M-parameter policy and critic. ``make test`` installs the model; without it the
tests are skipped, except under CI (``CI`` set), where a missing model is a failure.
"""

import copy
import os
from pathlib import Path

import gymnasium
import pytest
import torch
from chat_models import reference_greedy_episode

import sao_online.learning.warm_start as warm_start_module
from sao_online.config import load_config
from sao_online.learning.batching import collate
from sao_online.learning.prefix_sharing import (
    causal_lm_forward,
    plan_prefix_sharing,
    shared_prefix_forward,
)
from sao_online.models import ChatLayout, ModelNotFoundError, load_policy, resolve_model_source
from sao_online.rollout import EpisodeRequest, RolloutEngine
from sao_online.rundir.runlog import RunLog
from sao_online.runtime.launch import run_experiment

pytestmark = pytest.mark.slow
CONFIG = Path(__file__).resolve().parents[2] / "configs" / "smollm2-styleshift.yaml"


@pytest.fixture(scope="module")
def smollm2_installed():
    try:
        resolve_model_source("smollm2-135m")
    except ModelNotFoundError as error:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"SmolLM2 not installed: {error}")


@pytest.fixture(scope="module")
def gguf_work():
    """Counts, during the module's one load, how often the GGUF file is parsed and how often
    gguf's tensor-name table is built (each costs seconds)."""
    import gguf

    counts = {"parses": 0, "name_maps": 0}
    parse, build_name_map = gguf.GGUFReader, gguf.get_tensor_name_map

    def counted_parse(*args, **kwargs):
        counts["parses"] += 1
        return parse(*args, **kwargs)

    def counted_name_map(*args, **kwargs):
        counts["name_maps"] += 1
        return build_name_map(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(gguf, "GGUFReader", counted_parse)
        patch.setattr(gguf, "get_tensor_name_map", counted_name_map)
        yield counts


@pytest.fixture(scope="module")
def private_cache(tmp_path_factory):
    """An empty cache, so the module's first load converts the GGUF file (and the user's cache
    is left alone)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SAO_ONLINE_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield


@pytest.fixture(scope="module")
def smollm2(smollm2_installed, private_cache, gguf_work):
    return load_policy("smollm2-135m")


# The tests that use the loaded model run on one xdist worker, so it is loaded once (`make test`
# runs with --dist loadgroup): loading dequantizes the GGUF weights (about 6 s on one core).
shares_the_loaded_model = pytest.mark.xdist_group("smollm2-model")


@shares_the_loaded_model
def test_gguf_loads_with_its_chat_template(smollm2, gguf_work):
    model, tokenizer = smollm2
    # Transformers alone parses the file three times (tokenizer, config, weights) and builds the
    # name table once per module (about 400): 15-20 s of the load instead of about 6.
    assert gguf_work == {"parses": 1, "name_maps": 1}
    assert model.config.num_hidden_layers == 30 and model.config.num_key_value_heads == 3
    assert next(model.parameters()).dtype == torch.float32
    # The weights are the pretrained ones, in the right places: the model knows a plain fact.
    prompt = tokenizer("The capital of France is", return_tensors="pt").input_ids
    with torch.no_grad():
        next_token = model(prompt).logits[0, -1].argmax()
    assert tokenizer.decode(next_token) == " Paris"
    assert tokenizer.eos_token == "<|im_end|>"
    prompt = ChatLayout(tokenizer).prompt_tokens("Write one line.")
    assert tokenizer.decode(prompt) == (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
        "Face<|im_end|>\n<|im_start|>user\nWrite one line.<|im_end|>\n<|im_start|>assistant\n"
    )


@shares_the_loaded_model
def test_a_second_load_reads_the_converted_copy_not_the_gguf_file(smollm2, gguf_work):
    import gguf

    model, tokenizer = smollm2
    parsed = dict(gguf_work)
    again, again_tokenizer = load_policy("smollm2-135m")
    assert gguf_work == parsed  # the GGUF file was not read again
    loaded, reloaded = model.state_dict(), again.state_dict()
    assert loaded.keys() == reloaded.keys()
    assert all(torch.equal(loaded[name], reloaded[name]) for name in loaded)
    assert again_tokenizer.chat_template == tokenizer.chat_template
    text = "Écris une ligne: <|im_end|> 42"
    assert again_tokenizer(text).input_ids == tokenizer(text).input_ids
    # The cached weights are the file's, dequantized: two tensors read straight from it (neither
    # is permuted by the GGUF-to-Llama conversion).
    source = resolve_model_source("smollm2-135m")
    reader = gguf.GGUFReader(Path(source.location) / source.gguf_file)
    tensors = {tensor.name: tensor for tensor in reader.tensors}
    for gguf_name, name in (
        ("token_embd.weight", "model.embed_tokens.weight"),
        ("blk.0.ffn_down.weight", "model.layers.0.mlp.down_proj.weight"),
    ):
        tensor = tensors[gguf_name]
        values = gguf.dequantize(tensor.data, tensor.tensor_type)
        assert torch.equal(
            torch.from_numpy(values.copy()).reshape(loaded[name].shape), loaded[name]
        )


@shares_the_loaded_model
def test_cached_decoding_and_prefix_sharing_equal_uncached_references(smollm2):
    model, tokenizer = smollm2
    stop_ids = {tokenizer.eos_token_id}
    engine = RolloutEngine(
        model,
        tokenizer,
        num_slots=3,
        temperature=0.0,
        max_turns=2,
        max_action_tokens=6,
        max_episode_tokens=512,
        on_action_cap="submit",
    )
    env_ids = ["sao_online/StyleShift-v0", "sao_online/ToolShift-v0", "sao_online/ToolShift-v0"]
    requests = iter(
        [
            EpisodeRequest(gymnasium.make(env_id), seed=index, prompt_id=index)
            for index, env_id in enumerate(env_ids)
        ]
    )
    trajectories = sorted(engine.run(lambda: next(requests, None)), key=lambda t: t.prompt_id)
    assert [t.num_turns for t in trajectories] == [1, 2, 2]
    layout = ChatLayout(tokenizer)
    for trajectory, env_id in zip(trajectories, env_ids):
        tokens, positions, logprobs = reference_greedy_episode(
            model,
            layout,
            gymnasium.make(env_id),
            trajectory.seed,
            stop_ids,
            max_action_tokens=6,
            max_turns=2,
        )
        assert trajectory.tokens.tolist() == tokens
        torch.testing.assert_close(
            trajectory.behavior_logprobs[positions], torch.tensor(logprobs), atol=2e-3, rtol=0
        )

    # The two ToolShift episodes as one group: they share the system message and the prompt's
    # opening words ("Compute ").
    batch = collate(trajectories[1:], tokenizer.pad_token_id)
    plan = plan_prefix_sharing(
        batch.tokens, batch.attention_mask, torch.tensor([7, 7]), min_saving=0.0
    )
    assert plan is not None and plan.prefix_width >= 24
    real = batch.attention_mask
    with torch.no_grad():
        plain = model(input_ids=batch.tokens, attention_mask=real.long()).logits
        shared = shared_prefix_forward(
            causal_lm_forward(model), batch.tokens, plan, tokenizer.pad_token_id
        )
    torch.testing.assert_close(
        shared[real].log_softmax(-1), plain[real].log_softmax(-1), atol=2e-3, rtol=0
    )


@shares_the_loaded_model
def test_two_sao_updates_on_styleshift(smollm2, tmp_path, monkeypatch):
    # The run asks for the model by name; it gets a copy of the one loaded above (the tests
    # above check that loading), so the GGUF file is not read a second time.
    model, tokenizer = smollm2
    requested = []

    def copy_of_the_loaded_model(name, gguf_file=None, dtype=None):
        requested.append((name, gguf_file, dtype))
        return copy.deepcopy(model), tokenizer

    monkeypatch.setattr(warm_start_module, "load_policy", copy_of_the_loaded_model)
    kept = {name: tensor.clone() for name, tensor in list(model.state_dict().items())[:4]}
    config = load_config(
        CONFIG,
        [
            "budget.episodes=4",
            "rollout.batch_size=2",
            "rollout.num_slots=2",
            "rollout.max_action_tokens=8",
            "algorithm.critic_warmup_steps=0",
            # One critic update per policy update (K = 2 in the config): the K-update loop is
            # the tiny model's to test; here each update's critic and policy steps run once.
            "algorithm.critic_updates=1",
            f"logging.out={tmp_path}",
        ],
    )
    assert config.model.name == "smollm2-135m" and config.algorithm.name == "sao"
    summary = run_experiment(config, threads=1)
    assert requested == [("smollm2-135m", None, torch.float32)]
    assert summary["episodes"] == 4 and summary["updates"] == 2
    run = Path(summary["run_dir"])
    updates = RunLog(run).read("updates")
    assert len(updates) == 2
    assert updates["charts/critic_only_step"].tolist() == [0.0, 0.0]
    for column in ("losses/policy", "losses/value", "charts/grad_norm_critic"):
        assert (
            updates[column].notna().all()
            and torch.isfinite(torch.tensor(updates[column].to_numpy())).all()
        ), column
    # The run trained its copy: the model the other tests read is as loaded.
    assert all(torch.equal(model.state_dict()[name], kept[name]) for name in kept)
    episodes = RunLog(run).read("episodes")
    assert len(episodes) == 4 and (episodes["num_action_tokens"] > 0).all()


@shares_the_loaded_model
def test_bench_rollout_runs_the_real_model_from_its_converted_copy(smollm2, gguf_work):
    from sao_online.perf.rollout import run_rollout_benchmark

    parsed = dict(gguf_work)
    result = run_rollout_benchmark(model="smollm2-135m", batch_size=4, new_tokens=6, num_episodes=4)
    assert gguf_work == parsed  # loaded from the cache the module's first load filled
    assert result["workload"]["model"] == "smollm2-135m (pretrained)"
    assert result["workload"]["parameters"] == sum(p.numel() for p in smollm2[0].parameters())
    assert result["engine"]["tokens"] == result["engine_single_buffer"]["tokens"] > 0
    assert result["generate"]["tokens"] > 0 and "engine_hf_forward" not in result
    assert result["model_load"]["converted_before_first_load"] is True
    assert result["model_load"]["second_load_seconds"] > 0
    # 30 layers x 3 key/value heads x 64 dims x keys and values x 4 bytes per column.
    roofline = result["roofline"]
    assert roofline["engine"]["kv_bytes_read"] == result["engine"]["kv_columns_read"] * (
        30 * 3 * 64 * 2 * 4
    )
