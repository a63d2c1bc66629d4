"""Fixtures for the analysis tests: synthetic run directories."""

from __future__ import annotations

from pathlib import Path

import pytest
from analysis_synthetic import build_simulated_root


@pytest.fixture(scope="session")
def simulated_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two methods x three seeds, three phases of 200 episodes (read-only: shared by tests)."""
    return build_simulated_root(tmp_path_factory.mktemp("simulated") / "runs")
