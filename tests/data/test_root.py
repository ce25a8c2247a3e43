"""The data root, the download switch, and the not-found message."""
from __future__ import annotations

from pathlib import Path

import pytest

from fedrepro.data import (
    data_root,
    download_allowed,
)
from fedrepro.data.root import data_not_found
from fedrepro.errors import ConfigError, DataNotFoundError

pytestmark = pytest.mark.usefixtures("_clean_env")


def test_data_root_resolution(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert data_root() == Path("~/.cache/fedrepro/data").expanduser()
    monkeypatch.setenv("FEDREPRO_DATA", str(tmp_path / "env"))
    assert data_root() == tmp_path / "env"
    assert data_root(tmp_path / "arg") == tmp_path / "arg"
    assert data_root("~/x") == Path.home() / "x"


def test_download_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    assert download_allowed() is False
    monkeypatch.setenv("FEDREPRO_DOWNLOAD", "1")
    assert download_allowed() is True
    assert download_allowed(False) is False
    monkeypatch.setenv("FEDREPRO_DOWNLOAD", "0")
    assert download_allowed() is False and download_allowed(True) is True
    monkeypatch.setenv("FEDREPRO_DOWNLOAD", "maybe")
    with pytest.raises(ConfigError, match="FEDREPRO_DOWNLOAD"):
        download_allowed()
    with pytest.raises(ConfigError, match="download"):
        download_allowed("yes")  # type: ignore[arg-type]


def test_not_found_message_names_everything(tmp_path: Path) -> None:
    err = data_not_found("mnistish", [tmp_path / "a", tmp_path / "b"], downloadable=True, manual="apt-get install x")
    msg = str(err)
    assert isinstance(err, DataNotFoundError)
    for part in ("mnistish", str(tmp_path / "a"), str(tmp_path / "b"), "download=True", "FEDREPRO_DOWNLOAD", "apt-get"):
        assert part in msg
