"""The learner: one update from a batch of completed trajectories.

``Learner.step`` reads top to bottom: collate, critic values, advantages, K critic updates, one
policy update, bump the version. Diagnostics are namespaced where they are computed
(``losses/``, ``charts/``, ``staleness/``).

The critic and the policy are separate models with separate optimisers, and the only thing one
needs from the other is the advantages (the critic's values, before its updates). So the critic
works in a lane of its own, a thread beside the policy's (the paper's critic trains on its own
resources): its value pass runs while the policy and the reference run their forward passes, and
its K updates run while the policy computes its loss and steps. Each model sees exactly the
operations it saw one after the other, in the same order, so the parameters after an update
are the same either way (``Learner(overlap_critic=False)`` runs the lanes one after the other).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from sao_online.algorithms import Method
from sao_online.config import ExperimentConfig
from sao_online.learning.batching import Batch, collate
from sao_online.learning.losses import value_loss
from sao_online.learning.prefix_sharing import (
    PrefixPlan,
    causal_lm_forward,
    hidden_state_forward,
    plan_prefix_sharing,
    shared_prefix_forward,
    value_model_forward,
)
from sao_online.learning.regularizers import k3_kl, token_entropy, token_exact_kl
from sao_online.learning.types import Trajectory
from sao_online.models.lean_llama import lean_forward_support


def _namespaced(prefix: str, stats: dict[str, float]) -> dict[str, float]:
    return {f"{prefix}/{key}": float(value) for key, value in stats.items()}


def _shift_to_tokens(per_position: torch.Tensor) -> torch.Tensor:
    """Align outputs at position t-1 (which predict token t) with token t; position 0 gets 0."""
    aligned = torch.zeros_like(per_position)
    aligned[:, 1:] = per_position[:, :-1]
    return aligned


def _action_logprobs(action_logits: torch.Tensor, batch: Batch) -> torch.Tensor:
    """[B, T] log p(token t | tokens < t) at every action token t, 0 elsewhere, from the logits
    of the positions that predict action tokens ([N, V], in the order of ``action_mask``)."""
    predicts = batch.action_mask[:, 1:]
    targets = batch.tokens[:, 1:][predicts]
    selected = F.log_softmax(action_logits, dim=-1).gather(1, targets.unsqueeze(1)).squeeze(1)
    shifted = torch.zeros(predicts.shape, dtype=selected.dtype, device=selected.device)
    return F.pad(shifted.masked_scatter(predicts, selected), (1, 0))


@dataclass
class PolicyPass:
    """The policy's forward pass over a batch, before the advantages are known.

    Logits are kept only at the N positions that predict an action token (position t - 1 for
    action token t, in the order of ``batch.action_mask``): nothing else reads them.
    """

    logits: torch.Tensor  # [N, V], temperature-scaled, with grad
    logprobs: torch.Tensor  # [B, T] of the batch's action tokens (0 elsewhere), with grad
    reference_logits: torch.Tensor | None  # [N, V] of the frozen reference, without grad


class _Lanes:
    """Runs the critic's work in its own thread (or inline) and times each lane.

    ``critic(fn, ...)`` returns a future; with ``executor`` None the work has already run.
    ``policy(fn, ...)`` runs in the calling thread. Leaving the ``with`` block waits for every
    critic job, also when the policy's work raised, so no thread is still moving the critic
    once the step is over. Each lane's wall seconds and CPU seconds (of the thread it ran on)
    add up in ``seconds`` and ``cpu_seconds``.
    """

    def __init__(self, executor: ThreadPoolExecutor | None) -> None:
        self.executor = executor
        self.seconds = {"critic": 0.0, "policy": 0.0}
        self.cpu_seconds = {"critic": 0.0, "policy": 0.0}
        self._pending: list[Future] = []

    def _timed(self, lane: str, fn: Callable[..., Any], *args: Any) -> Any:
        started, cpu_started = time.perf_counter(), time.thread_time()
        try:
            return fn(*args)
        finally:
            self.seconds[lane] += time.perf_counter() - started
            self.cpu_seconds[lane] += time.thread_time() - cpu_started

    def critic(self, fn: Callable[..., Any], *args: Any) -> Future:
        if self.executor is not None:
            future = self.executor.submit(self._timed, "critic", fn, *args)
            self._pending.append(future)
            return future
        future: Future = Future()
        future.set_result(self._timed("critic", fn, *args))
        return future

    def policy(self, fn: Callable[..., Any], *args: Any) -> Any:
        return self._timed("policy", fn, *args)

    def __enter__(self) -> _Lanes:
        return self

    def __exit__(self, *exc_info: object) -> None:
        for future in self._pending:
            future.exception()  # waits; an error is raised by whoever reads the result


class Learner:
    """Owns the policy (and critic, reference) and their optimisers; one ``step`` per batch.

    Args:
        policy: a causal LM (``model(input_ids, attention_mask=...).logits``).
        method: the configured method (advantage estimator + policy objective).
        config: the experiment config (optimiser, regularisers, temperature, critic settings).
        pad_token_id: id used to pad batches.
        critic: a value model ``critic(input_ids, attention_mask) -> [B, T]`` when the method
            uses one.
        reference: a frozen copy of the warm-start policy when ``regularizers.kl_coef > 0``.
        share_prefixes: run a prompt shared by the rows of a group once per forward pass
            (policy, reference and critic) instead of once per row; the results are the same up
            to float rounding (see ``sao_online.learning.prefix_sharing``). Needs models that
            take and return a Hugging Face key/value cache.
        overlap_critic: run the critic's value pass and updates in a thread of their own,
            beside the policy's passes (the same parameters as one after the other). While
            both lanes run, each uses half of torch's threads (at least one).

    Attributes:
        lane_seconds: after each ``step``, the seconds of work of the ``critic`` lane (value
            pass and updates) and the ``policy`` lane (forward passes, loss, step); with the
            critic overlapped the step takes about the longer of the two.
        lane_cpu_seconds: the same in CPU seconds of each lane's thread (what the work costs
            whatever else the machine is doing).
    """

    def __init__(
        self,
        policy: torch.nn.Module,
        method: Method,
        config: ExperimentConfig,
        pad_token_id: int,
        critic: torch.nn.Module | None = None,
        reference: torch.nn.Module | None = None,
        *,
        share_prefixes: bool = True,
        overlap_critic: bool = True,
    ) -> None:
        if method.uses_critic and critic is None:
            raise ValueError(f"method {method.name!r} needs a critic")
        if config.regularizers.kl_coef > 0 and reference is None:
            raise ValueError("regularizers.kl_coef > 0 needs a reference policy")
        self.policy = policy
        self.critic = critic
        self.reference = reference
        self.method = method
        self.config = config
        self.pad_token_id = pad_token_id
        self.share_prefixes = share_prefixes
        self.overlap_critic = overlap_critic
        self.lane_seconds = {"critic": 0.0, "policy": 0.0}
        self.lane_cpu_seconds = {"critic": 0.0, "policy": 0.0}
        self._critic_thread: ThreadPoolExecutor | None = None
        self.version = 0
        self.device = next(policy.parameters()).device
        optim = config.optim
        # foreach: one multi-tensor op per Adam stage instead of a Python loop over parameters
        # (the default on CPU); the arithmetic is the same.
        self.policy_optimizer = torch.optim.AdamW(
            [p for p in policy.parameters() if p.requires_grad],
            lr=optim.lr,
            betas=tuple(optim.betas),
            weight_decay=optim.weight_decay,
            foreach=True,
        )
        self.critic_optimizer = None
        if critic is not None:
            self.critic_optimizer = torch.optim.AdamW(
                [p for p in critic.parameters() if p.requires_grad],
                lr=optim.lr * config.algorithm.critic_lr_multiple,
                betas=tuple(optim.betas),
                weight_decay=optim.weight_decay,
                foreach=True,
            )

    # -- the update -------------------------------------------------------------------------
    def step(self, trajectories: Sequence[Trajectory]) -> dict[str, float]:
        """One learner update on ``trajectories``; returns namespaced metrics."""
        # Trajectories arrive on the CPU; the update runs where the policy is (a GPU, say).
        batch = collate(trajectories, self.pad_token_id).to(self.device)
        # Members of a group share their prompt: each forward pass runs it once (None: no sharing).
        plan = (
            plan_prefix_sharing(batch.tokens, batch.attention_mask, batch.group_ids)
            if self.share_prefixes
            else None
        )
        metrics: dict[str, float] = {
            "charts/reward_mean": float(batch.episode_rewards.mean()),
            "charts/action_tokens": float(batch.num_action_tokens.sum()),
        }
        uses_critic = self.method.uses_critic
        critic_only = uses_critic and self.version < self.config.algorithm.critic_warmup_steps
        with self._lanes() as lanes:
            # Neither the critic's value pass nor the policy's forward passes need advantages.
            # The first critic update reuses the value pass (same weights): it keeps its graph.
            values = lanes.critic(self._critic_values, batch, plan) if uses_critic else None
            policy_pass = None if critic_only else lanes.policy(self._policy_forward, batch, plan)
            result = self.method.estimator(
                batch, None if values is None else values.result().detach()
            )
            metrics.update(_namespaced("charts", result.stats))
            if uses_critic:
                critic_metrics = lanes.critic(
                    self._critic_updates, batch, plan, result, values.result()
                )
            policy_metrics = (
                {}
                if policy_pass is None
                else lanes.policy(self._policy_update, batch, policy_pass, result.advantages)
            )
            if uses_critic:
                metrics.update(critic_metrics.result())
        metrics.update(policy_metrics)
        metrics["charts/critic_only_step"] = float(critic_only)
        self.lane_seconds = dict(lanes.seconds)
        self.lane_cpu_seconds = dict(lanes.cpu_seconds)
        self.version += 1
        return metrics

    @contextlib.contextmanager
    def _lanes(self) -> Iterator[_Lanes]:
        """The step's lanes; overlapped, each gets half of torch's threads while they run."""
        if not (self.overlap_critic and self.method.uses_critic):
            with _Lanes(None) as lanes:
                yield lanes
            return
        if self._critic_thread is None:
            self._critic_thread = ThreadPoolExecutor(1, thread_name_prefix="sao-critic")
        threads = torch.get_num_threads()
        shared = max(1, threads // 2)
        torch.set_num_threads(shared)
        try:
            with _Lanes(self._critic_thread) as lanes:
                yield lanes
        finally:
            torch.set_num_threads(threads)

    def close(self) -> None:
        """Stops the critic's thread (a later ``step`` starts a new one)."""
        if self._critic_thread is not None:
            self._critic_thread.shutdown(wait=True)
            self._critic_thread = None

    def _critic_values(self, batch: Batch, plan: PrefixPlan | None) -> torch.Tensor:
        """V(prefix before token t) at position t: the critic's output at t - 1."""
        if plan is None:
            values = self.critic(batch.tokens, attention_mask=batch.attention_mask)
        else:
            values = shared_prefix_forward(
                value_model_forward(self.critic), batch.tokens, plan, self.pad_token_id
            )
        return _shift_to_tokens(values)

    def _critic_updates(
        self, batch: Batch, plan: PrefixPlan | None, result: Any, values: torch.Tensor
    ) -> dict[str, float]:
        """The K critic updates; the first one reuses ``values`` (the value pass's graph)."""
        value_mask = batch.action_mask if result.value_mask is None else result.value_mask
        metrics: dict[str, float] = {}
        for update in range(self.config.algorithm.critic_updates):
            metrics.update(
                self._critic_update(
                    batch, plan, result.critic_returns, value_mask, values if update == 0 else None
                )
            )
        return metrics

    def _critic_update(
        self,
        batch: Batch,
        plan: PrefixPlan | None,
        returns: torch.Tensor,
        value_mask: torch.Tensor,
        values: torch.Tensor | None = None,
    ) -> dict[str, float]:
        if values is None:
            values = self._critic_values(batch, plan)
        loss, stats = value_loss(values, returns, value_mask)
        grad_norm = self._apply(loss, self.critic, self.critic_optimizer)
        return {
            "losses/value": loss.item(),
            "charts/grad_norm_critic": grad_norm,
            **_namespaced("charts", {k: v for k, v in stats.items() if k != "loss"}),
        }

    def _policy_forward(self, batch: Batch, plan: PrefixPlan | None) -> PolicyPass:
        logits = self._action_logits(self.policy, batch, plan)
        reference_logits = None
        if self.reference is not None:
            with torch.no_grad():
                reference_logits = self._action_logits(self.reference, batch, plan)
        return PolicyPass(logits, _action_logprobs(logits, batch), reference_logits)

    def _policy_update(
        self, batch: Batch, policy_pass: PolicyPass, advantages: torch.Tensor
    ) -> dict[str, float]:
        regs = self.config.regularizers
        logits, logprobs = policy_pass.logits, policy_pass.logprobs
        # The policy before this update's gradient step is decoupled PPO's proximal policy. One
        # step is taken per batch, so its logprobs are this forward pass's, detached: no extra
        # pass, and the step is taken at the proximal policy itself.
        batch = dataclasses.replace(batch, proximal_logprobs=logprobs.detach())
        loss, stats = self.method.objective(logprobs, batch, advantages)
        metrics = {"losses/policy": loss.item(), **_namespaced("charts", stats)}
        action_tokens = batch.action_mask[:, 1:].sum().clamp(min=1)
        with torch.set_grad_enabled(regs.entropy_coef > 0):  # a diagnostic unless it is a bonus
            entropy = token_entropy(logits).sum() / action_tokens
        metrics["charts/entropy"] = entropy.item()
        if regs.entropy_coef > 0:
            loss = loss - regs.entropy_coef * entropy
        if policy_pass.reference_logits is not None:
            ref_logits = policy_pass.reference_logits
            if regs.kl_estimator == "exact":
                kl = token_exact_kl(logits, ref_logits).sum() / action_tokens
            else:
                ref_logprobs = _action_logprobs(ref_logits, batch)
                kl = k3_kl(logprobs, ref_logprobs, batch.action_mask)
            metrics["charts/kl_to_reference"] = kl.item()
            loss = loss + regs.kl_coef * kl
        metrics["losses/total"] = loss.item()
        metrics["charts/grad_norm_policy"] = self._apply(loss, self.policy, self.policy_optimizer)
        metrics["losses/skipped_nonfinite"] = float(
            not math.isfinite(metrics["charts/grad_norm_policy"])
        )
        return metrics

    def _action_logits(
        self, model: torch.nn.Module, batch: Batch, plan: PrefixPlan | None
    ) -> torch.Tensor:
        """[N, V] temperature-scaled logits of the positions that predict action tokens.

        For Llama-family models the output head runs on those positions only (the model's
        final hidden states elsewhere are never needed); for others the whole [B, T, V] logits
        are computed and the rows picked.
        """
        predicts = batch.action_mask[:, 1:]
        if lean_forward_support(model) is None:
            if plan is None:
                hidden = model.model(
                    input_ids=batch.tokens, attention_mask=batch.attention_mask.long()
                ).last_hidden_state
            else:
                hidden = shared_prefix_forward(
                    hidden_state_forward(model.model), batch.tokens, plan, self.pad_token_id
                )
            logits = model.get_output_embeddings()(hidden[:, :-1][predicts])
        else:
            if plan is None:
                full = model(
                    input_ids=batch.tokens, attention_mask=batch.attention_mask.long()
                ).logits
            else:
                full = shared_prefix_forward(
                    causal_lm_forward(model), batch.tokens, plan, self.pad_token_id
                )
            logits = full[:, :-1][predicts]
        # Skipping the no-op conversions saves a copy and its backward.
        if logits.dtype != torch.float32:
            logits = logits.float()
        temperature = self.config.rollout.temperature
        return logits if temperature == 1.0 else logits / temperature

    def _apply(
        self, loss: torch.Tensor, model: torch.nn.Module, optimizer: torch.optim.Optimizer
    ) -> float:
        """Backward, clip, step — unless the loss or gradient is not finite (then nothing moves)."""
        optimizer.zero_grad(set_to_none=True)
        if not torch.isfinite(loss):
            return float("nan")
        loss.backward()
        params = [p for p in model.parameters() if p.grad is not None]
        grad_norm = torch.nn.utils.clip_grad_norm_(params, self.config.optim.max_grad_norm)
        if not torch.isfinite(grad_norm):
            optimizer.zero_grad(set_to_none=True)
            return float("nan")
        optimizer.step()
        return float(grad_norm)

    # -- checkpoints ------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        state = {
            "version": self.version,
            "policy": self.policy.state_dict(),
            "policy_optimizer": self.policy_optimizer.state_dict(),
            "estimator": self.method.estimator.state_dict(),
        }
        if self.critic is not None:
            state["critic"] = self.critic.state_dict()
            state["critic_optimizer"] = self.critic_optimizer.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.version = state["version"]
        self.policy.load_state_dict(state["policy"])
        self.policy_optimizer.load_state_dict(state["policy_optimizer"])
        self.method.estimator.load_state_dict(state["estimator"])
        if self.critic is not None:
            self.critic.load_state_dict(state["critic"])
            self.critic_optimizer.load_state_dict(state["critic_optimizer"])
