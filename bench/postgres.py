"""A throwaway PostgreSQL server that the bench starts itself, for the peers users deploy.

    with cluster() as pg:
        psycopg.connect(pg.conninfo)

`initdb` into a new temporary directory, then `postgres` listening on a free
loopback port only (and its own Unix socket directory), with the settings that
make an acknowledged commit durable, as reynd's acknowledged append is:
`fsync=on`, `synchronous_commit=on`, `full_page_writes=on`. Nothing else is
tuned: this is PostgreSQL as a user runs it. The server stops and its
directory is removed on exit.

The server binaries come from Debian's `postgresql` package
(`apt-get install postgresql`); `missing()` says so when they are absent, and
the bench then skips the PostgreSQL rows with that message. PostgreSQL refuses
to run as root: as root, the cluster belongs to the `postgres` user that the
package creates, and both programs run as that user (`runuser`).
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = ["INSTALL_HINT", "Cluster", "bindir", "cluster", "cluster_or_none", "missing"]

INSTALL_HINT = "install PostgreSQL's server binaries: apt-get install postgresql"
_DURABLE = ("fsync=on", "synchronous_commit=on", "full_page_writes=on")
_INITDB = ("--auth=trust", "-E", "UTF8", "--no-locale", "--no-instructions")
_READY_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Cluster:
    """A running server: where to connect and what it is."""

    conninfo: str
    data_dir: Path
    version: str


def bindir() -> Path | None:
    """The directory of `initdb` and `postgres`: PATH first, then Debian's versioned dirs."""
    found = shutil.which("initdb")
    if found and shutil.which("postgres", path=str(Path(found).resolve().parent)):
        return Path(found).resolve().parent
    debian = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/postgres"),
        key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0,
    )
    return debian[-1].parent if debian else None


def missing() -> str | None:
    """Why a cluster cannot start here (None: it can)."""
    if bindir() is None:
        return f"PostgreSQL server binaries not found; {INSTALL_HINT}"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install -e '.[bench]')"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no `postgres` user to run the server as"
        if shutil.which("runuser") is None:
            return "running as root and `runuser` (util-linux) is missing"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def cluster() -> Iterator[Cluster]:
    """A new PostgreSQL cluster on loopback, durable commits on; stopped and removed after."""
    why = missing()
    if why is not None:
        raise RuntimeError(why)
    bins = bindir()
    assert bins is not None
    as_user: list[str] = []
    base = Path(tempfile.mkdtemp(prefix="rb-pg-", dir="/tmp"))
    if os.geteuid() == 0:
        as_user = ["runuser", "-u", "postgres", "--"]
        pg = pwd.getpwnam("postgres")
        os.chown(base, pg.pw_uid, pg.pw_gid)
    data, sockdir = base / "data", base
    port = _free_port()
    proc: subprocess.Popen[bytes] | None = None
    try:
        done = subprocess.run(
            [*as_user, str(bins / "initdb"), "-D", str(data), "-U", "bench", *_INITDB],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode:
            raise RuntimeError(f"initdb exited with {done.returncode}: {done.stderr[-2000:]}")
        server = [str(bins / "postgres"), "-D", str(data), "-p", str(port), "-k", str(sockdir)]
        settings = [f"-c{s}" for s in (*_DURABLE, "listen_addresses=127.0.0.1")]
        with (base / "server.log").open("wb") as server_log:
            proc = subprocess.Popen(
                [*as_user, *server, *settings], stdout=subprocess.DEVNULL, stderr=server_log
            )
        conninfo = f"host=127.0.0.1 port={port} user=bench dbname=postgres"
        version = _wait_ready(conninfo, proc, base / "server.log")
        yield Cluster(conninfo, data, version)
    finally:
        if proc is not None:
            _stop(proc, data)
        shutil.rmtree(base, ignore_errors=True)


def _stop(proc: subprocess.Popen[bytes], data: Path) -> None:
    """PostgreSQL's fast shutdown (SIGINT to the postmaster: clients are cut off), sent to
    the postmaster itself (as root `proc` is runuser, which would not pass it on)."""
    try:
        pid = int((data / "postmaster.pid").read_text().split()[0])
        os.kill(pid, signal.SIGINT)
    except (OSError, ValueError, IndexError):  # not started, or already gone
        proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _wait_ready(conninfo: str, proc: subprocess.Popen[bytes], log: Path) -> str:
    """Poll until the server accepts a connection (a readiness poll, not a timing)."""
    import psycopg

    deadline = time.monotonic() + _READY_TIMEOUT_S
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"postgres exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            with psycopg.connect(conninfo, connect_timeout=2) as conn:
                row = conn.execute("SHOW server_version").fetchone()
                return str(row[0]) if row else "?"
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@contextmanager
def cluster_or_none(log: Callable[[str], None]) -> Iterator[Cluster | None]:
    """A cluster when one can start here; else None, and why, said once."""
    why = missing()
    if why is not None:
        log(f"PostgreSQL rows skipped: {why}")
        yield None
        return
    with cluster() as pg:
        log(f"PostgreSQL {pg.version} on {pg.conninfo} (fsync, synchronous_commit on)")
        yield pg
