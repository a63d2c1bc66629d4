"""Shared settings for the model tests."""

import pytest
import torch


@pytest.fixture(autouse=True, scope="module")
def single_torch_thread():
    """Tiny models run fastest on one thread; on a shared 2-core machine a second OpenMP thread
    waiting for a busy core can make small ops orders of magnitude slower."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
