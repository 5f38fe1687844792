"""Shared fixtures. The daemon fixtures start the real `reynd serve` (tests/harness.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.harness import Daemon, short_tempdir, start_daemon

# Examples here do real file I/O with fsync on a shared machine: a per-example
# deadline would fail on a slow disk, not on a bug.
settings.register_profile("reynd", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("reynd")


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A per-test directory with a short path, for sockets."""
    with short_tempdir() as path:
        yield path


@pytest.fixture
def daemon(short_tmp: Path) -> Iterator[Daemon]:
    """A fresh daemon for this test; stopped with SIGTERM at teardown (exit 0 asserted)."""
    d = start_daemon(short_tmp)
    yield d
    d.stop()


@pytest.fixture(scope="module")
def shared_daemon() -> Iterator[Daemon]:
    """One daemon for a whole module of read-mostly tests."""
    with short_tempdir() as path:
        d = start_daemon(path)
        yield d
        d.stop()


def workspace_config(ws: Path, extra: str = "") -> str:
    """reynd.toml with workspace rewind on for `ws` (`*.log` and `build/` ignored)."""
    return f'[workspace]\nenabled = true\npath = "{ws}"\nignore = ["*.log", "build/"]\n{extra}'


@pytest.fixture
def ws(short_tmp: Path) -> Path:
    """An empty workspace directory."""
    path = short_tmp / "ws"
    path.mkdir()
    return path


@pytest.fixture
def wd(ws: Path, short_tmp: Path) -> Iterator[Daemon]:
    """A daemon with workspace rewind on for `ws`."""
    d = start_daemon(short_tmp, config=workspace_config(ws))
    yield d
    d.stop()
