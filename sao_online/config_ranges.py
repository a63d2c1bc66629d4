"""The allowed range of every numeric config field, checked on load before any work.

A value outside its range would train wrongly without an error (a negative gradient clip flips
the update's sign, an infinite KL coefficient skips every update) or fail late with a message
that does not name the field. Every range is finite unless ``Range.infinite`` says otherwise;
NaN is never allowed. ``tests/test_config_ranges.py`` checks that each numeric field has one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Range:
    """``low``..``high``; ``open_low`` / ``open_high`` exclude the bound itself."""

    low: float
    high: float
    open_low: bool = False
    open_high: bool = False
    infinite: bool = False  # +inf allowed (e.g. "no upper band")

    def describe(self) -> str:
        low = "(" if self.open_low else "["
        high = ")" if self.open_high else "]"
        top = "inf" if self.infinite else f"{self.high:g}"
        return f"{low}{self.low:g}, {top}{high}"

    def problem(self, value: float) -> str | None:
        """Why ``value`` is out of range, or None when it is fine."""
        if isinstance(value, float) and math.isnan(value):
            return f"must be a number in {self.describe()}, got nan"
        if math.isinf(value) and not (self.infinite and value > 0):
            return f"must be finite, in {self.describe()}, got {value}"
        if self.infinite and value == math.inf:
            return None
        below = value <= self.low if self.open_low else value < self.low
        above = value >= self.high if self.open_high else value > self.high
        return f"must be in {self.describe()}, got {_number(value)}" if below or above else None


def _number(value: float) -> str:
    """A short rendering of a number (a 400-digit integer is cut, not printed whole)."""
    text = f"{value:g}" if isinstance(value, float) else str(value)
    return text if len(text) <= 24 else text[:20] + f"... ({len(text)} digits)"


SEED = Range(0, 2**32 - 1)
PROBABILITY = Range(0, 1)

RANGES: dict[str, Range] = {
    "seed": SEED,
    "env.latency_mean": Range(0, 3600),
    "env.latency_sigma": Range(0, 10),
    "env.step_timeout": Range(0, 86400, open_low=True),
    "model.num_layers": Range(1, 1024),
    "model.hidden_size": Range(1, 65536),
    "model.warm_start_steps": Range(0, 10**8),
    "model.warm_start_seed": SEED,
    "model.warm_start_lr": Range(0, 10, open_low=True),
    "model.warm_start_batch_size": Range(1, 10**6),
    "algorithm.group_size": Range(1, 4096),
    "algorithm.dis_eps_low": Range(0, 1, open_low=True),
    "algorithm.dis_eps_high": Range(0, math.inf, open_low=True, infinite=True),
    "algorithm.clip_eps_low": Range(0, 1, open_low=True),
    "algorithm.clip_eps_high": Range(0, 100, open_low=True),
    "algorithm.dual_clip": Range(1, 10**6, open_low=True),
    "algorithm.critic_updates": Range(1, 1000),
    "algorithm.critic_lr_multiple": Range(0, 10**6, open_low=True),
    "algorithm.critic_warmup_steps": Range(0, 10**9),
    "algorithm.lambda_alpha": Range(0, 10**6, open_low=True),
    "algorithm.critic_lambda": PROBABILITY,
    "algorithm.gamma": PROBABILITY,
    "algorithm.baseline_window": Range(1, 10**7),
    "algorithm.policy_lambda": PROBABILITY,
    "algorithm.prompt_baseline_window": Range(1, 10**7),
    "optim.lr": Range(0, 10, open_low=True),
    "optim.weight_decay": Range(0, 10),
    "optim.max_grad_norm": Range(0, 1e9, open_low=True),
    "regularizers.kl_coef": Range(0, 1e6),
    "regularizers.entropy_coef": Range(-1e3, 1e3),
    "rollout.batch_size": Range(1, 10**6),
    "rollout.num_slots": Range(1, 10**5),
    "rollout.temperature": Range(0, 100, open_low=True),
    "rollout.top_p": Range(0, 1, open_low=True),
    "rollout.max_turns": Range(1, 10**4),
    "rollout.max_action_tokens": Range(1, 10**6),
    "rollout.max_episode_tokens": Range(1, 10**7),
    "runtime.num_workers": Range(1, 4096),
    "runtime.max_staleness": Range(0, 10**9),
    "runtime.torch_threads": Range(1, 4096),  # or "auto"
    "budget.episodes": Range(1, 10**9),
    "eval.every_updates": Range(0, 10**9),
    "eval.episodes_per_phase": Range(1, 10**6),
    "logging.flush_every": Range(1, 10**7),
    "logging.checkpoint_every": Range(0, 10**9),
    "logging.transcripts_every": Range(0, 10**9),
}
# Lists of numbers: every element in the range, and exactly this many elements.
LIST_RANGES: dict[str, tuple[Range, int]] = {
    "optim.betas": (Range(0, 1, open_high=True), 2),
}


def range_problems(get: Any) -> list[tuple[str, str]]:
    """(field, problem) for every numeric field out of range; ``get(dotted)`` reads a field."""
    problems = []
    for name, allowed in RANGES.items():
        value = get(name)
        # A field that also takes a word (runtime.torch_threads: auto) has its choices checked
        # by the loader; only its numbers have a range.
        if value is not None and not isinstance(value, str) and (why := allowed.problem(value)):
            problems.append((name, why))
    for name, (allowed, length) in LIST_RANGES.items():
        values = get(name)
        if len(values) != length:
            problems.append((name, f"expected {length} numbers, got {len(values)}"))
            continue
        for index, value in enumerate(values):
            if isinstance(value, bool) or not isinstance(value, int | float):
                problems.append(
                    (f"{name}[{index}]", f"expected a number, got {type(value).__name__}")
                )
            elif why := allowed.problem(value):
                problems.append((f"{name}[{index}]", why))
    return problems
