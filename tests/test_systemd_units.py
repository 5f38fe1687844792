"""The unit files in systemd/ pass systemd-analyze as shipped and keep the settings that matter.

The tests that need systemd-analyze fail (never skip) without it: install the
`systemd` package (.ci/run does, with apt-get).
"""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from reynd.daemon.units import hidden_paths, needed_paths

UNITS = Path(__file__).resolve().parent.parent / "systemd"
REYND = Path(sys.executable).parent / "reynd"  # the console script of this environment
SHIPPED = [
    ("", ("reynd.service", "reynd.socket")),
    ("--user", ("user/reynd.service", "user/reynd.socket")),
]


def analyze(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    if not shutil.which("systemd-analyze"):
        pytest.fail(
            "systemd-analyze is not installed: install the systemd package "
            "(apt-get install systemd; .ci/run does) to run this test"
        )
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


@pytest.mark.parametrize(("scope", "names"), SHIPPED, ids=["system", "user"])
def test_shipped_units_verify_as_shipped(
    tmp_path: Path, scope: str, names: tuple[str, ...]
) -> None:
    """Each file of systemd/, untouched (a unit and the socket it needs, side by side)."""
    runtime = tmp_path / "xdg"
    runtime.mkdir(mode=0o700)
    for name in names:
        paths = [str(UNITS / name), *(str(UNITS / n) for n in names if n != name)]
        result = analyze(
            *([scope] if scope else []),
            "verify",
            "--man=no",
            *paths,
            env={"XDG_RUNTIME_DIR": str(runtime)},
        )
        assert result.returncode == 0 and not result.stderr.strip(), (name, result.stderr)


def test_system_service_is_hardened() -> None:
    result = analyze("security", "--offline=yes", "--threshold=25", str(UNITS / "reynd.service"))
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
    # Warned exactly when this installation sits where the unit hides it (CI may run from /tmp).
    hidden = hidden_paths(service, needed_paths())
    assert [w for w in hidden if w not in done.stderr] == [], done.stderr
    assert hidden or "warning" not in done.stderr, done.stderr


def test_user_service_is_hardened_as_far_as_a_user_manager_allows(tmp_path: Path) -> None:
    service = UNITS / "user" / "reynd.service"
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


def test_install_units_warns_when_the_unit_hides_its_exec_start(tmp_path: Path) -> None:
    """An interpreter under /tmp next to PrivateTmp=yes: written, with a warning naming both."""
    assert tmp_path.is_relative_to("/tmp"), tmp_path  # pytest's basetemp is the system's /tmp
    venv_bin = tmp_path / "venv" / "bin"
    venv_bin.mkdir(parents=True)
    python = venv_bin / "python"
    python.symlink_to(Path(sys.executable).resolve())
    site = [p for p in sys.path if p.endswith("site-packages")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(UNITS.parent), *site])}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(python), "-m", "reynd.daemon.cli", "install-units", *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env=env,
        )

    system = run("--system", "--dir", str(tmp_path / "system"))
    assert system.returncode == 0, system.stderr
    assert (
        f"ExecStart={python} -m reynd.daemon.cli serve "
        in (tmp_path / "system" / "reynd.service").read_text()
    )
    assert f"warning: {python} is under /tmp, which PrivateTmp=yes hides" in system.stderr, (
        system.stderr
    )
    # The user unit hides nothing (no mount namespace): no warning.
    user = run("--user", "--dir", str(tmp_path / "user"))
    assert user.returncode == 0 and "warning" not in user.stderr, user.stderr


@pytest.mark.parametrize(
    ("lines", "path", "hidden"),
    [
        ("PrivateTmp=yes", "/var/tmp/v/bin/reynd", "/var/tmp"),
        ("PrivateTmp=no", "/tmp/v/bin/reynd", None),
        ("ProtectHome=yes", "/home/u/.venv/bin/reynd", "/home"),
        ("ProtectHome=tmpfs", "/root/.local/bin/reynd", "/root"),
        ("ProtectHome=read-only", "/home/u/.venv/bin/reynd", None),  # readable: it runs
        ("PrivateTmp=yes\nPrivateTmp=no", "/tmp/x", None),  # the last one wins
        ("", "/tmp/x", None),
        ("InaccessiblePaths=-/srv/secret /opt/venvs", "/opt/venvs/r/bin/reynd", "/opt/venvs"),
        ("TemporaryFileSystem=/var:ro", "/var/lib/r/bin/reynd", "/var"),
        ("InaccessiblePaths=/opt\nInaccessiblePaths=", "/opt/r/bin/reynd", None),  # reset
    ],
)
def test_hidden_paths_reads_the_units_own_directives(
    lines: str, path: str, hidden: str | None
) -> None:

    found = hidden_paths(f"[Service]\n{lines}\n", [Path(path)])
    if hidden is None:
        assert found == [], found
    else:
        assert [hidden in f for f in found] == [True], found
