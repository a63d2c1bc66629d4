"""Shared pieces of the learning tests: a kept warm start, a short run, a paired evaluation.

A test module declares ``SETTING`` (the keyword arguments of :class:`LearningSetting`) and
asks for the ``learned`` fixture (``conftest.py``): ``learned("sao")`` trains that method from
the module's warm start and returns a :class:`LearningResult`.

Each family's warm start is the 2-layer, 64-wide tiny model fitted on a few hundred of the
env's own demonstrations (:func:`sao_online.learning.warm_start.collect_demonstrations` and
:func:`~sao_online.learning.warm_start.finetune_on_demonstrations`, the pieces of ``sao-online
pretrain``) in a drift-free regime or, where the setting says ``cached_warm_start``, the
config's own warm start. It is fitted once and kept with the tests, in ``kept/<family>/``
(``python tests/learning/fit_warm_starts.py [FAMILY...]`` fits them again), beside a record
of what it was fitted for: a test whose setting no longer matches its kept warm start fails,
naming what differs. Kept, the warm starts cost the tests nothing, and every machine runs the
learning tests from the same weights (two machines fit the same setting to different
weights: their floating point differs).

A test trains the warm start with a method for a small budget on the ``sync`` runtime, and
samples the warm start and the trained policy on the same seeded episodes with the same
sampling seed (the warm start once per module: its reward does not depend on the method). The
reward difference of those paired samples is what the tests assert: it does not depend on
which tasks happened to fall into the first or last batches.

``SAO_LEARNING_TESTS_LR`` replaces the runs' learning rate (e.g. ``1e-12``, which freezes the
policy: the config refuses 0): with it every learning test must fail, which is how they were
shown to detect broken learning.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from sao_online.commands.policy_summary import behavior_summary
from sao_online.config import ExperimentConfig, load_config
from sao_online.learning.warm_start import (
    base_policy,
    collect_demonstrations,
    finetune_on_demonstrations,
    warm_start_settings,
)
from sao_online.learning.warm_start import warm_start as cached_warm_start
from sao_online.models import load_policy
from sao_online.rundir.checkpoints import read_checkpoint
from sao_online.runtime.launch import run_experiment
from sao_online.util.cache import weights_id

ROOT = Path(__file__).resolve().parents[2]
#: The kept warm starts, one folder per family (the test module's name without ``test_`` and
#: ``_learns``), each with the record of what it was fitted for.
KEPT = Path(__file__).resolve().parent / "kept"
RECORD = "fitted.json"

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
        cached_warm_start: the warm start is the config's own (its ``model.warm_start_*``
            settings and schedule, ``setting.warm_start`` applied but not ``overrides``), the
            one ``sao-online pretrain CONFIG`` builds; ``demonstrations`` and ``sft_*`` are
            then unused.
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

    def warm_start_config(self) -> ExperimentConfig:
        """The config the warm start's demonstrations are drawn from."""
        if self.cached_warm_start:
            return load_config(ROOT / self.config, [*TEST_MODEL, *self.warm_start])
        return self.experiment(self.warm_start)


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


def fitted_for(setting: LearningSetting) -> dict[str, Any]:
    """What a setting's warm start is fitted for, JSON-ready: its recipe (the SFT settings, or
    the config's own warm start) and the settings of the env it draws demonstrations from."""
    recipe: dict[str, Any] = {"config": setting.config, "model": TEST_MODEL}
    if setting.cached_warm_start:
        recipe.update(cached_warm_start=True, warm_start=setting.warm_start)
    else:
        recipe.update(
            overrides=setting.overrides,
            warm_start=setting.warm_start,
            demonstrations=setting.demonstrations,
            sft_steps=setting.sft_steps,
            sft_lr=setting.sft_lr,
            sft_batch_size=setting.sft_batch_size,
        )
    fitted = {"recipe": recipe, "settings": warm_start_settings(setting.warm_start_config())}
    return json.loads(json.dumps(fitted, sort_keys=True, default=str))


def _leaves(record: Any, where: str = "") -> dict[str, Any]:
    """``{"a.b": value}`` for every leaf of a nested record."""
    if not isinstance(record, dict):
        return {where or "record": record}
    leaves: dict[str, Any] = {}
    for key, value in record.items():
        leaves.update(_leaves(value, f"{where}.{key}" if where else str(key)))
    return leaves


def differences(kept: Any, wanted: Any) -> list[str]:
    """The fields where two records differ, as ``"field: kept ..., the test's ..."``."""
    ours, theirs = _leaves(kept), _leaves(wanted)
    return [
        f"{name}: kept {ours.get(name)!r}, the test's {theirs.get(name)!r}"
        for name in sorted(set(ours) | set(theirs))
        if ours.get(name) != theirs.get(name)
    ]


def fit_warm_start(setting: LearningSetting, folder: Path) -> Path:
    """Fit the setting's warm start and save it in ``folder`` (``save_pretrained``).

    With ``cached_warm_start``, the config's own warm start, built by ``sao-online pretrain``'s
    code into the cache ``$SAO_ONLINE_CACHE`` names, then copied.
    """
    if setting.cached_warm_start:
        shutil.copytree(cached_warm_start(setting.warm_start_config()), folder)
        return folder
    folder.mkdir(parents=True)
    config = setting.warm_start_config()
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


class StaleWarmStart(RuntimeError):
    """A kept warm start that is missing, fitted for another setting, or changed since."""


def kept_warm_start(setting: LearningSetting, family: str, kept: Path = KEPT) -> Path:
    """The family's kept warm start, after checking it was fitted for ``setting`` and that its
    weights are the ones its record names; :class:`StaleWarmStart` says what to run if not."""
    folder = kept / family
    refit = f"python tests/learning/fit_warm_starts.py {family}"
    try:
        record = json.loads((folder / RECORD).read_text())
    except FileNotFoundError:
        raise StaleWarmStart(f"{folder}: no kept warm start; fit it with `{refit}`") from None
    changed = differences(record["fitted_for"], fitted_for(setting))
    if changed:
        raise StaleWarmStart(
            f"{folder} was fitted for another setting ({'; '.join(changed)}): `{refit}`"
        )
    if weights_id(folder) != record["weights"]:
        raise StaleWarmStart(
            f"{folder}: its weights are not the {record['weights']} its {RECORD} records: `{refit}`"
        )
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
    from sao_online.config.run_schedule import resolve_schedule

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
