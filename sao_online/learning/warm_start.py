"""The warm start: supervised fine-tuning on demonstrations across every regime.

The demonstrations come from each environment's ``demonstration_action``: competent actions
that do not know the hidden regime (for StyleShift, a line in a style drawn from the offered
pool). The warm-started policy can therefore do every choice the drift is about and is
undecided between them; finding out which one pays, and re-finding it after a shift, is left to
RL. Regimes are drawn uniformly from the environment's drift space.

The result is cached under a content hash of everything that produced it (model spec, SFT
settings, environment id and kwargs, and the source of the environment and of this module), so
``make demo`` and repeated runs reuse it.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

import sao_online.environments  # noqa: F401  (registers the environments)
import sao_online.models as models_package
from sao_online.config import ConfigError, ExperimentConfig
from sao_online.config.run_schedule import clock_horizon, resolve_schedule
from sao_online.drift_schedules import Choice, normalize_space
from sao_online.environments import check_env_id
from sao_online.models import (
    ChatLayout,
    build_tiny_policy,
    load_policy,
    resolve_device,
    resolve_dtype,
)
from sao_online.rundir.provenance import machine
from sao_online.util.cache import (  # noqa: F401  (cache_root, warm_start_weights: public here)
    cache_root,
    warm_start_root,
    warm_start_weights,
    weights_id,
)
from sao_online.util.quiet import progress_bars
from sao_online.util.units import format_duration

WARM_START_FORMAT = 1  # bump when the layout of the cached folder changes


def base_policy(
    config: ExperimentConfig, seed: int | None = None, dtype: torch.dtype | None = None
):
    """The untrained (or pretrained, for a real model) policy and tokenizer the config names.

    The model is placed on ``model.device`` in ``model.dtype`` (``dtype`` overrides the latter).
    """
    model_cfg = config.model
    device = resolve_device(model_cfg.device)
    dtype = dtype or resolve_dtype(model_cfg.dtype, device)
    if model_cfg.name == "tiny":
        policy, tokenizer = build_tiny_policy(
            num_layers=model_cfg.num_layers,
            hidden_size=model_cfg.hidden_size,
            seed=config.seed if seed is None else seed,
            dtype=dtype,
        )
    else:
        policy, tokenizer = load_policy(model_cfg.name, gguf_file=model_cfg.gguf_file, dtype=dtype)
    return policy.to(device), tokenizer


def chat_layout(config: ExperimentConfig, tokenizer: Any) -> ChatLayout:
    """The episode layout the config asks for (system prompt, role of observations)."""
    return ChatLayout(
        tokenizer,
        system_prompt=config.model.system_prompt,
        observation_role=config.model.observation_role,
    )


def _sample_from_space(drift_space: Any, rng: np.random.Generator) -> dict[str, Any]:
    theta = {}
    for name, spec in drift_space.items():
        if isinstance(spec, Choice):
            theta[name] = spec.values[int(rng.integers(len(spec.values)))]
        else:
            theta[name] = float(rng.uniform(spec.low, spec.high))
    return theta


def schedule_phases(config: ExperimentConfig) -> list[tuple[float, float]]:
    """The ``[start, end)`` clock intervals of the phases the run's schedule visits.

    Raises:
        ConfigError: the schedule's clock has no known horizon (seconds).
    """
    schedule = resolve_schedule(config)
    horizon = clock_horizon(config, schedule)
    if horizon is None:
        raise ConfigError(
            "model.warm_start_regimes: 'schedule' needs a schedule whose clock has a known end "
            f"(episodes, steps or versions), not {schedule.clock}"
        )
    points = [t for t in schedule.change_points(until=horizon) if 0 < t < horizon]
    bounds = [0.0, *points, horizon]
    return list(zip(bounds[:-1], bounds[1:]))


def phase_shares(config: ExperimentConfig, phases: int) -> np.ndarray:
    """The share of warm-start demonstrations drawn from each of the schedule's ``phases``.

    Raises:
        ConfigError: ``model.warm_start_phase_weights`` does not give one weight per phase.
    """
    weights = config.model.warm_start_phase_weights
    if weights is None:
        return np.full(phases, 1.0 / phases)
    if len(weights) != phases:
        raise ConfigError(
            f"model.warm_start_phase_weights: one weight per phase of the schedule within the "
            f"budget ({phases}), got {len(weights)}: {weights}"
        )
    return np.asarray(weights, dtype=float) / float(sum(weights))


def regime_sampler(
    config: ExperimentConfig, env: Any
) -> Callable[[np.random.Generator], dict[str, Any]]:
    """How the warm start draws the regime of each demonstration (``model.warm_start_regimes``).

    ``space``: every parameter uniformly from the env's drift space. ``schedule``: a phase of
    the run's schedule (uniformly, or by ``model.warm_start_phase_weights``), then a clock
    reading uniformly inside it, and the schedule's theta there; so the policy learns the
    choices the experiment is about and nothing else.

    Raises:
        ConfigError: the phase weights are not one per phase of the schedule.
    """
    if config.model.warm_start_regimes == "space":
        drift_space = normalize_space(env.unwrapped.drift_space)
        return lambda rng: _sample_from_space(drift_space, rng)
    schedule = resolve_schedule(config)
    phases = schedule_phases(config)
    shares = phase_shares(config, len(phases))
    uniform = config.model.warm_start_phase_weights is None

    def sample(rng: np.random.Generator) -> dict[str, Any]:
        pick = rng.integers(len(phases)) if uniform else rng.choice(len(phases), p=shares)
        start, end = phases[int(pick)]
        return dict(schedule.at(float(rng.uniform(start, end))).theta)

    return sample


def demonstration_episode(
    env: Any,
    layout: ChatLayout,
    seed: int,
    rng: np.random.Generator,
    max_turns: int,
    theta: dict[str, Any] | None = None,
    follow_regime: bool = False,
) -> tuple[list[int], list[bool], str]:
    """One demonstration as (tokens, action_mask, behavior) in the rollout engine's layout.

    ``theta`` is the regime; None draws one uniformly from the env's drift space. The actions
    are the env's ``demonstration_action`` (competent, not told the regime), or with
    ``follow_regime`` its ``oracle_action`` (the regime's own choice).
    """
    tokenizer = layout.tokenizer
    end_token = tokenizer.eos_token
    if theta is None:
        theta = _sample_from_space(normalize_space(env.unwrapped.drift_space), rng)
    observation, info = env.reset(seed=seed, options={"drift": theta})
    tokens = layout.prompt_tokens(observation)
    mask = [False] * len(tokens)
    history = [{"role": "user", "content": observation}]
    behavior = ""
    act = env.unwrapped.oracle_action if follow_regime else env.unwrapped.demonstration_action
    for _ in range(max_turns):
        action = act(observation, info)
        action_tokens = layout.encode(action) + [tokenizer.eos_token_id]
        tokens += action_tokens
        mask += [True] * len(action_tokens)
        history.append({"role": "assistant", "content": action})
        observation, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            behavior = str(info.get("behavior", ""))
            break
        segment = layout.observation_tokens(history, observation, action_end=end_token)
        tokens += segment
        mask += [False] * len(segment)
        history.append(layout.observation_message(observation))
    return tokens, mask, behavior


def _regimes_key(config: ExperimentConfig) -> Any:
    """What decides the demonstrations' regimes (the schedule and budget only when they do)."""
    if config.model.warm_start_regimes == "space":
        return "space"
    phases = schedule_phases(config)
    return {
        "schedule": resolve_schedule(config).to_dict(),
        "phases": phases,
        "shares": phase_shares(config, len(phases)).tolist(),
    }


def _module_source(name: str) -> str:
    try:
        return inspect.getsource(sys.modules[name])
    except (OSError, TypeError, KeyError):  # defined interactively: no file to read
        return name


def warm_start_settings(config: ExperimentConfig) -> dict[str, Any]:
    """What a warm start was fitted for: the model, the SFT settings, the environment, the
    rollout's turns, the seed and the regimes drawn. Two configs with equal settings take the
    same warm start (the code that fitted it aside); JSON-ready."""
    check_env_id(config.env.id)  # says how to register or import an unknown id
    settings = {
        "format": WARM_START_FORMAT,
        "model": {
            k: getattr(config.model, k)
            for k in (
                "name",
                "gguf_file",
                "num_layers",
                "hidden_size",
                "warm_start_steps",
                "warm_start_lr",
                "warm_start_batch_size",
                "warm_start_oracle_share",
                "system_prompt",
                "observation_role",
            )
        },
        "env": {"id": config.env.id, "kwargs": config.env.kwargs},
        "max_turns": config.rollout.max_turns,
        "seed": config.model.warm_start_seed,
        "regimes": _regimes_key(config),
    }
    return json.loads(json.dumps(settings, sort_keys=True, default=str))


def _cache_key(config: ExperimentConfig) -> str:
    settings = warm_start_settings(config)  # first: it names an unknown env id
    env_class = type(config.env.make().unwrapped)
    # Everything that shapes the demonstrations or the token layout: this module, the env's
    # classes (base included), and the model package (tokenizer, chat layout, policy).
    # A user's env module counts too, so editing a task rebuilds its warm start.
    modules = {__name__, *(cls.__module__ for cls in env_class.__mro__)}
    sources = [
        _module_source(name)
        for name in sorted(modules)
        if name.startswith("sao_online") or name == env_class.__module__
    ]
    sources += [
        path.read_text() for path in sorted(Path(models_package.__file__).parent.glob("*.py"))
    ]
    payload = {
        **settings,
        "sources": [hashlib.sha256(s.encode()).hexdigest() for s in sources],
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[
        :16
    ]


def warm_start_path(config: ExperimentConfig) -> Path:
    return warm_start_root() / _cache_key(config)


#: SFT steps timed before the warm start announces its estimated duration, after the first
#: ``UNTIMED_STEPS`` (they pay one-off costs: allocations, caches; timed from the second step,
#: a 300-step warm start announced 4 min and took 16 s).
UNTIMED_STEPS = 3
TIMED_STEPS = 5


def warm_start_announcement(
    config: ExperimentConfig, path: Path, steps: int, demonstrations: int, steps_per_second: float
) -> str:
    """The line a warm start prints as it starts training: what it is, how long it should take
    (its step count at the speed of its first steps) and where it is kept, e.g. ``warm start:
    300 SFT steps of the tiny model on 2048 demonstrations of sao_online/StyleShift-v0, about
    3 min at 1.5 steps/s; built once, cached in ~/.cache/sao-online/warm-start/<hash> ...``."""
    return (
        f"warm start: {steps} SFT steps of the {config.model.name} model on {demonstrations} "
        f"demonstrations of {config.env.id}, about "
        f"{format_duration(steps / max(steps_per_second, 1e-9))} at {steps_per_second:.1f} "
        f"steps/s; built once, cached in {path} (`sao-online pretrain --list`)"
    )


def collect_demonstrations(
    config: ExperimentConfig, tokenizer: Any, count: int, rng: np.random.Generator
) -> list[tuple[list[int], list[bool], str]]:
    """``count`` demonstrations as (tokens, action_mask, behavior), regimes drawn as the
    warm start draws them (``model.warm_start_regimes``), in the config's episode layout; a
    ``model.warm_start_oracle_share`` of them act as the oracle of their regime."""
    layout = chat_layout(config, tokenizer)
    env = gymnasium.make(config.env.id, **config.env.kwargs)
    draw_regime = regime_sampler(config, env)
    share, turns = config.model.warm_start_oracle_share, config.rollout.max_turns

    def one() -> tuple[list[int], list[bool], str]:
        seed, theta = int(rng.integers(2**31 - 1)), draw_regime(rng)
        follow = share > 0 and bool(rng.random() < share)  # at 0 no draw: the same demos
        return demonstration_episode(env, layout, seed, rng, turns, theta, follow_regime=follow)

    try:
        return [one() for _ in range(count)]
    finally:
        env.close()


def finetune_on_demonstrations(
    policy: Any,
    demonstrations: list[tuple[list[int], list[bool], str]],
    *,
    pad_token_id: int,
    steps: int,
    lr: float,
    batch_size: int,
    rng: np.random.Generator,
    progress: bool = False,
    on_speed: Callable[[float], None] | None = None,
) -> list[float]:
    """Supervised fine-tuning of ``policy`` on its action tokens in ``demonstrations``.

    Each step draws ``batch_size`` demonstrations with replacement; AdamW at ``lr`` with a
    20-step warm-up and a linear decay to 5%, gradients clipped at norm 1. The policy is left in
    eval mode. ``on_speed``, when given, is called once with the steps per second of the first
    few steps (after the first, which pays one-off costs).

    Returns:
        The loss (mean cross-entropy per action token) of every step.
    """
    device = next(policy.parameters()).device
    policy.train()
    optimizer = torch.optim.AdamW(policy.parameters(), lr=lr, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / 20) * max(0.05, 1 - step / max(steps, 1))
    )
    losses = []
    bar = tqdm(
        range(steps), desc="warm start (SFT)", disable=not progress_bars(progress), unit="step"
    )
    timed_from = 0.0
    # A short warm start times what it has: it announces itself before its last step.
    untimed = min(UNTIMED_STEPS, max(1, steps // 4))
    timed = max(1, min(TIMED_STEPS, steps - untimed - 1))
    for step in bar:
        # The first steps pay one-off costs: the speed is timed over the few after them.
        if step == untimed:
            timed_from = time.monotonic()
        elif on_speed is not None and step == untimed + timed:
            on_speed(TIMED_STEPS / max(time.monotonic() - timed_from, 1e-9))
        picks = rng.integers(len(demonstrations), size=batch_size)
        batch = [demonstrations[i] for i in picks]
        length = max(len(tokens) for tokens, _, _ in batch)
        input_ids = torch.full((len(batch), length), pad_token_id, dtype=torch.long)
        loss_mask = torch.zeros((len(batch), length), dtype=torch.bool)
        attention = torch.zeros((len(batch), length), dtype=torch.long)
        for row, (tokens, mask, _) in enumerate(batch):
            input_ids[row, : len(tokens)] = torch.tensor(tokens)
            loss_mask[row, : len(mask)] = torch.tensor(mask)
            attention[row, : len(tokens)] = 1
        input_ids, loss_mask = input_ids.to(device), loss_mask.to(device)
        logits = policy(input_ids=input_ids, attention_mask=attention.to(device)).logits[:, :-1]
        token_loss = F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), input_ids[:, 1:].reshape(-1), reduction="none"
        ).view_as(loss_mask[:, 1:])
        loss = (token_loss * loss_mask[:, 1:]).sum() / loss_mask[:, 1:].sum()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
        bar.set_postfix(loss=f"{losses[-1]:.3f}")
    policy.eval()
    return losses


def warm_start(config: ExperimentConfig, *, force: bool = False, progress: bool = False) -> Path:
    """Build (or reuse) the SFT warm start for ``config``; return its folder.

    The folder holds the policy and tokenizer (``save_pretrained``) and ``warm_start.json``
    with the SFT loss curve, the time it took and the demonstrations' behaviour shares.
    """
    path = warm_start_path(config)
    if (path / "warm_start.json").exists() and not force:
        return path
    seed = config.model.warm_start_seed
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    # SFT in float32 wherever it runs; the run loads the result in model.dtype.
    policy, tokenizer = base_policy(config, seed=seed, dtype=torch.float32)
    model_cfg = config.model
    started = time.time()
    num_demos = max(2048, model_cfg.warm_start_batch_size * 16)
    demos = collect_demonstrations(config, tokenizer, num_demos, rng)
    steps = model_cfg.warm_start_steps

    def announce(steps_per_second: float) -> None:
        tqdm.write(
            warm_start_announcement(config, path, steps, num_demos, steps_per_second),
            file=sys.stderr,
        )

    losses = finetune_on_demonstrations(
        policy,
        demos,
        pad_token_id=tokenizer.pad_token_id,
        steps=steps,
        lr=model_cfg.warm_start_lr,
        batch_size=model_cfg.warm_start_batch_size,
        rng=rng,
        progress=progress,
        on_speed=announce if progress else None,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(
        tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent)
    )  # private to this process
    policy.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    summary = {
        "seconds": time.time() - started,
        "steps": steps,
        "demonstrations": num_demos,
        "loss_first": float(np.mean(losses[:10])) if losses else None,
        "loss_last": float(np.mean(losses[-10:])) if losses else None,
        "loss_curve": losses[:: max(1, len(losses) // 100)],
        "demonstration_behaviors": dict(Counter(b for _, _, b in demos)),
        "env": config.env.id,
        # What it is (its weights), what it was fitted for and where: a warm start moved to
        # another machine (--export, --import) keeps these.
        "weights": weights_id(tmp),
        "settings": warm_start_settings(config),
        "fitted_on": {**machine(), "torch": torch.__version__},
    }
    (tmp / "warm_start.json").write_text(json.dumps(summary, indent=2))
    if force:
        shutil.rmtree(path, ignore_errors=True)
    try:
        os.replace(tmp, path)
    except OSError:  # another process finished the same warm start first: keep theirs
        shutil.rmtree(tmp, ignore_errors=True)
    return path


def load_warm_start(config: ExperimentConfig, *, progress: bool = False):
    """(policy, tokenizer) from the cached warm start, building it first when needed."""
    path = warm_start(config, progress=progress)
    device = resolve_device(config.model.device)
    try:
        policy, tokenizer = load_policy(str(path), dtype=resolve_dtype(config.model.dtype, device))
    except Exception as error:  # noqa: BLE001  (transformers and safetensors raise many types)
        message = str(error).strip().splitlines()[0][:160] if str(error).strip() else ""
        raise ValueError(
            f"warm start cache {path} cannot be loaded ({type(error).__name__}: "
            f"{message}); rebuild it with `sao-online pretrain CONFIG --force`"
        ) from None
    return policy.to(device), tokenizer


#: The file of a warm start's folder that says what it is, what it was fitted for and how.
SUMMARY_FILE = "warm_start.json"


def export_warm_start(config: ExperimentConfig, destination: str | Path) -> Path:
    """Copy ``config``'s warm start (built first when not cached) to ``destination``, a new
    folder, so another machine can run from the same weights (``import_warm_start``).

    Its summary gains what the import checks: the weights id and the settings it was fitted for
    (warm starts cached before these were recorded get them here)."""
    destination = Path(destination)
    if destination.exists():
        raise FileExistsError(f"--export: {destination} exists; name a new folder")
    source = warm_start(config, progress=True)
    shutil.copytree(source, destination)
    summary_path = destination / SUMMARY_FILE
    summary = json.loads(summary_path.read_text())
    summary.setdefault("settings", warm_start_settings(config))
    summary["weights"] = weights_id(destination)
    summary_path.write_text(json.dumps(summary, indent=2))
    return destination


def _differences(recorded: Any, wanted: Any, where: str = "") -> list[str]:
    """The fields where two settings records differ, as ``"where: recorded ... wanted ..."``."""
    if isinstance(recorded, dict) and isinstance(wanted, dict):
        found = []
        for key in sorted(set(recorded) | set(wanted)):
            name = f"{where}.{key}" if where else str(key)
            found += _differences(recorded.get(key), wanted.get(key), name)
        return found
    if recorded == wanted:
        return []
    return [f"{where or 'settings'}: the folder's {recorded!r}, the config's {wanted!r}"]


def import_warm_start(config: ExperimentConfig, source: str | Path) -> Path:
    """Make the exported warm start in ``source`` the cached warm start of ``config``.

    Refused, with the reason, when ``source`` is not an exported warm start, when it was fitted
    for other settings than ``config``'s (each differing field named), or when its weights are
    not those its summary records. It replaces what the cache held for ``config``; the code
    that fitted it may differ from this one (the point: the weights stay the same). Returns the
    cache folder."""
    source = Path(source)
    try:
        summary = json.loads((source / SUMMARY_FILE).read_text())
    except FileNotFoundError:
        raise ConfigError(
            f"{source}: no {SUMMARY_FILE}; not a warm start folder "
            "(make one with `sao-online pretrain CONFIG --export FOLDER`)"
        ) from None
    except ValueError as error:
        raise ConfigError(f"{source / SUMMARY_FILE}: not JSON ({error})") from None
    if "settings" not in summary or "weights" not in summary:
        raise ConfigError(
            f"{source}: its {SUMMARY_FILE} records no settings or weights; export it again "
            "with `sao-online pretrain CONFIG --export FOLDER`"
        )
    differences = _differences(summary["settings"], warm_start_settings(config))
    if differences:
        raise ConfigError(
            f"{source} was fitted for other settings than this config: " + "; ".join(differences)
        )
    actual = weights_id(source)
    if actual != summary["weights"]:
        raise ConfigError(
            f"{source}: its weights are {actual}, not the {summary['weights']} its "
            f"{SUMMARY_FILE} records (changed or damaged after export)"
        )
    target = warm_start_path(config)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    shutil.copytree(source, staging, dirs_exist_ok=True)
    summary["imported_from"] = str(source.resolve())
    (staging / SUMMARY_FILE).write_text(json.dumps(summary, indent=2))
    os.chmod(staging, 0o755)
    replaced = target.with_name(f".{target.name}.replaced")
    if target.exists():
        shutil.rmtree(replaced, ignore_errors=True)
        os.replace(target, replaced)
    os.replace(staging, target)
    shutil.rmtree(replaced, ignore_errors=True)
    return target
