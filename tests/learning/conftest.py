"""Shared pieces of the learning tests: a small warm start, a short run, a paired evaluation.

A test module declares ``SETTING`` (the keyword arguments of :class:`LearningSetting`) and
asks for the ``learned`` fixture: ``learned("sao")`` trains that method from the module's warm
start (built once per module) and returns a :class:`LearningResult`.

Each family's test warm-starts the 2-layer, 64-wide tiny model on a few hundred of the env's
own demonstrations (:func:`sao_online.pretrain.collect_demonstrations` and
:func:`~sao_online.pretrain.finetune_on_demonstrations`, the pieces of ``sao-online
pretrain``) in a drift-free regime or, where that fit takes longer than the runs, uses the
config's own warm start from the project's warm-start cache (built once per machine). It
trains it with a method for a small budget on the ``sync`` runtime, and samples the warm start
and the trained policy on the same seeded episodes with the same sampling seed (the warm
start once per module: its reward does not depend on the method). The reward
difference of those paired samples is what the tests assert: it does not depend on which
tasks happened to fall into the first or last batches.

``SAO_LEARNING_TESTS_LR`` replaces the runs' learning rate (e.g. ``1e-12``, which freezes the
policy: the config refuses 0): with it every learning test must fail, which is how they were
shown to detect broken learning.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from sao_online.commands.policy_summary import behavior_summary
from sao_online.config import ExperimentConfig, load_config
from sao_online.models import load_policy
from sao_online.pretrain import base_policy, collect_demonstrations, finetune_on_demonstrations
from sao_online.pretrain import warm_start as cached_warm_start
from sao_online.rundir.checkpoints import read_checkpoint
from sao_online.runtime.launch import run_experiment

ROOT = Path(__file__).resolve().parents[2]

#: Every learning test runs on this model size (the README's tiny model is 2 x 128 or 4 x 128).
TEST_MODEL = ["model.name=tiny", "model.num_layers=2", "model.hidden_size=64"]
#: What makes a test run cheap and deterministic: one process, no evaluations, no transcripts,
#: one checkpoint at the end (the trained weights are read from it).
TEST_RUNTIME = [
    "runtime.backend=sync",
    "runtime.torch_threads=1",
    "eval.every_updates=0",
    "logging.transcripts_every=0",
    "logging.checkpoint_every=0",
]


@dataclass(frozen=True)
class LearningSetting:
    """One family's easy, drift-free learning problem and the budgets to solve it.

    Attributes:
        config: the family's experiment YAML (its env, rollout caps and algorithm settings).
        overrides: ``--set`` style changes for everything (the drift-free schedule, env kwargs).
        demonstrations: demonstrations the warm start is fitted on.
        sft_steps / sft_lr / sft_batch_size: the warm start's supervised fine-tuning.
            All four are needed unless ``cached_warm_start``.
        run: ``--set`` style changes for the learning runs only (budget, learning rate, ...).
        warm_start: ``--set`` style changes for the demonstrations only (e.g. a schedule
            that visits every choice the run is about, so the warm start is undecided).
        group_size: rollouts per prompt of the group methods.
        eval_episodes: paired episodes sampled before and after training.
        cached_warm_start: use the config's own warm start instead (its ``model.warm_start_*``
            settings and schedule, ``setting.warm_start`` applied but not ``overrides``), from
            the project's warm-start cache: the one ``sao-online pretrain CONFIG`` builds,
            built once per machine. For the families whose warm start takes longer than their
            runs; ``demonstrations`` and ``sft_*`` are then unused.
    """

    config: str
    overrides: list[str]
    demonstrations: int | None = None
    sft_steps: int | None = None
    sft_lr: float | None = None
    sft_batch_size: int | None = None
    run: list[str] = field(default_factory=list)
    warm_start: list[str] = field(default_factory=list)
    group_size: int = 4
    eval_episodes: int = 128
    cached_warm_start: bool = False

    def __post_init__(self) -> None:
        fitted = (self.demonstrations, self.sft_steps, self.sft_lr, self.sft_batch_size)
        if not self.cached_warm_start and None in fitted:
            raise ValueError("a setting without cached_warm_start needs demonstrations and sft_*")

    def experiment(self, extra: list[str] | None = None) -> ExperimentConfig:
        path = ROOT / self.config
        return load_config(path, [*self.overrides, *TEST_MODEL, *(extra or [])])


@dataclass(frozen=True)
class LearningResult:
    """Mean reward of the warm start and of the trained policy on the same episodes."""

    method: str
    before: float
    after: float
    run_seconds: float

    @property
    def rise(self) -> float:
        return self.after - self.before


def build_warm_start(setting: LearningSetting, folder: Path) -> Path:
    """Fit the tiny model on the setting's demonstrations; save it (``save_pretrained``).

    With ``cached_warm_start``, the config's own warm start from the cache (``folder`` unused).
    """
    if setting.cached_warm_start:
        config = load_config(ROOT / setting.config, [*TEST_MODEL, *setting.warm_start])
        return cached_warm_start(config)
    config = setting.experiment(setting.warm_start)
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    policy, tokenizer = base_policy(config, seed=0, dtype=torch.float32)
    demonstrations = collect_demonstrations(config, tokenizer, setting.demonstrations, rng)
    finetune_on_demonstrations(
        policy,
        demonstrations,
        pad_token_id=tokenizer.pad_token_id,
        steps=setting.sft_steps,
        lr=setting.sft_lr,
        batch_size=setting.sft_batch_size,
        rng=rng,
    )
    policy.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def run_config(setting: LearningSetting, warm_start: Path, method: str, seed: int = 0):
    extra = [
        f"model.name={warm_start}",
        "model.warm_start=false",
        f"algorithm.name={method}",
        f"seed={seed}",
        *TEST_RUNTIME,
        *setting.run,
    ]
    if method.startswith("grpo"):
        extra.append(f"algorithm.group_size={setting.group_size}")
    lr = os.environ.get("SAO_LEARNING_TESTS_LR")
    if lr:
        extra.append(f"optim.lr={lr}")
    return setting.experiment(extra)


def mean_reward(config: ExperimentConfig, policy: Any, tokenizer: Any, episodes: int) -> float:
    """Mean reward over ``episodes`` seeded episodes of the config's first regime."""
    from sao_online.runtime.envs import resolve_schedule

    theta = dict(resolve_schedule(config).at(0).theta)
    summary = behavior_summary(config, policy, tokenizer, theta=theta, episodes=episodes, seed=7)
    return summary["reward_mean"]


def learn(
    setting: LearningSetting,
    warm_start: Path,
    method: str,
    out: Path,
    before: float | None = None,
) -> LearningResult:
    """Train ``method`` from ``warm_start``; evaluate both policies on the same episodes.

    ``before`` is the warm start's mean reward when it has been measured already: it is the
    same for every method (the evaluation depends on the policy, the env and the sampling seed,
    not on the method), so a module measures it once.
    """
    config = run_config(setting, warm_start, method)
    started = time.perf_counter()
    run_experiment(config, out=out, overwrite=True)
    run_seconds = time.perf_counter() - started
    policy, tokenizer = load_policy(str(warm_start))
    if before is None:
        before = mean_reward(config, policy, tokenizer, setting.eval_episodes)
    checkpoints = out / "checkpoints"
    state, _ = read_checkpoint(checkpoints / (checkpoints / "latest").read_text().strip())
    policy.load_state_dict(state["learner"]["policy"])
    after = mean_reward(config, policy, tokenizer, setting.eval_episodes)
    return LearningResult(method, before, after, run_seconds)


@pytest.fixture(autouse=True)
def _one_torch_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def learning_setting(request) -> LearningSetting:
    return LearningSetting(**request.module.SETTING)


@pytest.fixture(scope="module")
def warm_start(learning_setting, tmp_path_factory) -> Path:
    """The module's warm start, fitted once and shared by its tests."""
    return build_warm_start(learning_setting, tmp_path_factory.mktemp("warm-start"))


@pytest.fixture(scope="module")
def warm_start_reward() -> dict[str, float]:
    """The warm start's mean reward, filled by the module's first run and read by the others."""
    return {}


@pytest.fixture
def learned(learning_setting, warm_start, warm_start_reward, tmp_path):
    """``learned(method)``: train ``method`` from the module's warm start; a LearningResult."""

    def train(method: str) -> LearningResult:
        before = warm_start_reward.get("before")
        result = learn(learning_setting, warm_start, method, tmp_path / method, before)
        warm_start_reward["before"] = result.before
        return result

    return train
