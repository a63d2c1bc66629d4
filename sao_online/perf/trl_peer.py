"""The peer of ``bench throughput``: Hugging Face TRL's ``GRPOTrainer`` on the same workload.

TRL is set up as a careful CPU user would set it up, and given exactly what the suite's sync
backend gets:

- the same model: the config's policy built locally (same size, same random initialisation,
  same byte tokenizer and chat template), trained in float32: ``bf16=False`` (TRL defaults to
  bfloat16 autocast even with ``use_cpu=True``) and ``gradient_checkpointing=False`` (TRL's
  default recomputes every forward pass in the backward pass, a memory saving a CPU run of this
  model does not need);
- the same prompts in the same order: the run's episode planner hands out the groups (seed and
  drift options per prompt), and each prompt is the environment's first observation as one user
  message (after the config's system prompt, if any), rendered by the same chat template; the
  prompt tokens are counted on both sides (``prompt_tokens``);
- the same group size, completions per update, completion cap, sampling temperature and top-p,
  learning rate, gradient clipping, no KL term, and the torch threads the caller sets;
- the reward as the environment gives it, from one environment built once and reused: reset
  with the prompt's seed and options, stepped with the completion's text (the suite's rollout
  engine also resets and steps an environment per episode);
- the same clock (:mod:`sao_online.perf.phases`): generation is TRL's ``_generate`` (prompt
  tokenization, ``model.generate``, decoding), environment the reward function, and the
  learner's phases the same hooks as the suite's learner.

``completions_per_second`` is completions over the wall time of ``trainer.train()`` (trainer
construction excluded, as model construction is excluded on the suite's side). TRL is an
optional dependency: ``make trl``, or ``pip install 'sao-online[trl]'``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sys
import tempfile
import time
from importlib import metadata
from typing import Any

import torch

from sao_online.config import ExperimentConfig
from sao_online.config.run_schedule import resolve_schedule
from sao_online.learning.warm_start import base_policy
from sao_online.perf.phases import PhaseClock, learner_hooks, patched
from sao_online.runtime.envs import make_env
from sao_online.runtime.scheduling.planner import EpisodePlanner

#: The settings that make TRL a CPU trainer in place of its GPU defaults (bfloat16 autocast,
#: every forward pass recomputed in the backward pass), as the trainer reads them back.
CPU_SETTINGS = {"use_cpu": True, "bf16": False, "fp16": False, "gradient_checkpointing": False}


def _cpu_arguments(trl: Any) -> dict[str, Any]:
    """:data:`CPU_SETTINGS` as ``GRPOConfig`` arguments: transformers 5 names gradient
    checkpointing ``activation_checkpointing`` (the old name a deprecated alias)."""
    arguments = dict(CPU_SETTINGS)
    fields = {field.name for field in dataclasses.fields(trl.GRPOConfig)}
    if "activation_checkpointing" in fields:
        arguments["activation_checkpointing"] = arguments.pop("gradient_checkpointing")
    return arguments


def import_trl() -> Any:
    """Import TRL (and ``datasets``) or explain how to get them."""
    try:
        import datasets
        import trl
    except ImportError as error:
        raise RuntimeError(
            "bench throughput --peer trl needs TRL: make trl, or pip install 'sao-online[trl]' "
            f"(import failed: {error})"
        ) from error
    return trl, datasets


def planned_prompts(config: ExperimentConfig, groups: int) -> list[dict[str, Any]]:
    """The first ``groups`` prompts the run's planner hands out, as TRL dataset rows.

    Each row holds the conversational ``prompt`` and what the reward needs to set up the same
    episode: the environment ``seed`` and its reset options (``reset_options``, as JSON).
    """
    planner = EpisodePlanner(resolve_schedule(config), config.algorithm.group_size, config.seed)
    env = make_env(config)
    system = config.model.system_prompt
    rows = []
    try:
        for _ in range(groups):
            plan = planner.next_group()[0]
            observation, _ = env.reset(seed=plan.seed, options=plan.reset_options)
            messages = [{"role": "system", "content": system}] if system else []
            messages.append({"role": "user", "content": observation})
            rows.append(
                {
                    "prompt": messages,
                    "seed": plan.seed,
                    "reset_options": json.dumps(plan.reset_options),
                }
            )
    finally:
        env.close()
    return rows


class EnvironmentReward:
    """TRL reward function: each completion's reward from one reused environment.

    Raises:
        ValueError: the environment did not end the episode after the completion (the peer runs
            one-action episodes only).
    """

    __name__ = "environment_reward"  # TRL names its reward columns after the function

    def __init__(self, config: ExperimentConfig, clock: PhaseClock) -> None:
        self.env = make_env(config)
        self.env_id = config.env.id
        self.clock = clock

    def __call__(self, prompts, completions, seed, reset_options, **kwargs) -> list[float]:
        rewards = []
        with self.clock.phase("environment"):
            for completion, episode_seed, options in zip(completions, seed, reset_options):
                text = completion[-1]["content"] if isinstance(completion, list) else completion
                self.env.reset(seed=int(episode_seed), options=json.loads(options))
                _, reward, terminated, truncated, _ = self.env.step(text)
                if not (terminated or truncated):
                    raise ValueError(
                        f"bench throughput --peer trl: {self.env_id} did not end the episode "
                        "after one action; the TRL peer runs one-action episodes only"
                    )
                rewards.append(float(reward))
        return rewards

    def close(self) -> None:
        self.env.close()


def _grpo_config(trl: Any, config: ExperimentConfig, folder: str, updates: int) -> Any:
    batch = config.rollout.batch_size
    return trl.GRPOConfig(
        output_dir=folder,
        **_cpu_arguments(trl),
        report_to=[],
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
        seed=config.seed,
        per_device_train_batch_size=batch,
        gradient_accumulation_steps=1,
        num_generations=config.algorithm.group_size,
        max_completion_length=config.rollout.max_action_tokens,
        max_steps=updates,
        num_iterations=1,
        beta=config.regularizers.kl_coef,
        learning_rate=config.optim.lr,
        temperature=config.rollout.temperature,
        top_p=config.rollout.top_p,
        top_k=0,
        dataloader_num_workers=0,
        dataloader_pin_memory=False,
        max_grad_norm=config.optim.max_grad_norm,
        lr_scheduler_type="constant",
        shuffle_dataset=False,
    )


def run_trl_grpo(config: ExperimentConfig, episodes: int, threads: int) -> dict[str, Any]:
    """Train the config's policy with TRL's ``GRPOTrainer`` for ``episodes`` completions.

    Args:
        config: the workload's config (model, group size, batch, completion cap, lr).
        episodes: completions to train on (a multiple of ``rollout.batch_size``).
        threads: torch threads while TRL trains (the caller's setting is restored after).

    Returns:
        ``completions``, ``updates``, ``seconds``, ``completions_per_second``,
        ``seconds_per_update``, ``split`` (seconds per update of each phase, see
        :mod:`sao_online.perf.phases`), ``prompt_tokens`` and ``mean_completion_tokens`` (per
        completion, as TRL tokenized and sampled them), ``threads``, ``settings`` (the CPU
        settings as the trainer read them) and the versions of TRL and what it runs on.
    """
    trl, datasets = import_trl()
    group = config.algorithm.group_size
    batch = config.rollout.batch_size
    if group is None or group < 2:
        raise ValueError(
            f"run_trl_grpo: algorithm.group_size must be >= 2 (GRPO's groups), got {group}"
        )
    if episodes % batch or batch % group:
        raise ValueError(
            f"run_trl_grpo: episodes ({episodes}) must be a multiple of the batch "
            f"({batch}), itself a multiple of the group ({group})"
        )
    if threads < 1:
        raise ValueError(f"run_trl_grpo: threads must be >= 1, got {threads}")
    updates = episodes // batch
    policy, tokenizer = base_policy(config)
    policy.train()
    dataset = datasets.Dataset.from_list(planned_prompts(config, updates * batch // group))
    clock = PhaseClock()
    reward = EnvironmentReward(config, clock)
    prompt_tokens: list[int] = []
    completion_tokens: list[int] = []

    def timed_generate(generate):
        def generate_and_count(prompts):
            with clock.phase("generation"):
                output = generate(prompts)
            prompt_ids, completion_ids = output[0], output[1]
            prompt_tokens.extend(len(ids) for ids in prompt_ids)
            completion_tokens.extend(len(ids) for ids in completion_ids)
            return output

        return generate_and_count

    threads_before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with tempfile.TemporaryDirectory(prefix="sao-bench-trl-") as folder:
            trainer = trl.GRPOTrainer(
                model=policy,
                reward_funcs=reward,
                args=_grpo_config(trl, config, folder, updates),
                train_dataset=dataset,
                processing_class=tokenizer,
            )
            settings = {key: getattr(trainer.args, key) for key in CPU_SETTINGS}
            # The trainer prints its logs; stdout is the benchmark's JSON.
            with (
                contextlib.redirect_stdout(sys.stderr),
                learner_hooks(clock, policy),
                patched(trainer, "_generate", timed_generate),
            ):
                clock.start()
                started = time.perf_counter()
                trainer.train()
                seconds = time.perf_counter() - started
                clock.stop()
    finally:
        torch.set_num_threads(threads_before)
        reward.close()
    return {
        "trainer": f"trl {trl.__version__} GRPOTrainer",
        "versions": {name: metadata.version(name) for name in ("trl", "transformers", "torch")},
        "settings": settings,
        "reward": "one environment, reset with the prompt's seed and options and stepped",
        "completions": updates * batch,
        "updates": updates,
        "threads": threads,
        "seconds": round(seconds, 3),
        "completions_per_second": round(updates * batch / max(seconds, 1e-9), 2),
        "seconds_per_update": round(seconds / updates, 4),
        "split": clock.split(seconds, updates),
        "prompt_tokens": round(sum(prompt_tokens) / max(len(prompt_tokens), 1), 2),
        "mean_completion_tokens": round(sum(completion_tokens) / max(len(completion_tokens), 1), 2),
    }
