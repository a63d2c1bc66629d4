"""Everything a run is made of, built from its config: models, method, learner, schedule,
planner."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import torch

import sao_online.environments  # noqa: F401  (registers the environments)
from sao_online.algorithms import Method, build_method
from sao_online.config import ConfigError, ExperimentConfig
from sao_online.config.run_schedule import resolve_schedule
from sao_online.drift_schedules import Clock, Schedule
from sao_online.learning.learner import Learner
from sao_online.learning.warm_start import base_policy, load_warm_start
from sao_online.models import ValueModel
from sao_online.rollout import RolloutEngine
from sao_online.runtime.engines import build_engine
from sao_online.runtime.frozen import FrozenLearner
from sao_online.runtime.scheduling.planner import EpisodePlanner


@dataclass
class RunContext:
    """The pieces of one run (one method, one seed)."""

    config: ExperimentConfig
    schedule: Schedule
    method: Method
    policy: torch.nn.Module
    tokenizer: Any
    learner: Learner
    planner: EpisodePlanner
    clock: Clock

    @classmethod
    def build(cls, config: ExperimentConfig, progress: bool = False) -> RunContext:
        torch.manual_seed(config.seed)
        schedule = resolve_schedule(config)
        method = build_method(config)
        if config.rollout.batch_size % method.group_size:
            raise ConfigError(
                f"rollout.batch_size: {config.rollout.batch_size} is not a multiple of the "
                f"group size {method.group_size} of {method.name}"
            )
        clock = schedule.make_clock()  # the run's one clock (see planner.py for who moves it)
        try:  # before the warm start loads: a bad budget.match or start fails at once
            planner = EpisodePlanner(
                schedule,
                method.group_size,
                config.seed,
                clock=clock,
                per_prompt=config.budget.match == "prompts",
            )
            if config.budget.start:
                planner.start_at(config.budget.start)
        except ValueError as error:
            raise ConfigError(str(error)) from None
        if config.model.warm_start:
            policy, tokenizer = load_warm_start(config, progress=progress)
        else:
            policy, tokenizer = base_policy(config)
        critic = None
        if method.uses_critic:
            critic = ValueModel.from_policy(
                policy, freeze_attention=config.algorithm.freeze_critic_attention
            )
        reference = None
        if config.regularizers.kl_coef > 0:
            reference = copy.deepcopy(policy).eval()
            reference.requires_grad_(False)
        policy.train()
        learner_class = Learner if method.updates_policy else FrozenLearner
        learner = learner_class(
            policy,
            method,
            config,
            pad_token_id=tokenizer.pad_token_id,
            critic=critic,
            reference=reference,
        )
        return cls(config, schedule, method, policy, tokenizer, learner, planner, clock)

    def make_engine(
        self,
        model: torch.nn.Module | None = None,
        seed: int | None = None,
        num_slots: int | None = None,
    ) -> RolloutEngine:
        return build_engine(
            self.config,
            self.policy if model is None else model,
            self.tokenizer,
            seed=self.config.seed if seed is None else seed,
            num_slots=num_slots or self.config.rollout.num_slots,
        )
