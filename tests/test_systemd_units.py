"""The unit files in systemd/ pass systemd-analyze and keep the settings that matter."""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

UNITS = Path(__file__).resolve().parent.parent / "systemd"
REYND = Path(sys.executable).parent / "reynd"  # the console script of this environment
needs_analyze = pytest.mark.skipif(
    not shutil.which("systemd-analyze"), reason="systemd-analyze is not installed"
)


def installed_copy(tmp: Path, *names: str) -> list[Path]:
    """The units with ExecStart pointing at this environment's reynd (verify checks it exists)."""
    out = []
    for name in names:
        text = (UNITS / name).read_text()
        text = text.replace("/usr/bin/reynd", str(REYND)).replace("%h/.local/bin/reynd", str(REYND))
        target = tmp / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        out.append(target)
    return out


def analyze(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["systemd-analyze", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, **(env or {})},
    )


def read_unit(name: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read(UNITS / name)
    return parser


@needs_analyze
def test_system_units_verify(tmp_path: Path) -> None:
    paths = installed_copy(tmp_path, "reynd.service", "reynd.socket")
    result = analyze("verify", "--man=no", *map(str, paths))
    assert result.returncode == 0 and not result.stderr.strip(), result.stderr


@needs_analyze
def test_user_units_verify(tmp_path: Path) -> None:
    paths = installed_copy(tmp_path, "user/reynd.service", "user/reynd.socket")
    runtime = tmp_path / "xdg"
    runtime.mkdir(mode=0o700)
    result = analyze(
        "--user", "verify", "--man=no", *map(str, paths), env={"XDG_RUNTIME_DIR": str(runtime)}
    )
    assert result.returncode == 0 and not result.stderr.strip(), result.stderr


@needs_analyze
def test_system_service_is_hardened(tmp_path: Path) -> None:
    (service, _) = installed_copy(tmp_path, "reynd.service", "reynd.socket")
    result = analyze("security", "--offline=yes", "--threshold=25", str(service))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "OK" in result.stdout.splitlines()[-1], result.stdout.splitlines()[-1]


@pytest.mark.parametrize("prefix", ["", "user/"])
def test_settings_that_matter(prefix: str) -> None:
    service = read_unit(f"{prefix}reynd.service")["Service"]
    socket = read_unit(f"{prefix}reynd.socket")["Socket"]
    assert service["Type"] == "notify"
    assert "${STATE_DIRECTORY}" in service["ExecStart"]
    assert service["RuntimeDirectoryPreserve"] == "yes"  # or /run/reynd loses the socket
    assert service["NoNewPrivileges"] == "yes"
    assert socket["SocketMode"] == "0600"  # systemd's default is 0666
    assert socket["DirectoryMode"] == "0700"
    assert socket["ListenStream"].endswith("/reynd/reynd.sock")


def install(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(REYND), "install-units", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@needs_analyze
@pytest.mark.parametrize("scope", ["--user", "--system"])
def test_installed_units_verify_as_written(tmp_path: Path, scope: str) -> None:
    """The documented step, literally: no path rewritten by the test."""
    target = tmp_path / "units"
    done = install(scope, "--dir", str(target))
    assert done.returncode == 0, done.stderr
    service = (target / "reynd.service").read_text()
    assert f"ExecStart={REYND} serve " in service
    docs = UNITS.parent / "docs" / "operations.md"
    assert f"Documentation=file://{docs}" in service
    assert "daemon-reload" in done.stdout and "enable --now reynd.socket" in done.stdout
    runtime = tmp_path / "xdg"
    runtime.mkdir(mode=0o700)
    user = ["--user"] if scope == "--user" else []
    result = analyze(
        *user,
        "verify",
        "--man=no",
        str(target / "reynd.service"),
        str(target / "reynd.socket"),
        env={"XDG_RUNTIME_DIR": str(runtime)},
    )
    assert result.returncode == 0 and not result.stderr.strip(), result.stderr
    again = install(scope, "--dir", str(target))
    assert again.returncode == 1 and "pass --force" in again.stderr
    assert install(scope, "--dir", str(target), "--force").returncode == 0


@needs_analyze
def test_user_service_is_hardened_as_far_as_a_user_manager_allows(tmp_path: Path) -> None:
    (service, _) = installed_copy(tmp_path, "user/reynd.service", "user/reynd.socket")
    runtime = tmp_path / "xdg"
    runtime.mkdir(mode=0o700)
    result = analyze(
        "--user",
        "security",
        "--offline=yes",
        "--threshold=65",
        str(service),
        env={"XDG_RUNTIME_DIR": str(runtime)},
    )
    # Offline analysis counts capabilities as if the service ran as root; a user's
    # service has none. Was 7.5 EXPOSED before the seccomp settings.
    assert result.returncode == 0, result.stdout.splitlines()[-1]
