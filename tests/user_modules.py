"""The source of modules a user writes, for tests that run them as a user would: a drifting task
of their own (call heads or tails; which side pays drifts), registered under a namespace."""

from __future__ import annotations

import textwrap


def coin_task(namespace: str) -> str:
    """The source of a module that registers ``<namespace>/CoinCall-v0``.

    Example:
        >>> "gymnasium.register('my_coins/CoinCall-v0'" in coin_task("my_coins")
        True
    """
    return textwrap.dedent(f"""
        import gymnasium

        from sao_online.environments import DriftingTextEnv, TurnResult


        class CoinCall(DriftingTextEnv):
            description = "Call heads or tails; which side pays drifts."
            drift_space = {{"side": ["heads", "tails"]}}

            def _begin_episode(self):
                return "Heads or tails?", {{}}

            def _respond(self, action):
                said = action.strip().lower()
                return TurnResult("ok", float(said == self.theta["side"]), terminated=True,
                                  behavior=said if said in ("heads", "tails") else "other")

            def oracle_action(self, observation, info):
                return info["theta"]["side"]

            def demonstration_action(self, observation, info):
                return ("heads", "tails")[int(self.np_random.integers(2))]

            def oracle_reward(self, theta):
                return 1.0


        gymnasium.register('{namespace}/CoinCall-v0', entry_point=CoinCall)
    """)
