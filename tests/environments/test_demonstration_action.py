from collections import Counter

from sao_online.environments import StyleShiftEnv, ToolShiftEnv
from sao_online.environments.style_shift import detect_style


def test_style_demonstrations_are_competent_and_undecided_over_the_pool():
    env = StyleShiftEnv()
    styles = Counter()
    for seed in range(300):
        observation, info = env.reset(seed=seed, options={"drift": {"preferred": "cute"}})
        action = env.demonstration_action(observation, info)
        styles[detect_style(action)] += 1
        _, _, _, _, end = env.step(action)
        assert end["quality"] == 1.0  # always a competent line in an offered style
    assert set(styles) == {"academic", "cute", "chuunibyou"}
    assert all(65 <= count <= 135 for count in styles.values()), styles  # 100 +- 4 sd


def test_default_demonstration_is_the_oracle():
    env = ToolShiftEnv()
    observation, info = env.reset(seed=3)
    assert env.demonstration_action(observation, info) == env.oracle_action(observation, info)
