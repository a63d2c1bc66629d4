"""Fixtures of the learning tests (the pieces they use: ``learning_kit.py``).

A test module declares ``SETTING`` and asks for ``learned``: ``learned("sao")`` trains that
method from the module's kept warm start and returns a ``LearningResult``. Every test module
here is marked ``learning``: `make test` leaves them out, `make test-all` and CI run them.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch
from learning_kit import LearningResult, LearningSetting, StaleWarmStart, kept_warm_start, learn


def family_of(module) -> str:
    """``test_style_shift_learns`` -> ``style_shift``: the name of the module's kept warm start."""
    return module.__name__.rsplit(".", 1)[-1].removeprefix("test_").removesuffix("_learns")


@pytest.fixture(autouse=True)
def _one_torch_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def learning_setting(request) -> LearningSetting:
    return LearningSetting(**request.module.SETTING)


@pytest.fixture(scope="module")
def warm_start(learning_setting, request) -> Path:
    """The module's kept warm start, checked against its setting."""
    try:
        return kept_warm_start(learning_setting, family_of(request.module))
    except StaleWarmStart as stale:
        pytest.fail(str(stale), pytrace=False)


@pytest.fixture(scope="module")
def warm_start_reward() -> dict[str, float]:
    """The warm start's mean reward, filled by the module's first run and read by the others."""
    return {}


@pytest.fixture
def learned(learning_setting, warm_start, warm_start_reward, tmp_path):
    """``learned(method, run=None)``: train ``method`` from the module's warm start; a
    LearningResult."""

    def train(method: str, run: list[str] | None = None) -> LearningResult:
        """``run``: ``--set`` style changes for this method's run, after the setting's."""
        setting = replace(learning_setting, run=[*learning_setting.run, *(run or [])])
        before = warm_start_reward.get("before")
        result = learn(setting, warm_start, method, tmp_path / method, before)
        warm_start_reward["before"] = result.before
        return result

    return train
