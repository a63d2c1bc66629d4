"""Measure a GridShift warm start: does it read its observation, and how far does it walk?

Builds (or reuses) the config's warm start, samples ``--episodes`` seeded episodes in one
regime (default: the schedule's first) and appends one JSON line to ``--out``: the SFT loss,
the reward, the share of episodes that reach the goal (per start distance), the share of moves
that brought the agent closer to the goal, and the tokens per episode.

``--env-module`` names the module that defines the env class the config's ``env.id`` makes
(default: this package's GridShift). The attempts on the first version of the task ran against
that version's module, ``git show 0653771:environments/grid_shift.py``, registered as
``legacy/GridShift-v0``, with ``--variant`` changing one factor at a time:

- ``nowalls``: no interior walls (the grid's edges stay);
- ``offset``: the observation is the goal's offset only (``Goal 2S 1E.``).

Example (from the repository root)::

    python docs/families/grid_shift_warm_start.py configs/grid_shift.yaml --label v1-config \\
        --code v1 --out docs/families/data/grid_shift_warm_starts.jsonl
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys

import gymnasium
import numpy as np
import torch

from sao_online.config import load_config
from sao_online.config.run_schedule import resolve_schedule
from sao_online.learning.warm_start import warm_start
from sao_online.models import load_policy
from sao_online.rollout import EpisodeRequest
from sao_online.runtime.engines import build_engine
from sao_online.runtime.envs import make_env


def distance_to_goal(env) -> int:
    if hasattr(env, "_distance"):  # the first version: shortest paths around walls
        return env._distance.get(env._position, 99)
    return abs(env._goal[0] - env._position[0]) + abs(env._goal[1] - env._position[1])


class MoveRecorder(gymnasium.Wrapper):
    """Records, for every action, the distance to the goal before and after it."""

    def reset(self, **kwargs):
        self.moves = []
        return self.env.reset(**kwargs)

    def step(self, action):
        before = distance_to_goal(self.env.unwrapped)
        result = self.env.step(action)
        outcome = result[4].get("outcome")
        after = 0 if outcome == "reached" else distance_to_goal(self.env.unwrapped)
        self.moves.append((before, after, outcome))
        return result


def apply_variants(module, variants: set[str]) -> None:
    if "nowalls" in variants:
        module.NUM_WALLS = 0
    if "offset" in variants:
        module.GridShiftEnv._view = lambda self: (
            f"Goal {module.describe_offset(self._position, self._goal)}."
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--label", required=True)
    parser.add_argument("--code", required=True, help="which version of the env, for the record")
    parser.add_argument("--episodes", type=int, default=256)
    parser.add_argument("--theta", default=None, help="regime as JSON (default: the first)")
    parser.add_argument("--variant", default="", help="comma-separated: nowalls, offset")
    parser.add_argument("--env-module", default="sao_online.environments.grid_shift")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    sys.path.insert(0, os.getcwd())
    variants = set(filter(None, args.variant.split(",")))
    apply_variants(importlib.import_module(args.env_module), variants)
    config = load_config(args.config, args.set)
    folder = warm_start(config)  # a variant changes no source: give it its own SAO_ONLINE_CACHE
    built = json.loads((folder / "warm_start.json").read_text())
    policy, tokenizer = load_policy(str(folder))
    theta = json.loads(args.theta) if args.theta else dict(resolve_schedule(config).at(0).theta)
    envs = [MoveRecorder(make_env(config, seed=k)) for k in range(args.episodes)]
    requests = iter(
        EpisodeRequest(env, seed=10_000 + k, options={"drift": theta}, prompt_id=k)
        for k, env in enumerate(envs)
    )
    with build_engine(
        config, policy, tokenizer, seed=0, num_slots=min(64, args.episodes)
    ) as engine:
        trajectories = list(engine.run(lambda: next(requests, None)))
    by_distance: dict[int, list[bool]] = {}
    for trajectory in trajectories:
        reached = bool(trajectory.info.get("reached", False))
        by_distance.setdefault(trajectory.prompt_info["difficulty"], []).append(reached)
    moves = [move for env in envs for move in env.moves]
    row = {
        "label": args.label,
        "code": args.code,
        "variant": sorted(variants),
        "overrides": args.set,
        "theta": theta,
        "sft_steps": built["steps"],
        "sft_seconds": round(built["seconds"], 1),
        "loss_first": built["loss_first"],
        "loss_last": built["loss_last"],
        "episodes": len(trajectories),
        "reward_mean": float(np.mean([t.total_reward for t in trajectories])),
        "reached": float(np.mean([t.info.get("reached", False) for t in trajectories])),
        "truncated": float(np.mean([t.truncated for t in trajectories])),
        "moves_closer": float(np.mean([after < before for before, after, _ in moves])),
        "first_move_closer": float(
            np.mean([env.moves[0][1] < env.moves[0][0] for env in envs if env.moves])
        ),
        "malformed": float(np.mean([outcome == "malformed" for *_, outcome in moves])),
        "tokens_mean": float(np.mean([len(t.tokens) for t in trajectories])),
        "reach_by_distance": {
            str(k): round(float(np.mean(v)), 3) for k, v in sorted(by_distance.items())
        },
    }
    with open(args.out, "a") as handle:
        handle.write(json.dumps(row) + "\n")
    print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
