import pytest

import sao_online.runtime.scheduling.async_runtime as async_runtime


@pytest.fixture
def fake_dropped_rows(monkeypatch):
    """Dropped episodes logged as ``{"plan": plan, **keywords}``: the real row builder needs a
    real config, which the scheduler's fakes (``scheduler_fakes``) do not have."""
    monkeypatch.setattr(
        async_runtime,
        "dropped_episode_record",
        lambda config, plan, index, **kwargs: {"plan": plan, **kwargs},
    )
