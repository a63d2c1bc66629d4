"""The peer of ``bench throughput``: Hugging Face TRL's ``GRPOTrainer`` on the same workload.

Same model (the config's policy, built locally: same size, same random initialisation, same
byte tokenizer and chat template), same environment, same group size, completions per update,
completion cap, sampling temperature, learning rate, no KL term, same torch threads, same
process. What TRL needs and the suite does not have is made in code:

- the dataset: one conversational prompt per group, ``[{"role": "user", "content": obs}]``,
  where ``obs`` is the environment's first observation for a seed (the environment ends an
  episode after one action, so one prompt and one completion are a whole episode);
- the reward function: for each completion, a fresh environment reset with the prompt's seed
  and stepped with the completion's text; its reward is the completion's reward.

``completions_per_second`` is completions over the wall time of ``trainer.train()`` (trainer
construction excluded, as model construction is excluded on our side). TRL is an optional
dependency: ``pip install 'sao-online[trl]'``.
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
import time
from typing import Any

import torch

from sao_online.config import ExperimentConfig
from sao_online.pretrain import base_policy
from sao_online.runtime.envs import make_env


def import_trl() -> Any:
    """Import TRL (and ``datasets``) or explain how to get them."""
    try:
        import datasets
        import trl
    except ImportError as error:
        raise RuntimeError(
            "bench throughput --peer trl needs TRL: pip install 'sao-online[trl]' "
            f"(or pip install trl); import failed: {error}"
        ) from error
    return trl, datasets


def _prompts(config: ExperimentConfig, count: int) -> list[dict[str, Any]]:
    rows = []
    for seed in range(count):
        env = make_env(config, seed=seed)
        observation, _ = env.reset(seed=seed)
        env.close()
        rows.append({"prompt": [{"role": "user", "content": observation}], "seed": seed})
    return rows


def _environment_reward(config: ExperimentConfig):
    def environment_reward(prompts, completions, seed, **kwargs) -> list[float]:
        rewards = []
        for completion, episode_seed in zip(completions, seed):
            text = completion[-1]["content"] if isinstance(completion, list) else completion
            env = make_env(config, seed=int(episode_seed))
            env.reset(seed=int(episode_seed))
            _, reward, _, _, _ = env.step(text)
            env.close()
            rewards.append(float(reward))
        return rewards

    return environment_reward


def run_trl_grpo(config: ExperimentConfig, episodes: int) -> dict[str, Any]:
    """Train the config's policy with TRL's ``GRPOTrainer`` for ``episodes`` completions.

    Args:
        config: the workload's config (model, group size, batch, completion cap, lr).
        episodes: completions to train on (a multiple of ``rollout.batch_size``).

    Returns:
        ``completions``, ``updates``, ``seconds``, ``completions_per_second``,
        ``seconds_per_update``, ``mean_completion_tokens``, ``threads`` and TRL's version.
    """
    trl, datasets = import_trl()
    group = config.algorithm.group_size or 8
    batch = config.rollout.batch_size
    if episodes % batch or batch % group:
        raise ValueError(
            f"run_trl_grpo: episodes ({episodes}) must be a multiple of the batch "
            f"({batch}), itself a multiple of the group ({group})"
        )
    updates = episodes // batch
    policy, tokenizer = base_policy(config)
    policy.train()
    dataset = datasets.Dataset.from_list(_prompts(config, updates * batch // group))
    with tempfile.TemporaryDirectory(prefix="sao-bench-trl-") as folder:
        arguments = trl.GRPOConfig(
            output_dir=folder,
            use_cpu=True,
            report_to=[],
            save_strategy="no",
            logging_steps=1,
            disable_tqdm=True,
            seed=config.seed,
            per_device_train_batch_size=batch,
            gradient_accumulation_steps=1,
            num_generations=group,
            max_completion_length=config.rollout.max_action_tokens,
            max_steps=updates,
            num_iterations=1,
            beta=config.regularizers.kl_coef,
            learning_rate=config.optim.lr,
            temperature=config.rollout.temperature,
            top_p=config.rollout.top_p,
            top_k=0,
            dataloader_num_workers=0,
            max_grad_norm=config.optim.max_grad_norm,
            lr_scheduler_type="constant",
            shuffle_dataset=False,
        )
        trainer = trl.GRPOTrainer(
            model=policy,
            reward_funcs=_environment_reward(config),
            args=arguments,
            train_dataset=dataset,
            processing_class=tokenizer,
        )
        # The trainer prints its logs; stdout is the benchmark's JSON.
        with contextlib.redirect_stdout(sys.stderr):
            started = time.perf_counter()
            trainer.train()
            seconds = time.perf_counter() - started
        history = trainer.state.log_history
    lengths = [
        entry["completions/mean_length"] for entry in history if "completions/mean_length" in entry
    ]
    return {
        "trainer": f"trl {trl.__version__} GRPOTrainer",
        "completions": updates * batch,
        "updates": updates,
        "threads": torch.get_num_threads(),
        "seconds": round(seconds, 3),
        "completions_per_second": round(updates * batch / max(seconds, 1e-9), 2),
        "seconds_per_update": round(seconds / updates, 4),
        "mean_completion_tokens": round(sum(lengths) / len(lengths), 2) if lengths else None,
    }
