"""Environment isolation for the data tests; a module opts in with
``pytestmark = pytest.mark.usefixtures(...)``."""
from __future__ import annotations

from pathlib import Path

import pytest

import fedrepro.data.fashion_mnist as fm


@pytest.fixture
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FEDREPRO_DATA", raising=False)
    monkeypatch.delenv("FEDREPRO_DOWNLOAD", raising=False)


@pytest.fixture
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("FEDREPRO_DATA", raising=False)
    monkeypatch.delenv("FEDREPRO_DOWNLOAD", raising=False)
    # The Debian package is installed on some machines; tests must not fall back to it.
    monkeypatch.setattr(fm, "DEBIAN_DIR", tmp_path / "no-debian-package")
    # The test's own manifest, to which write_fake_fmnist adds its tiny files (tests/data/fmnist_files.py).
    monkeypatch.setattr(fm, "MANIFEST", dict(fm.MANIFEST))
