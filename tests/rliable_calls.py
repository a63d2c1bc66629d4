"""rliable itself, for the tests that check the aggregates against it: the import (or a skip
that says how to install it) and its stratified-bootstrap interval call."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest


def rliable_modules() -> tuple[Any, Any]:
    """rliable's ``library`` and ``metrics``, or a skip naming why they are not usable."""
    pytest.importorskip("scipy", reason="rliable needs scipy; `make rliable` installs both")
    try:
        from rliable import library, metrics
    except Exception as error:  # noqa: BLE001  (not installed, or its arch does not import)
        pytest.skip(
            f"rliable is not usable here ({type(error).__name__}: {error}); `make rliable` "
            "installs it"
        )
    return library, metrics


def rliable_intervals(
    library: Any,
    scores: np.ndarray,
    statistic: Callable[[np.ndarray], np.ndarray],
    reps: int,
    seed: int,
) -> tuple[dict, dict]:
    """rliable's stratified-bootstrap interval of ``statistic`` on the (runs x tasks) matrix
    ``scores``; adapts its call to arch >= 8 (random_state renamed seed) without changing how
    it resamples."""
    import arch.bootstrap as arch_bootstrap

    np.random.seed(seed)  # rliable draws its indices from numpy's global generator
    try:
        return library.get_interval_estimates({"m": scores}, statistic, reps=reps)
    except TypeError as error:
        if "random_state" not in str(error):
            raise
    original = arch_bootstrap.IIDBootstrap.__init__

    def init(self, *args, random_state=None, **kwargs):
        original(self, *args, seed=random_state, **kwargs)

    arch_bootstrap.IIDBootstrap.__init__ = init
    try:
        np.random.seed(seed)
        return library.get_interval_estimates({"m": scores}, statistic, reps=reps)
    finally:
        arch_bootstrap.IIDBootstrap.__init__ = original
