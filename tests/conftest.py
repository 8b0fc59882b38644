"""Test-wide settings: a non-interactive matplotlib backend, and the ``one_thread`` fixture."""

import os

import pytest

os.environ.setdefault("MPLBACKEND", "Agg")


@pytest.fixture(scope="module")
def one_thread():
    """One torch thread for a module of small-tensor tests: more threads only oversubscribe a
    shared CPU (up to 10x slower). Use with ``pytestmark = pytest.mark.usefixtures(...)``."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)
