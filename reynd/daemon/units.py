"""`reynd install-units`: the unit files of systemd/, pointed at this installation.

The units in the repository name `/usr/bin/reynd` (system) and
`%h/.local/bin/reynd` (user); an installation in a virtual environment or
under pipx has its `reynd` elsewhere. Installing writes each unit with
ExecStart naming the `reynd` that runs this command, and Documentation=
naming these docs when they are on disk (a source checkout), so that
`systemd-analyze verify` passes on the units exactly as installed.
"""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import reynd

__all__ = ["UnitsExist", "install_units", "reynd_command", "unit_dir"]

Scope = Literal["user", "system"]
_NAMES = ("reynd.service", "reynd.socket")
_TEMPLATE_COMMANDS = ("/usr/bin/reynd", "%h/.local/bin/reynd")


class UnitsExist(Exception):
    """A unit file is already there (pass force to replace it)."""


@dataclass(frozen=True, slots=True)
class Written:
    path: Path
    replaced: bool


def _sources(scope: Scope) -> Path:
    package = Path(reynd.__file__).resolve().parent
    # A wheel carries them inside the package; a source checkout has systemd/ beside it.
    for base in (package / "systemd", package.parent / "systemd"):
        if (base / "reynd.service").is_file():
            return base / "user" if scope == "user" else base
    raise FileNotFoundError(f"the unit files are not installed with reynd ({package})")


def reynd_command() -> str:
    """How systemd should start this installation's reynd (an absolute ExecStart)."""
    script = Path(sys.executable).parent / "reynd"
    if script.is_file() and os.access(script, os.X_OK):
        return shlex.quote(str(script))
    return f"{shlex.quote(sys.executable)} -m reynd.daemon.cli"


def unit_dir(scope: Scope) -> Path:
    """Where systemd looks for units an administrator or a user installs."""
    if scope == "system":
        return Path("/etc/systemd/system")
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "systemd" / "user"


def _render(text: str, command: str, docs: Path | None) -> str:
    for template in _TEMPLATE_COMMANDS:
        text = text.replace(f"ExecStart={template} ", f"ExecStart={command} ")
    lines = []
    for line in text.splitlines():
        if not line.startswith("Documentation="):
            lines.append(line)
        elif docs is not None:  # else dropped: the file it named is not installed
            lines.append(f"Documentation=file://{docs}")
    return "\n".join(lines) + "\n"


def install_units(scope: Scope, target: Path, *, force: bool = False) -> list[Written]:
    """Write reynd.service and reynd.socket for `scope` into `target`; UnitsExist unless force."""
    source = _sources(scope)
    docs = Path(reynd.__file__).resolve().parent.parent / "docs" / "operations.md"
    existing = [target / n for n in _NAMES if (target / n).exists()]
    if existing and not force:
        raise UnitsExist(
            f"{', '.join(map(str, existing))} already exist: pass --force to replace them"
        )
    target.mkdir(parents=True, exist_ok=True)
    command = reynd_command()
    out = []
    for name in _NAMES:
        path = target / name
        replaced = path.exists()
        text = _render((source / name).read_text(), command, docs if docs.is_file() else None)
        tmp = path.with_name(f".{name}.tmp")
        tmp.write_text(text)
        tmp.chmod(0o644)
        os.replace(tmp, path)
        out.append(Written(path, replaced))
    return out
