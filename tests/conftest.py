"""Shared fixtures: tiny configs on the synthetic dataset, and an isolated runs folder."""
from __future__ import annotations

import os

import pytest

os.environ.setdefault("MPLBACKEND", "Agg")

# tiny_config lives in support.py; it stays importable from here too.
from support import tiny_config  # noqa: E402


@pytest.fixture(autouse=True, scope="session")
def _one_thread():
    """Test models are tiny: extra intra-op threads only add synchronisation, which on a shared
    2-core machine makes them many times slower. Every comparison in the tests is between runs made
    under the same thread count."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture
def tiny(tmp_path):
    def make(**overrides):
        return tiny_config(tmp_path, **overrides)

    return make
