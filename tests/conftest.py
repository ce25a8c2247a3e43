"""Shared fixtures: tiny configs on the synthetic dataset, and an isolated runs folder."""
from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import pytest

os.environ.setdefault("MPLBACKEND", "Agg")

# Tests write nothing into the repository's committed folders or the user's output root: every
# output folder defaults to a scratch root, and the variables that move one folder alone are
# cleared (a test that needs one sets it), as is TensorBoard logging. Set before fedrepro is
# imported, and inherited by the processes tests start.
_SCRATCH = tempfile.mkdtemp(prefix="fedrepro-tests-")
atexit.register(shutil.rmtree, _SCRATCH, ignore_errors=True)
os.environ["FEDREPRO_OUTPUT"] = os.path.join(_SCRATCH, "output-root")
os.environ["XDG_DATA_HOME"] = os.path.join(_SCRATCH, "xdg-data")
for _var in ("FEDREPRO_RUNS", "FEDREPRO_FIGURES", "FEDREPRO_TENSORBOARD", "FEDREPRO_ARCHIVE_ROOT"):
    os.environ.pop(_var, None)
# The committed reference archive (results/<profile>/) stays out of the tests' stores unless a test asks
# for it (tests/test_archive.py): a test that plans or trains laptop configs counts what it trains.
os.environ["FEDREPRO_ARCHIVE"] = "off"

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
