import copy

import pytest
import torch
import torch.nn.functional as F
from tiny_model import tiny_overrides

from sao_online.algorithms import METHODS, SINGLE_ROLLOUT_METHODS
from sao_online.config import load_config
from sao_online.learning.batching import collate
from sao_online.learning.prefix_sharing import plan_prefix_sharing
from sao_online.learning.regularizers import entropy_bonus, exact_kl, k3_kl
from sao_online.runtime.context import RunContext
from sao_online.runtime.envs import plan_to_request

TINY = tiny_overrides(
    "runtime.backend=sync",
)


def sample_batch(ctx, temperature_overrides=()):
    plans = []
    while len(plans) < ctx.config.rollout.batch_size:
        plans.extend(ctx.planner.next_group())
    requests = iter([plan_to_request(ctx.config, plan) for plan in plans])
    engine = ctx.make_engine(num_slots=8)
    return list(engine.run(lambda: next(requests, None)))


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_learner_logprobs_equal_the_samplers_before_any_update(temperature):
    config = load_config(
        None, TINY + [f"rollout.temperature={temperature}", "algorithm.critic_warmup_steps=0"]
    )
    ctx = RunContext.build(config)
    metrics = ctx.learner.step(sample_batch(ctx))
    # Same weights, same temperature: every ratio is 1, so nothing is masked on either side.
    assert metrics["charts/masked_below_fraction"] == 0.0
    assert metrics["charts/masked_above_fraction"] == 0.0
    assert metrics["charts/ratio_mean"] == pytest.approx(1.0, abs=1e-4)


def test_critic_warmup_steps_leave_the_policy_untouched():
    config = load_config(None, TINY + ["algorithm.critic_warmup_steps=2"])
    ctx = RunContext.build(config)
    before = [p.detach().clone() for p in ctx.policy.parameters()]
    critic_head = ctx.learner.critic.value_head.weight.detach().clone()
    batch = sample_batch(ctx)
    batch[0].rewards[batch[0].action_mask.nonzero()[-1]] = 1.0  # a return for the critic to fit
    metrics = ctx.learner.step(batch)
    assert metrics["charts/critic_only_step"] == 1.0 and "losses/policy" not in metrics
    assert all(torch.equal(a, b) for a, b in zip(before, ctx.policy.parameters()))
    assert not torch.equal(critic_head, ctx.learner.critic.value_head.weight)
    assert ctx.learner.version == 1


def test_non_finite_loss_skips_the_update_and_says_so():
    config = load_config(None, TINY + ["algorithm.name=sao_running_mean"])
    ctx = RunContext.build(config)
    batch = sample_batch(ctx)
    batch[0].rewards[batch[0].action_mask.nonzero()[-1]] = 1.0
    before = [p.detach().clone() for p in ctx.policy.parameters()]
    # A numerical blow-up inside the policy's forward pass during the update.
    hook = ctx.policy.lm_head.register_forward_hook(lambda module, args, out: out * float("nan"))
    metrics = ctx.learner.step(batch)
    hook.remove()
    assert metrics["losses/skipped_nonfinite"] == 1.0
    assert all(torch.equal(a, b) for a, b in zip(before, ctx.policy.parameters()))
    assert all(torch.isfinite(p).all() for p in ctx.policy.parameters())


@pytest.mark.parametrize("name", sorted(set(METHODS) - {"frozen"}))  # frozen: test_frozen.py
def test_every_method_takes_a_finite_step(name):
    overrides = TINY + [
        f"algorithm.name={name}",
        "algorithm.critic_warmup_steps=0",
        "regularizers.kl_coef=0.1",
        "regularizers.entropy_coef=0.01",
    ]
    if name not in SINGLE_ROLLOUT_METHODS:
        overrides.append("algorithm.group_size=4")
    overrides.append("algorithm.baseline_keys=[topic]")  # StyleShift's per-prompt key
    ctx = RunContext.build(load_config(None, overrides))
    before = [p.detach().clone() for p in ctx.policy.parameters()]
    metrics = ctx.learner.step(sample_batch(ctx))
    assert metrics["losses/skipped_nonfinite"] == 0.0
    assert metrics["charts/kl_to_reference"] == pytest.approx(
        0.0, abs=1e-6
    )  # first step: same weights
    changed = any(not torch.equal(a, b) for a, b in zip(before, ctx.policy.parameters()))
    # Group methods see zero advantages when every member of every group scores the same.
    assert changed or metrics.get("charts/zero_variance_group_fraction") == 1.0


@pytest.mark.parametrize(
    "name,extra",
    [
        (
            "grpo",
            [
                "algorithm.group_size=4",
                "regularizers.kl_coef=0.1",
                "regularizers.entropy_coef=0.01",
            ],
        ),
        ("sao", []),  # the critic's passes, on rows that share prompts (GRPO groups fed to SAO)
    ],
)
def test_prefix_sharing_leaves_the_update_unchanged(name, extra):
    grouped = RunContext.build(
        load_config(None, TINY + ["algorithm.name=grpo", "algorithm.group_size=4"])
    )
    trajectories = sample_batch(grouped)
    for trajectory in trajectories[::3]:  # rewards that differ within groups: non-zero advantages
        trajectory.rewards[trajectory.action_mask.nonzero()[-1]] = 1.0
    config = load_config(
        None, TINY + [f"algorithm.name={name}", "algorithm.critic_warmup_steps=0", *extra]
    )
    shared_ctx, plain_ctx = RunContext.build(config), RunContext.build(config)
    plain_ctx.learner.share_prefixes = False
    batch = collate(trajectories, shared_ctx.tokenizer.pad_token_id)
    assert plan_prefix_sharing(batch.tokens, batch.attention_mask, batch.group_ids) is not None
    shared, plain = shared_ctx.learner.step(trajectories), plain_ctx.learner.step(trajectories)
    assert shared.keys() == plain.keys()
    for key, value in plain.items():
        assert shared[key] == pytest.approx(value, rel=1e-4, abs=1e-5), key
    assert plain["charts/grad_norm_policy"] > 0
    models = [(shared_ctx.policy, plain_ctx.policy)]
    if name == "sao":
        assert plain["charts/grad_norm_critic"] > 0
        models.append((shared_ctx.learner.critic, plain_ctx.learner.critic))
    # The gradients of the last update (kept after the optimizer step). Parameters after one Adam
    # step are no test: it divides each gradient by its own magnitude, so rounding-level
    # differences in gradients near zero become visible ones in the update.
    for shared_model, plain_model in models:
        for (key, shared_parameter), plain_parameter in zip(
            shared_model.named_parameters(), plain_model.parameters()
        ):
            assert (shared_parameter.grad is None) == (plain_parameter.grad is None), key
            if plain_parameter.grad is not None:
                torch.testing.assert_close(
                    shared_parameter.grad, plain_parameter.grad, atol=1e-5, rtol=1e-4, msg=key
                )


@pytest.fixture
def one_torch_thread():
    # One thread on both sides: each model then runs the very same kernels in the same order,
    # so the two paths agree bit for bit (with more threads, up to floating-point order).
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("kl_coef", [0.0, 0.2])
def test_critic_beside_the_policy_gives_the_sequential_parameters(kl_coef, one_torch_thread):
    # Three updates, the first critic-only, with rewards that give both models gradients.
    overrides = TINY + [
        "algorithm.name=sao",
        "algorithm.critic_warmup_steps=1",
        f"regularizers.kl_coef={kl_coef}",
    ]
    config = load_config(None, overrides)
    batches = []
    sampler = RunContext.build(config)
    for index in range(3):
        batch = sample_batch(sampler)
        for trajectory in batch[index::2]:
            trajectory.rewards[trajectory.action_mask.nonzero()[-1]] = 1.0
        batches.append(batch)
    overlapped, sequential = RunContext.build(config), RunContext.build(config)
    sequential.learner.overlap_critic = False
    for batch in batches:
        beside = overlapped.learner.step(batch)
        alone = sequential.learner.step(batch)
        assert beside.keys() == alone.keys()
        for key, value in alone.items():
            assert beside[key] == pytest.approx(value, rel=1e-5, abs=1e-7), key
    assert overlapped.learner._critic_thread is not None
    assert sequential.learner._critic_thread is None
    assert beside["charts/grad_norm_policy"] > 0 and beside["charts/grad_norm_critic"] > 0
    for model in ("policy", "critic"):
        for (name, a), b in zip(
            getattr(overlapped.learner, model).named_parameters(),
            getattr(sequential.learner, model).parameters(),
        ):
            assert torch.equal(a, b), f"{model}.{name}"
    assert all(seconds > 0 for seconds in overlapped.learner.lane_seconds.values())
    overlapped.learner.close()


def test_a_failing_critic_update_stops_the_step_after_both_lanes_are_done():
    config = load_config(None, TINY + ["algorithm.name=sao", "algorithm.critic_warmup_steps=0"])
    ctx = RunContext.build(config)
    batch = sample_batch(ctx)
    calls = []

    def failing_updates(*args):
        calls.append("critic")
        raise RuntimeError("critic blew up")

    ctx.learner._critic_updates = failing_updates
    with pytest.raises(RuntimeError, match="critic blew up"):
        ctx.learner.step(batch)
    assert calls == ["critic"] and ctx.learner.version == 0
    ctx.learner.close()


@pytest.mark.parametrize("kl_estimator", ["exact", "k3"])
def test_the_output_head_on_action_positions_only_gives_the_full_forwards_update(
    kl_estimator, one_torch_thread
):
    # The update as written with the whole [B, T, V] logits, against the learner's, which runs
    # the output head only where a position predicts an action token.
    config = load_config(
        None,
        TINY
        + [
            "algorithm.name=grpo",
            "algorithm.group_size=4",
            "regularizers.kl_coef=0.1",
            "regularizers.entropy_coef=0.01",
            f"regularizers.kl_estimator={kl_estimator}",
            "rollout.temperature=0.7",
        ],
    )
    ctx = RunContext.build(config)
    trajectories = sample_batch(ctx)
    for trajectory in trajectories[::3]:
        trajectory.rewards[trajectory.action_mask.nonzero()[-1]] = 1.0
    learner = ctx.learner
    learner.share_prefixes = False  # prefix sharing has its own test
    policy = copy.deepcopy(ctx.policy)
    batch = collate(trajectories, ctx.tokenizer.pad_token_id)
    mask = batch.attention_mask.long()

    def full_logits(model):
        return model(input_ids=batch.tokens, attention_mask=mask).logits[:, :-1] / 0.7

    def logprobs_of(logits):
        chosen = logits.log_softmax(-1).gather(2, batch.tokens[:, 1:, None]).squeeze(-1)
        return F.pad(chosen, (1, 0))

    logits = full_logits(policy)
    with torch.no_grad():
        reference = full_logits(learner.reference)
    advantages = ctx.method.estimator(batch, None).advantages
    logprobs = logprobs_of(logits)
    loss, _ = ctx.method.objective(logprobs, batch, advantages)
    next_mask = batch.action_mask[:, 1:]
    entropy = entropy_bonus(logits, next_mask)
    if kl_estimator == "exact":
        kl = exact_kl(logits, reference, next_mask)
    else:
        kl = k3_kl(logprobs, logprobs_of(reference), batch.action_mask)
    total = loss - 0.01 * entropy + 0.1 * kl
    total.backward()
    torch.nn.utils.clip_grad_norm_(policy.parameters(), config.optim.max_grad_norm)

    metrics = learner.step(trajectories)
    expected = {
        "losses/policy": loss.item(),
        "charts/entropy": entropy.item(),
        "charts/kl_to_reference": kl.item(),
        "losses/total": total.item(),
    }
    for key, value in expected.items():
        assert metrics[key] == pytest.approx(value, rel=1e-5, abs=1e-7), key
    assert metrics["charts/grad_norm_policy"] > 0
    for (name, expected_parameter), parameter in zip(
        policy.named_parameters(), ctx.policy.parameters()
    ):
        torch.testing.assert_close(parameter.grad, expected_parameter.grad, msg=name)


def perturb(policy, seed=0, scale=0.05):
    """Move every weight by seeded noise: the batch sampled before is then stale."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in policy.parameters():
            parameter.add_(scale * torch.randn(parameter.shape, generator=generator))


# What each correction logs beside the effective sample size: the share it masked, truncated or
# clipped.
CORRECTION_SHARES = {
    "tis": ["charts/truncated_fraction"],
    "mis": [
        "charts/masked_below_fraction",
        "charts/masked_above_fraction",
        "charts/rejected_sequence_fraction",
    ],
    "decoupled": ["charts/clip_fraction", "charts/masked_above_fraction"],
    "nocorr": [],
}


@pytest.mark.parametrize("estimator", ["sao", "grpo"])
@pytest.mark.parametrize("correction", sorted(CORRECTION_SHARES))
def test_each_correction_method_steps_on_stale_data_and_logs_its_shares(estimator, correction):
    name = f"{estimator}_{correction}"
    overrides = TINY + [f"algorithm.name={name}", "algorithm.critic_warmup_steps=0"]
    if estimator == "grpo":
        overrides.append("algorithm.group_size=4")
    sampler = RunContext.build(load_config(None, overrides))
    trajectories = sample_batch(sampler)
    for trajectory in trajectories[::3]:
        trajectory.rewards[trajectory.action_mask.nonzero()[-1]] = 1.0
    ctx = RunContext.build(load_config(None, overrides))
    perturb(ctx.policy)
    before = [p.detach().clone() for p in ctx.policy.parameters()]
    metrics = ctx.learner.step(trajectories)
    assert metrics["losses/skipped_nonfinite"] == 0.0
    assert any(not torch.equal(a, b) for a, b in zip(before, ctx.policy.parameters()))
    assert metrics["charts/ratio_max"] > 1.01  # the data is stale: the weights matter
    assert 0.0 < metrics["charts/effective_sample_size"] <= 1.0
    for key in CORRECTION_SHARES[correction]:
        assert 0.0 <= metrics[key] <= 1.0, key
    if correction == "nocorr":
        assert metrics["charts/effective_sample_size"] == 1.0
    if correction == "decoupled":  # one step per batch, at the proximal policy
        assert metrics["charts/clip_fraction"] == 0.0
        assert metrics["charts/proximal_ratio_mean"] == 1.0


def test_one_decoupled_ppo_step_is_an_untruncated_importance_sampling_step(one_torch_thread):
    # The learner takes one gradient step per batch from the policy whose forward pass gave the
    # logprobs, so the proximal policy is the current one: decoupled PPO's gradient is TIS's
    # with no cap, on stale data whose weights pi_theta / pi_behav differ from 1.
    overrides = TINY + ["algorithm.group_size=4"]
    sampler = RunContext.build(load_config(None, overrides + ["algorithm.name=grpo_tis"]))
    trajectories = sample_batch(sampler)
    for trajectory in trajectories[::3]:
        trajectory.rewards[trajectory.action_mask.nonzero()[-1]] = 1.0
    decoupled = RunContext.build(load_config(None, overrides + ["algorithm.name=grpo_decoupled"]))
    untruncated = RunContext.build(
        load_config(None, overrides + ["algorithm.name=grpo_tis", "algorithm.tis_cap=.inf"])
    )
    for ctx in (decoupled, untruncated):
        perturb(ctx.policy)
    with_proximal = decoupled.learner.step(trajectories)
    with_cap_inf = untruncated.learner.step(trajectories)
    assert with_cap_inf["charts/ratio_max"] > 1.05 and with_cap_inf["charts/grad_norm_policy"] > 0
    assert with_proximal["charts/behavior_weight_mean"] == pytest.approx(
        with_cap_inf["charts/ratio_mean"], rel=1e-6
    )
    assert with_proximal["charts/clip_fraction"] == 0.0
    assert with_proximal["charts/effective_sample_size"] == pytest.approx(
        with_cap_inf["charts/effective_sample_size"], rel=1e-6
    )
    for (name, a), b in zip(decoupled.policy.named_parameters(), untruncated.policy.parameters()):
        torch.testing.assert_close(a.grad, b.grad, msg=name)
