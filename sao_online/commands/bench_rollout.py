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
- engine_hf_forward: the same engine with the Hugging Face forward instead of the lean one
  (``lean_forward=False``), to show what the hand-written forward gains.
- generate: ``model.generate`` (Hugging Face's own KV cache) on consecutive batches of
  ``batch_size`` left-padded prompts; a batch ends when its longest answer ends.

Both count the tokens of the answers themselves (up to and including the end-of-turn token), so
padding that ``generate`` keeps producing for finished rows is not counted; the engine's time
includes environment steps, chat templating and trajectory building. A second, fixed-length
workload (every answer exactly ``new_tokens`` tokens, the end-of-turn token not stopping either
side) shows the per-step cost without the benefit of continuous batching.
"""

from __future__ import annotations

import platform
import time
from typing import Any

import gymnasium as gym
import torch

from sao_online.models.policy import build_tiny_policy
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


def _faster(first: dict[str, Any] | None, second: dict[str, Any]) -> dict[str, Any]:
    return second if first is None or second["seconds"] < first["seconds"] else first


def _compare(arguments: tuple, stop: bool, seed: int, repeats: int) -> dict[str, Any]:
    """Best of ``repeats`` alternating runs of each side, and the ratios."""
    engine = engine_hf = generate = None
    for _ in range(repeats):
        engine = _faster(engine, _run_engine(*arguments, stop=stop, seed=seed))
        engine_hf = _faster(
            engine_hf, _run_engine(*arguments, stop=stop, seed=seed, lean_forward=False)
        )
        generate = _faster(generate, _run_generate(*arguments, stop=stop, seed=seed))
    return {
        "engine": engine,
        "engine_hf_forward": engine_hf,
        "generate": generate,
        "speedup": engine["tokens_per_second"] / generate["tokens_per_second"],
        "speedup_cpu_time": engine["tokens_per_cpu_second"] / generate["tokens_per_cpu_second"],
        "lean_forward_speedup": engine["tokens_per_second"] / engine_hf["tokens_per_second"],
    }


def _answer_length(row: list[int], stop_token: int | None) -> int:
    if stop_token is not None and stop_token in row:
        return row.index(stop_token) + 1
    return len(row)


def _run_engine(
    model, tokenizer, batch_size, new_tokens, num_episodes, stop, seed, lean_forward=None
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
    forwards = engine.decoder.decode_forwards + engine.decoder.prefill_forwards
    return watch.report(tokens, forwards)


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
    batch_size: int = 64,
    new_tokens: int = 256,
    quick: bool = False,
    num_episodes: int | None = None,
    num_threads: int | None = 1,
    seed: int = 0,
    repeats: int = 1,
) -> dict[str, Any]:
    """Measures the rollout engine's and ``model.generate()``'s tokens/s on the same workload.

    Args:
        batch_size: engine slots and generate batch size.
        new_tokens: the cap on answer tokens.
        quick: a small smoke-sized run (batch and lengths shrunk, fixed-length workload
            skipped); its numbers are not meaningful.
        num_episodes: episodes per side; ``4 * batch_size`` when None.
        num_threads: torch CPU threads during the benchmark (restored afterwards); None leaves
            the setting alone. One thread keeps the numbers comparable on a shared machine.
        seed: model and sampling seed.
        repeats: alternating runs of each side; the fastest of each is reported.

    Returns:
        A JSON-able dict: ``workload`` (what both sides ran), ``engine`` and ``generate``
        (seconds, cpu_seconds, tokens, tokens_per_second, tokens_per_cpu_second,
        model_forwards), ``engine_hf_forward`` (the engine with the Hugging Face forward),
        ``lean_forward_speedup`` (engine over engine_hf_forward, wall clock), ``speedup``
        (engine tokens/s over generate tokens/s, wall clock),
        ``speedup_cpu_time`` (the same with process CPU time), the same under ``fixed_length``
        (unless quick), and ``machine``.
    """
    if quick:
        batch_size, new_tokens = min(batch_size, 8), min(new_tokens, 24)
    if batch_size < 1 or new_tokens < 1 or repeats < 1:
        raise ValueError(
            "run_rollout_benchmark: batch_size, new_tokens and repeats must be >= 1, got "
            f"{batch_size}, {new_tokens}, {repeats}"
        )
    if num_episodes is None:
        num_episodes = 2 * batch_size if quick else 4 * batch_size
    previous_threads = torch.get_num_threads()
    if num_threads is not None:
        torch.set_num_threads(num_threads)
    try:
        model, tokenizer = build_tiny_policy(seed=seed)
        arguments = (model, tokenizer, batch_size, new_tokens, num_episodes)
        report: dict[str, Any] = {
            "workload": {
                "model": "tiny (4 layers, hidden 128, byte vocabulary, random init)",
                "parameters": sum(parameter.numel() for parameter in model.parameters()),
                "batch_size": batch_size,
                "new_tokens": new_tokens,
                "num_episodes": num_episodes,
                "sampling": "temperature 1.0, top_p 1.0, no top_k",
                "stop": "end-of-turn token or new_tokens",
                "quick": quick,
                "repeats": repeats,
            }
        }
        report.update(_compare(arguments, stop=True, seed=seed, repeats=repeats))
        if not quick:
            report["fixed_length"] = _compare(arguments, stop=False, seed=seed, repeats=repeats)
        report["machine"] = {
            "torch_threads": torch.get_num_threads(),
            "torch": torch.__version__,
            "processor": platform.processor() or platform.machine(),
        }
        return report
    finally:
        torch.set_num_threads(previous_threads)
