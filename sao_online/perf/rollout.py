"""``sao-online bench rollout``: the rollout engine against ``model.generate()`` on one workload.

Workload (identical for both sides): ``num_episodes`` single-turn episodes whose prompts are the
chat-template rendering of a short task text (about 60 tokens, varying with the episode index);
each answer is sampled at temperature 1 with top-p 1 (no top-k) until the end-of-turn token or
``new_tokens`` tokens, on the default tiny policy (4 layers, hidden 128, random weights from
seed 0). Random weights put probability of about 1/262 on the end-of-turn token at every step,
so answer lengths are roughly geometric (mean about 160 at ``new_tokens=256``): the varied
lengths that continuous batching is built for.

- engine: ``RolloutEngine`` with ``num_slots=batch_size`` running all episodes as one stream; a
  slot whose answer ended takes the next prompt at once.
- engine_single_buffer: the same engine with one key/value buffer read up to the longest row
  at every step (``banded_cache=False``) instead of bands each read up to their own longest
  row, to show what reading only the used columns gains.
- engine_hf_forward: the same engine with the Hugging Face forward instead of the lean one
  (``lean_forward=False``), to show what the hand-written forward gains.
- generate: ``model.generate`` (Hugging Face's own KV cache) on consecutive batches of
  ``batch_size`` left-padded prompts; a batch ends when its longest answer ends.

Both count the tokens of the answers themselves (up to and including the end-of-turn token), so
padding that ``generate`` keeps producing for finished rows is not counted; the engine's time
includes environment steps, chat templating and trajectory building. A second, fixed-length
workload (every answer exactly ``new_tokens`` tokens, the end-of-turn token not stopping either
side) shows the per-step cost without the benefit of continuous batching.

The roofline (``roofline``): the bytes of keys and values each engine's attention read per
model forward, against this machine's memory bandwidth measured in the same run (one thread
summing a 256 MB tensor); ``kv_read_floor_seconds`` is the least time those reads can take,
to hold against the engine's time in its model forwards. The weights are read once per
forward too (``weight_bytes_per_forward``; the tiny model's 4 MB stay in cache).

``model="smollm2-135m"`` (or any ``load_policy`` name) runs the same comparison on a real
model: smaller batches and answers (``batch_size`` 16, ``new_tokens`` 48 unless given), no
fixed-length workload and no Hugging Face-forward engine side, each a matter of minutes there.
"""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch

from sao_online.models.converted import converted_folder, is_converted
from sao_online.models.policy import TINY_POLICY_NAME, build_tiny_policy, load_policy
from sao_online.models.sources import resolve_model_source
from sao_online.rollout import EpisodeRequest, RolloutEngine

_TASK = "Task {index}: describe the number {index} in one sentence, then stop."


class _SingleTurnTask(gym.Env[str, str]):
    """Answers with nothing and ends the episode after the first action."""

    metadata: dict[str, Any] = {}
    observation_space = gym.spaces.Text(max_length=256)
    action_space = gym.spaces.Text(max_length=4096)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        return _TASK.format(index=seed), {"phase": 0, "theta": {}}

    def step(self, action: str):
        return "", 0.0, True, False, {}


class _Stopwatch:
    """Wall-clock and process CPU time of a block.

    On a shared machine other processes slow the wall clock of both sides; this process's CPU
    time is much less affected, so both are reported.
    """

    def __enter__(self) -> _Stopwatch:
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.wall = time.perf_counter() - self.wall
        self.cpu = time.process_time() - self.cpu

    def report(self, tokens: int, forwards: int) -> dict[str, Any]:
        return {
            "seconds": self.wall,
            "cpu_seconds": self.cpu,
            "tokens": tokens,
            "tokens_per_second": tokens / self.wall,
            "tokens_per_cpu_second": tokens / self.cpu,
            "model_forwards": forwards,
        }


def measure_read_bandwidth(megabytes: int = 256, repeats: int = 3) -> float:
    """Bytes per second one thread reads from memory here: the best of ``repeats`` sums over a
    tensor far larger than the caches."""
    data = torch.ones(megabytes * (1 << 20) // 4)
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        data.sum()
        best = min(best, time.perf_counter() - started)
    return data.numel() * 4 / best


def _timed_loads(name: str) -> dict[str, Any]:
    """Seconds of a first and a second ``load_policy(name)`` in this process, and whether the
    first found the model already converted in the cache (a GGUF file is converted once)."""
    source = resolve_model_source(name)
    cached_before = source.gguf_file is None or is_converted(
        converted_folder(Path(source.location) / source.gguf_file)
    )
    seconds = []
    for _ in range(2):
        started = time.perf_counter()
        load_policy(name)
        seconds.append(round(time.perf_counter() - started, 3))
    return {
        "first_load_seconds": seconds[0],
        "second_load_seconds": seconds[1],
        "converted_before_first_load": cached_before,
    }


def _kv_bytes_per_column(model) -> int:
    """Bytes of keys and values one cache column holds over all layers, for one row."""
    config = model.config
    heads = config.num_key_value_heads or config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or (
        config.hidden_size // config.num_attention_heads
    )
    element = next(model.parameters()).element_size()
    return config.num_hidden_layers * 2 * heads * head_dim * element  # keys and values


def _faster(first: dict[str, Any] | None, second: dict[str, Any]) -> dict[str, Any]:
    return second if first is None or second["seconds"] < first["seconds"] else first


def _compare(arguments: tuple, stop: bool, seed: int, repeats: int, sides: tuple) -> dict:
    """Best of ``repeats`` alternating runs of each side, and the ratios."""
    options = {
        "engine": {},
        "engine_single_buffer": {"banded_cache": False},
        "engine_hf_forward": {"lean_forward": False},
    }
    best: dict[str, dict[str, Any] | None] = {name: None for name in (*sides, "generate")}
    for _ in range(repeats):
        for name in sides:
            run = _run_engine(*arguments, stop=stop, seed=seed, **options[name])
            best[name] = _faster(best[name], run)
        best["generate"] = _faster(
            best["generate"], _run_generate(*arguments, stop=stop, seed=seed)
        )
    engine, generate = best["engine"], best["generate"]
    result: dict[str, Any] = dict(best)
    result["speedup"] = engine["tokens_per_second"] / generate["tokens_per_second"]
    result["speedup_cpu_time"] = engine["tokens_per_cpu_second"] / generate["tokens_per_cpu_second"]
    if "engine_single_buffer" in sides:
        single = best["engine_single_buffer"]
        result["banded_cache_speedup"] = engine["tokens_per_second"] / single["tokens_per_second"]
        result["banded_cache_speedup_cpu_time"] = (
            engine["tokens_per_cpu_second"] / single["tokens_per_cpu_second"]
        )
    if "engine_hf_forward" in sides:
        result["lean_forward_speedup"] = (
            engine["tokens_per_second"] / best["engine_hf_forward"]["tokens_per_second"]
        )
    return result


def _roofline(model, comparison: dict[str, Any], bandwidth: float) -> dict[str, Any]:
    """Bytes each engine side's attention read per forward, and the least time they take."""
    column_bytes = _kv_bytes_per_column(model)
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    roofline: dict[str, Any] = {
        "read_bandwidth_bytes_per_second": round(bandwidth),
        "weight_bytes_per_forward": weight_bytes,
    }
    for name in ("engine", "engine_single_buffer"):
        side = comparison.get(name)
        if side is None:
            continue
        kv_bytes = side["kv_columns_read"] * column_bytes
        weight_seconds = side["model_forwards"] * weight_bytes / bandwidth
        roofline[name] = {
            "kv_bytes_read": kv_bytes,
            "kv_bytes_per_forward": round(kv_bytes / side["model_forwards"]),
            "kv_read_floor_seconds": round(kv_bytes / bandwidth, 4),
            # Reading the weights once per forward: a floor only where they do not fit in the
            # caches (a real model; the tiny model's 4 MB stay in them).
            "weight_read_floor_seconds": round(weight_seconds, 4),
            "model_seconds": round(side["model_seconds"], 4),
            # The share of the model's time that reading the cache at full bandwidth needs.
            "kv_floor_share_of_model_seconds": round(
                kv_bytes / bandwidth / side["model_seconds"], 3
            ),
            "weight_floor_share_of_model_seconds": round(weight_seconds / side["model_seconds"], 3),
        }
    if "engine_single_buffer" in roofline and "engine" in roofline:
        roofline["kv_bytes_banded_over_single_buffer"] = round(
            roofline["engine"]["kv_bytes_read"] / roofline["engine_single_buffer"]["kv_bytes_read"],
            3,
        )
    return roofline


def _answer_length(row: list[int], stop_token: int | None) -> int:
    if stop_token is not None and stop_token in row:
        return row.index(stop_token) + 1
    return len(row)


def _run_engine(
    model,
    tokenizer,
    batch_size,
    new_tokens,
    num_episodes,
    stop,
    seed,
    lean_forward=None,
    banded_cache=None,
) -> dict[str, Any]:
    engine = RolloutEngine(
        model,
        tokenizer,
        num_slots=batch_size,
        temperature=1.0,
        top_p=1.0,
        max_turns=1,
        max_action_tokens=new_tokens,
        max_episode_tokens=new_tokens + 128,
        seed=seed,
        on_action_cap="submit",
        stop_token_ids=[tokenizer.eos_token_id] if stop else [],
        lean_forward=lean_forward,
        banded_cache=banded_cache,
    )
    requests = iter(
        [
            EpisodeRequest(_SingleTurnTask(), seed=index, prompt_id=index)
            for index in range(num_episodes)
        ]
    )
    with engine, _Stopwatch() as watch:
        trajectories = list(engine.run(lambda: next(requests, None)))
    tokens = sum(trajectory.num_action_tokens for trajectory in trajectories)
    decoder = engine.decoder
    report = watch.report(tokens, decoder.decode_forwards + decoder.prefill_forwards)
    report["model_seconds"] = engine.stats.model_seconds
    if decoder.lean is not None:
        # Rows x columns attention read, summed over layers and forwards (the caches count
        # every layer's read): divided by the layers.
        report["kv_columns_read"] = decoder.cache.columns_read // decoder._num_layers
    return report


def _run_generate(
    model, tokenizer, batch_size, new_tokens, num_episodes, stop, seed
) -> dict[str, Any]:
    tokenizer.padding_side = "left"
    prompts = [
        tokenizer.apply_chat_template(
            [{"role": "user", "content": _TASK.format(index=index)}],
            add_generation_prompt=True,
            tokenize=False,
        )
        for index in range(num_episodes)
    ]
    torch.manual_seed(seed)
    stop_token = tokenizer.eos_token_id if stop else None
    tokens = 0
    steps = 0
    with _Stopwatch() as watch, torch.inference_mode():
        for start in range(0, num_episodes, batch_size):
            batch = tokenizer(
                prompts[start : start + batch_size],
                return_tensors="pt",
                padding=True,
                add_special_tokens=False,
            )
            output = model.generate(
                **batch,
                do_sample=True,
                temperature=1.0,
                top_p=1.0,
                top_k=0,
                max_new_tokens=new_tokens,
                min_new_tokens=0 if stop else new_tokens,
                eos_token_id=stop_token if stop else None,
                pad_token_id=tokenizer.pad_token_id,
            )
            answers = output[:, batch["input_ids"].shape[1] :].tolist()
            tokens += sum(_answer_length(row, stop_token) for row in answers)
            steps += len(answers[0])
    return watch.report(tokens, steps)


def run_rollout_benchmark(
    batch_size: int | None = None,
    new_tokens: int | None = None,
    quick: bool = False,
    num_episodes: int | None = None,
    num_threads: int | None = 1,
    seed: int = 0,
    repeats: int = 1,
    model: str = TINY_POLICY_NAME,
) -> dict[str, Any]:
    """Measures the rollout engine's and ``model.generate()``'s tokens/s on the same workload.

    Args:
        batch_size: engine slots and generate batch size (64; 16 for a real model).
        new_tokens: the cap on answer tokens (256; 48 for a real model).
        quick: a small smoke-sized run (batch and lengths shrunk, fixed-length workload
            skipped); its numbers are not meaningful.
        num_episodes: episodes per side; ``4 * batch_size`` when None (``2 *`` for a real
            model or a quick run).
        num_threads: torch CPU threads during the benchmark (restored afterwards); None leaves
            the setting alone. One thread keeps the numbers comparable on a shared machine.
        seed: model and sampling seed.
        repeats: alternating runs of each side; the fastest of each is reported.
        model: ``"tiny"`` (the default policy, random weights from ``seed``) or a name
            ``load_policy`` takes, such as ``"smollm2-135m"``.

    Returns:
        A JSON-able dict: ``workload`` (what both sides ran), ``engine`` and ``generate``
        (seconds, cpu_seconds, tokens, tokens_per_second, tokens_per_cpu_second,
        model_forwards; the engine sides also model_seconds and kv_columns_read),
        ``engine_single_buffer`` and ``banded_cache_speedup`` (the engine reading one buffer
        up to the longest row), ``engine_hf_forward`` and ``lean_forward_speedup`` (tiny model
        only), ``speedup`` (engine tokens/s over generate tokens/s, wall clock),
        ``speedup_cpu_time`` (the same with process CPU time), ``roofline`` (see the module
        docstring), the same under ``fixed_length`` (tiny model, unless quick), for a real
        model ``model_load`` (seconds of a first and a second load and whether the first found
        the converted copy in the cache), and ``machine``.
    """
    real_model = model != TINY_POLICY_NAME
    batch_size = batch_size or (16 if real_model else 64)
    new_tokens = new_tokens or (48 if real_model else 256)
    if quick:
        batch_size, new_tokens = min(batch_size, 8), min(new_tokens, 24)
    if batch_size < 1 or new_tokens < 1 or repeats < 1:
        raise ValueError(
            "run_rollout_benchmark: batch_size, new_tokens and repeats must be >= 1, got "
            f"{batch_size}, {new_tokens}, {repeats}"
        )
    if num_episodes is None:
        num_episodes = 2 * batch_size if quick or real_model else 4 * batch_size
    sides = ("engine", "engine_single_buffer")
    if not real_model:
        sides += ("engine_hf_forward",)
    previous_threads = torch.get_num_threads()
    if num_threads is not None:
        torch.set_num_threads(num_threads)
    try:
        model_load = None
        if real_model:
            model_load = _timed_loads(model)
            policy, tokenizer = load_policy(model)
            description = f"{model} (pretrained)"
        else:
            policy, tokenizer = build_tiny_policy(seed=seed)
            description = "tiny (4 layers, hidden 128, byte vocabulary, random init)"
        arguments = (policy, tokenizer, batch_size, new_tokens, num_episodes)
        report: dict[str, Any] = {
            "workload": {
                "model": description,
                "parameters": sum(parameter.numel() for parameter in policy.parameters()),
                "batch_size": batch_size,
                "new_tokens": new_tokens,
                "num_episodes": num_episodes,
                "sampling": "temperature 1.0, top_p 1.0, no top_k",
                "stop": "end-of-turn token or new_tokens",
                "quick": quick,
                "repeats": repeats,
            }
        }
        if model_load is not None:
            report["model_load"] = model_load
        bandwidth = measure_read_bandwidth()
        report.update(_compare(arguments, stop=True, seed=seed, repeats=repeats, sides=sides))
        report["roofline"] = _roofline(policy, report, bandwidth)
        if not (quick or real_model):
            fixed = _compare(arguments, stop=False, seed=seed, repeats=repeats, sides=sides)
            fixed["roofline"] = _roofline(policy, fixed, bandwidth)
            report["fixed_length"] = fixed
        report["load_average"] = [round(value, 2) for value in os.getloadavg()]
        report["machine"] = {
            "torch_threads": torch.get_num_threads(),
            "torch": torch.__version__,
            "processor": platform.processor() or platform.machine(),
            "cores": os.cpu_count(),
        }
        report["measured_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        return report
    finally:
        torch.set_num_threads(previous_threads)
