"""The README's "add a drifting task" example, run as written (environments/EXAMPLE.md holds the
same code; a test below keeps the two identical)."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

# --- example start ---
import gymnasium

from sao_online.drift_schedules import Choice, load_schedule
from sao_online.environments import DriftingTextEnv, DriftWrapper, TurnResult


class CoinCall(DriftingTextEnv):
    description = "Call heads or tails; which side pays drifts."
    drift_space = {"side": Choice(["heads", "tails"], help="the side that pays")}

    def _begin_episode(self):  # the prompt, plus extra info entries
        return "Heads or tails?", {}

    def _respond(self, action):  # any text: never raise, give a defined reward
        said = action.strip().lower()
        won = said == self.theta["side"]
        return TurnResult(
            "You win." if won else "You lose.",
            reward=float(won),
            terminated=True,
            behavior=said if said in ("heads", "tails") else "other",
        )

    def oracle_action(self, observation, info):  # the oracle knows the regime
        return info["theta"]["side"]

    def oracle_reward(self, theta):  # its expected return: the ceiling for regret
        return 1.0


gymnasium.register("my_tasks/CoinCall-v0", entry_point=CoinCall)
schedule = load_schedule(
    {
        "clock": "episodes",
        "seed": 0,
        "parameters": {"side": {"kind": "abrupt", "values": ["heads", "tails"], "at": [0, 3]}},
    }
)
env = DriftWrapper(gymnasium.make("my_tasks/CoinCall-v0"), schedule)
history = []
for episode in range(6):
    observation, info = env.reset(seed=episode)
    _, reward, _, _, info = env.step("heads")  # a policy that never adapts
    history.append((info["phase"], info["theta"]["side"], info["behavior"], reward))
    print(
        f"episode {episode}: phase {info['phase']}, {info['theta']['side']} pays, reward {reward}"
    )
# --- example end ---


def test_the_stuck_policy_loses_after_the_shift():
    assert history == [(0, "heads", "heads", 1.0)] * 3 + [(1, "tails", "heads", 0.0)] * 3


def test_the_example_env_meets_the_contract():
    from gymnasium.utils.env_checker import check_env

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(gymnasium.make("my_tasks/CoinCall-v0").unwrapped)
    coin = CoinCall()
    observation, info = coin.reset(seed=0, options={"drift": {"side": "tails"}})
    assert coin.step(coin.oracle_action(observation, info))[1] == coin.oracle_reward(info["theta"])
    coin.reset(seed=0)
    assert coin.step("\u00e9" * 10_000)[4]["behavior"] == "other"


def test_example_md_shows_exactly_this_code():
    source = Path(__file__).read_text()
    example = source.split("# --- example start ---\n")[1].split("# --- example end ---")[0]
    markdown = (Path(__file__).parents[2] / "environments" / "EXAMPLE.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", markdown, flags=re.DOTALL)
    assert blocks == [example]


def test_example_md_output_is_what_the_example_prints():
    markdown = (Path(__file__).parents[2] / "environments" / "EXAMPLE.md").read_text()
    shown = markdown.split("Output:\n\n```\n")[1].split("```")[0].splitlines()
    printed = [
        f"episode {episode}: phase {phase}, {side} pays, reward {reward}"
        for episode, (phase, side, _, reward) in enumerate(history)
    ]
    assert shown == printed


def test_list_envs_finds_the_example_in_its_own_namespace():
    from sao_online.environments import list_envs

    assert list_envs("my_tasks") == [
        ("my_tasks/CoinCall-v0", CoinCall.description, CoinCall.drift_space)
    ]
