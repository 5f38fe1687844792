"""Daemon benchmark: JSON-RPC requests/s vs a trio echo server, rewind latency at 10^5 entries.

    python -m bench.daemon [--json] [--seconds S] [--rounds R] [--entries N]

Everything runs against the real `reynd serve` subprocess (started like the
tests start it: READY=1 read from $NOTIFY_SOCKET), on a Unix stream socket.

Requests/s: `daemon.status` and `state.get` (the tip, a few agents with
realistic state written through `wal.append`), with 1 and 16 clients. Each
client is its own connection with exactly one request in flight (no
pipelining). The load comes from ONE separate process (the machine has 2
cores: one for the server, one for the load) that drives raw non-blocking
sockets from an epoll loop, with pre-encoded requests and no JSON decoding on
the hot path (a reply is complete when a chunk ends with a newline: with one
request in flight and no subscription, nothing else arrives). One client uses a
plain blocking send/recv loop. The same load runs against a trivial trio echo
server in its own process (one fixed small JSON-RPC result per line): the
transport limit. The two servers are measured alternately, `--rounds` times,
and reported as reynd/echo ratios. Client and server CPU time are read per
window (`/proc/<pid>/stat`): the server should sit near one full core and the
load process well below it, or the figure measures the client.

Rewind: a state directory with `--entries` WAL records is built through the
storage API (cycles of turns, skill runs and interventions over 8 agents,
snapshots cut as the daemon would), the daemon started on it (start to READY=1
is the restart time), then `rewind` to active seqs near the tip, in the middle
and far back, each followed by a `checkout` back to the original tip, timed as
client round trips and compared to a `daemon.status` round trip on the same
daemon.

This machine is shared and noisy: absolute figures drift, ratios hold.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import multiprocessing.connection
import os
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import trio

from reynd.protocol import events as ev
from reynd.storage.store import Store

READY_TIMEOUT = 120.0
CLIENTS = (1, 16)
ECHO_REPLY = b'{"jsonrpc":"2.0","result":{"ok":true},"id":1}\n'
REQUESTS = {
    "daemon.status": b'{"jsonrpc":"2.0","method":"daemon.status","id":1}\n',
    "state.get": b'{"jsonrpc":"2.0","method":"state.get","id":1}\n',
}
_CLK_TCK = os.sysconf("SC_CLK_TCK")

# -- servers -------------------------------------------------------------------------------


@dataclass
class Proc:
    """A server subprocess that said READY=1."""

    name: str
    proc: subprocess.Popen[bytes]
    socket: Path
    ready_s: float
    stderr: Path

    def cpu_s(self) -> float:
        """User + system CPU seconds used so far (from /proc)."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _CLK_TCK

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def start(
    name: str, cmd: list[str], sock: Path, workdir: Path, extra_env: dict[str, str] | None = None
) -> Proc:
    """Start `cmd` with $NOTIFY_SOCKET (and `extra_env`) set; return once it sent READY=1."""
    notify_path = workdir / f"notify-{name}-{time.monotonic_ns()}"
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("REYN_", "LISTEN_", "WATCHDOG_", "NOTIFY_SOCKET"))
    }
    env["NOTIFY_SOCKET"] = str(notify_path)
    env.update(extra_env or {})
    stderr_path = workdir / f"{name}.stderr"
    with contextlib.closing(socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)) as notify:
        notify.bind(str(notify_path))
        notify.settimeout(0.5)
        with stderr_path.open("ab") as err:
            t0 = time.perf_counter()
            proc = subprocess.Popen(
                cmd,
                cwd=workdir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        deadline = t0 + READY_TIMEOUT
        while True:
            try:
                message = notify.recv(4096).decode()
            except TimeoutError:
                if proc.poll() is not None or time.perf_counter() > deadline:
                    proc.kill()
                    raise RuntimeError(
                        f"{name} did not start: {stderr_path.read_text(errors='replace')}"
                    ) from None
                continue
            if "READY=1" in message.splitlines():
                ready = time.perf_counter() - t0
                break
    notify_path.unlink(missing_ok=True)
    return Proc(name, proc, sock, ready, stderr_path)


def start_reynd(
    name: str, state_dir: Path, workdir: Path, extra_env: dict[str, str] | None = None
) -> Proc:
    """A daemon on `state_dir`; `extra_env` e.g. PYTHONPATH=an older checkout to run that one."""
    sock = workdir / f"{name}.sock"
    cmd = [
        sys.executable,
        "-m",
        "reynd.daemon.cli",
        "serve",
        "--state-dir",
        str(state_dir),
        "--socket",
        str(sock),
        "--log-format",
        "json",
        "--log-level",
        "info",  # what a service runs with
    ]
    return start(name, cmd, sock, workdir, extra_env)


def start_echo(workdir: Path) -> Proc:
    sock = workdir / "echo.sock"
    return start(
        "echo", [sys.executable, "-m", "bench.daemon", "--echo-server", str(sock)], sock, workdir
    )


async def _echo_connection(stream: trio.SocketStream) -> None:
    buf = bytearray()
    async with stream:
        while True:
            try:
                chunk = await stream.receive_some(65536)
            except trio.BrokenResourceError:
                return
            if not chunk:
                return
            buf += chunk
            lines = buf.count(b"\n")
            if lines:
                del buf[: buf.rfind(b"\n") + 1]
                try:
                    await stream.send_all(ECHO_REPLY * lines)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return


async def _echo_main(path: str) -> None:
    sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    await sock.bind(path)
    os.chmod(path, 0o600)
    sock.listen(256)
    listener = trio.SocketListener(sock)
    address = os.environ.get("NOTIFY_SOCKET", "")
    if address:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify:
            notify.sendto(b"READY=1", address)
    await trio.serve_listeners(_echo_connection, [listener])


def echo_server(path: str) -> None:
    """The transport limit: trio, same socket type and framing, no JSON work at all."""
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    trio.run(_echo_main, path)


# -- load (runs in its own process) ---------------------------------------------------------


def _connect(path: Path) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(str(path))
    return s


def _recv_reply(s: socket.socket) -> bytes:
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = s.recv(1 << 20)
        if not chunk:
            raise EOFError("server closed the connection")
        buf += chunk
    return buf


def _loop_one(s: socket.socket, payload: bytes, seconds: float) -> tuple[int, float]:
    send, recv, now = s.sendall, s.recv, time.perf_counter
    count = 0
    t0 = now()
    deadline = t0 + seconds
    while True:
        send(payload)
        while not recv(1 << 20).endswith(b"\n"):
            pass
        count += 1
        t = now()
        if t >= deadline:
            return count, t - t0


def _loop_many(
    socks: list[socket.socket], payloads: list[bytes], seconds: float
) -> tuple[int, float]:
    by_fd = {s.fileno(): s for s in socks}
    payload_of = {s.fileno(): p for s, p in zip(socks, payloads, strict=True)}
    ep = select.epoll()
    for fd in by_fd:
        ep.register(fd, select.EPOLLIN)
    now = time.perf_counter
    count = 0
    try:
        t0 = now()
        deadline = t0 + seconds
        for s in socks:
            s.send(payload_of[s.fileno()])
        outstanding = len(socks)
        t = t0
        while t < deadline:
            for fd, _ in ep.poll(1.0):
                s = by_fd[fd]
                chunk = s.recv(1 << 20)
                if not chunk:
                    raise EOFError("server closed the connection")
                if chunk[-1] == 10:
                    count += 1
                    s.send(payload_of[fd])  # a small request into an empty buffer: never partial
            t = now()
        elapsed = t - t0
        # Drain the replies still in flight so the server is idle for the next window.
        while outstanding:
            for fd, _ in ep.poll(5.0):
                if by_fd[fd].recv(1 << 20)[-1:] == b"\n":
                    outstanding -= 1
        return count, elapsed
    finally:
        ep.close()


def run_load(
    path: Path, payload: bytes | list[bytes], clients: int, seconds: float
) -> dict[str, float]:
    """`payload`: what every client sends, or one per client."""
    payloads = payload if isinstance(payload, list) else [payload] * clients
    socks = [_connect(path) for _ in range(clients)]
    try:
        reply = b""
        for s, payload_s in zip(socks, payloads, strict=True):  # warm up; answers are results
            s.sendall(payload_s)
            reply = _recv_reply(s)
            if b'"result"' not in reply:
                raise RuntimeError(f"not a result: {reply[:300]!r}")
        for s in socks:
            s.setblocking(clients == 1)
        cpu0 = time.process_time()
        if clients == 1:
            count, elapsed = _loop_one(socks[0], payloads[0], seconds)
        else:
            count, elapsed = _loop_many(socks, payloads, seconds)
        cpu = time.process_time() - cpu0
    finally:
        for s in socks:
            s.close()
    return {"count": count, "elapsed": elapsed, "client_cpu": cpu, "reply_bytes": len(reply)}


def _load_worker(conn: multiprocessing.connection.Connection) -> None:
    while (job := conn.recv()) is not None:
        try:
            conn.send(run_load(*job))
        except Exception as exc:
            conn.send({"error": repr(exc)})


class Load:
    """The separate load process; `run` is one measurement window."""

    def __init__(self) -> None:
        ctx = multiprocessing.get_context("fork")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_load_worker, args=(child,), daemon=True)
        self._proc.start()

    def run(self, server: Proc, method: str, clients: int, seconds: float) -> dict[str, float]:
        return self.run_payload(server, REQUESTS[method], clients, seconds)

    def run_payload(
        self, server: Proc, payload: bytes | list[bytes], clients: int, seconds: float
    ) -> dict[str, float]:
        """One window of `clients` connections each sending `payload` (or its own of a list),
        one request in flight each."""
        cpu0 = server.cpu_s()
        self._conn.send((server.socket, payload, clients, seconds))
        out: dict[str, Any] = self._conn.recv()
        if "error" in out:
            raise RuntimeError(f"load against {server.name} failed: {out['error']}")
        out["server_cpu"] = server.cpu_s() - cpu0  # includes the warm-up: a slight overcount
        return out

    def close(self) -> None:
        self._conn.send(None)
        self._proc.join(10)


# -- a blocking client for the rewind part ----------------------------------------------------


class Client:
    def __init__(self, path: Path) -> None:
        self.sock = _connect(path)
        self.sock.settimeout(60)
        self._id = 0

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        self._id += 1
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": self._id}
        if params is not None:
            msg["params"] = params
        self.sock.sendall(msgspec.json.encode(msg) + b"\n")
        reply = msgspec.json.decode(_recv_reply(self.sock))
        if "error" in reply:
            raise RuntimeError(f"{method} {params}: {reply['error']}")
        return reply["result"]

    def timed(self, method: str, params: dict[str, Any] | None = None) -> tuple[float, Any]:
        t = time.perf_counter()
        result = self.call(method, params)
        return time.perf_counter() - t, result

    def close(self) -> None:
        self.sock.close()


# -- workloads ------------------------------------------------------------------------------


def _turn(agent: str, i: int) -> list[ev.Event]:
    """One turn: a message, one act-step with a tool round trip, the end boundary."""
    turn, msg = f"t{i}", f"m{i}"
    reply = f"Done: updated the config and ran the tests for request {i}; all green."
    return [
        ev.MessageReceived(
            agent=agent, message_id=msg, text=f"Please fix the failing check in module {i % 37}"
        ),
        ev.TurnStarted(agent=agent, turn_id=turn, message_id=msg),
        ev.StepStarted(agent=agent, turn_id=turn, step=0, input={"model": "m", "n": i}),
        ev.StepCommitted(
            agent=agent,
            turn_id=turn,
            step=0,
            output={"finish": "stop"},
            messages=(ev.Message(role="assistant", content=reply),),
            tokens_in=812,
            tokens_out=64,
        ),
        ev.TurnEnded(agent=agent, turn_id=turn, reply=reply, label=f"turn {i}"),
    ]


def _side_work(agent: str, i: int) -> list[ev.Event]:
    """A skill run with phases and an answered intervention (bounded state)."""
    run = f"r{i}"
    return [
        ev.SkillStarted(agent=agent, run_id=run, skill="build"),
        ev.SkillPhase(agent=agent, run_id=run, phase="plan"),
        ev.InterventionAsked(agent=agent, intervention_id=run, question="apply the patch?"),
        ev.InterventionAnswered(agent=agent, intervention_id=run, answer="yes"),
        ev.SkillPhase(agent=agent, run_id=run, phase="act"),
        ev.SkillEnded(agent=agent, run_id=run),
    ]


def seed_state(path: Path, agents: int = 4, turns: int = 12) -> int:
    """A few agents with realistic state, written through wal.append; returns the head."""
    client = Client(path)
    try:
        for a in range(agents):
            name = f"agent-{a}"
            events: list[ev.Event] = [ev.AgentCreated(agent=name, options={"model": "m"})]
            for i in range(turns):
                events += _turn(name, i)
            events += _side_work(name, 0)[:3]  # leave a skill run and a question open
            events.append(ev.MessageReceived(agent=name, message_id="next", text="and then?"))
            for e in events:
                data = msgspec.to_builtins(e)
                for key in ("kind", "agent", "seq", "ts"):
                    data.pop(key, None)
                client.call("wal.append", {"agent": name, "kind": _tag(e), "data": data})
        return int(client.call("daemon.status")["head"])
    finally:
        client.close()


def _tag(e: ev.Event) -> str:
    return str(type(e).__struct_config__.tag)


def build_history(root: Path, entries: int, agents: int = 8, batch: int = 300) -> int:
    """`entries` WAL records through the storage API, snapshots cut as the daemon cuts them."""
    names = [f"agent-{a}" for a in range(agents)]
    with Store.open(root) as store:
        store.append([ev.AgentCreated(agent=n) for n in names])
        pending: list[ev.Event] = []
        i = 0
        while store.head + len(pending) < entries:
            name = names[i % agents]
            pending += _turn(name, i) + _side_work(name, i)
            i += 1
            if len(pending) >= batch:
                store.append(pending)
                pending = []
                if store.snapshot_due():
                    store.snapshot_now()
        store.append(pending[: entries - store.head])
        return store.head


# -- measurements -----------------------------------------------------------------------------


def measure_rps(base: Path, load: Load, seconds: float, rounds: int) -> dict[str, Any]:
    reynd = start_reynd("reynd", base / "rps-state", base)
    echo = start_echo(base)
    try:
        head = seed_state(reynd.socket)
        windows: dict[tuple[str, int, str], list[dict[str, float]]] = {}
        for r in range(rounds):
            for method in REQUESTS:
                for clients in CLIENTS:
                    # Alternate which server goes first, so drift hits both alike.
                    order = (reynd, echo) if r % 2 == 0 else (echo, reynd)
                    for server in order:
                        out = load.run(server, method, clients, seconds)
                        windows.setdefault((method, clients, server.name), []).append(out)
        rows = []
        for method in REQUESTS:
            for clients in CLIENTS:
                row: dict[str, Any] = {"method": method, "clients": clients}
                for name in ("reynd", "echo"):
                    ws = windows[(method, clients, name)]
                    count = sum(w["count"] for w in ws)
                    elapsed = sum(w["elapsed"] for w in ws)
                    row[f"{name}_rps"] = count / elapsed
                    row[f"{name}_rps_rounds"] = [round(w["count"] / w["elapsed"]) for w in ws]
                    row[f"{name}_server_us_per_req"] = (
                        sum(w["server_cpu"] for w in ws) / count * 1e6
                    )
                    row[f"{name}_server_cpu_frac"] = sum(w["server_cpu"] for w in ws) / elapsed
                    row[f"{name}_client_cpu_frac"] = sum(w["client_cpu"] for w in ws) / elapsed
                    row[f"{name}_reply_bytes"] = ws[0]["reply_bytes"]
                row["ratio"] = row["reynd_rps"] / row["echo_rps"]
                rows.append(row)
        return {"seed_head": head, "start_empty_s": reynd.ready_s, "rows": rows}
    finally:
        reynd.stop()
        echo.stop()


def measure_rewind(base: Path, entries: int, reps: int) -> dict[str, Any]:
    state_dir = base / "big-state"
    t = time.perf_counter()
    head = build_history(state_dir, entries)
    build_s = time.perf_counter() - t
    snaps = sorted((state_dir / "state" / "snapshots").glob("*"))
    restarts = []
    daemon = start_reynd("big", state_dir, base)
    restarts.append(daemon.ready_s)
    out: dict[str, Any] = {"entries": head, "build_s": build_s, "snapshots": len(snaps)}
    try:
        client = Client(daemon.socket)
        targets = {"near tip": head - 10, "middle": head // 2, "far back": 1000}
        status: list[float] = []
        timings: dict[str, list[float]] = {k: [] for k in targets}
        server_ms: dict[str, list[float]] = {k: [] for k in targets}
        checkout: list[float] = []
        for _ in range(20):
            client.call("daemon.status")  # warm up
        for _ in range(reps):
            for label, seq in targets.items():
                status += [client.timed("daemon.status")[0] for _ in range(5)]
                dt, res = client.timed("rewind", {"seq": seq})
                assert res["mode"] == "undo" and res["target"] == seq, res
                timings[label].append(dt)
                server_ms[label].append(res["duration_ms"])
                dt, res = client.timed("checkout", {"seq": head})
                assert res["mode"] == "fork_switch", res
                checkout.append(dt)
        client.close()
        client = Client(daemon.socket)
        final_head = int(client.call("daemon.status")["head"])
        client.close()
        daemon.stop()
        for _ in range(2):
            daemon = start_reynd("big", state_dir, base)
            restarts.append(daemon.ready_s)
            daemon.stop()
        status_ms = statistics.median(status) * 1e3
        out.update(
            status_rtt_ms=status_ms,
            final_head=final_head,
            restart_s=restarts,
            rewind={
                label: {
                    "seq": targets[label],
                    "rtt_ms": statistics.median(timings[label]) * 1e3,
                    "rtt_ms_max": max(timings[label]) * 1e3,
                    "server_ms": statistics.median(server_ms[label]),
                    "ratio_vs_status": statistics.median(timings[label]) * 1e3 / status_ms,
                }
                for label in targets
            },
            checkout_back_rtt_ms=statistics.median(checkout) * 1e3,
            checkout_ratio_vs_status=statistics.median(checkout) * 1e3 / status_ms,
        )
        return out
    finally:
        daemon.stop()


@contextlib.contextmanager
def workdir() -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="rb-", dir="/tmp"))  # short: socket path limit
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--seconds", type=float, default=3.0, help="length of one load window")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds per pair")
    ap.add_argument("--entries", type=int, default=100_000, help="WAL entries for the rewinds")
    ap.add_argument("--reps", type=int, default=5, help="rewinds per target")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--echo-server", metavar="SOCKET", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.echo_server:
        echo_server(args.echo_server)
        return
    load = Load()
    try:
        with workdir() as base:
            rps = measure_rps(base, load, args.seconds, args.rounds)
            rewind = measure_rewind(base, args.entries, args.reps)
    finally:
        load.close()
    result = {
        "cpus": os.cpu_count(),
        "seconds": args.seconds,
        "rounds": args.rounds,
        "rps": rps,
        "rewind": rewind,
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(
        f"requests/s, one request in flight per client, {args.rounds} alternating rounds "
        f"of {args.seconds:g} s (cpu: server/client share of one core)"
    )
    print(
        f"{'method':14} {'clients':>7} {'reynd/s':>9} {'echo/s':>9} {'ratio':>6} "
        f"{'reynd us/req':>12} {'echo us/req':>11} {'cpu reynd':>10} {'cpu echo':>10} "
        f"{'reply B':>8}"
    )
    for row in rps["rows"]:
        print(
            f"{row['method']:14} {row['clients']:7d} {row['reynd_rps']:9.0f} "
            f"{row['echo_rps']:9.0f} {row['ratio']:6.2f} "
            f"{row['reynd_server_us_per_req']:12.1f} {row['echo_server_us_per_req']:11.1f} "
            f"{row['reynd_server_cpu_frac']:4.2f}/{row['reynd_client_cpu_frac']:4.2f} "
            f"{row['echo_server_cpu_frac']:4.2f}/{row['echo_client_cpu_frac']:4.2f} "
            f"{row['reynd_reply_bytes']:8d}"
        )
    rw = rewind
    print()
    print(
        f"rewind with {rw['entries']} WAL entries ({rw['snapshots']} snapshots; "
        f"built in {rw['build_s']:.1f} s)"
    )
    print(f"daemon.status round trip (baseline): {rw['status_rtt_ms']:.3f} ms")
    print(f"{'target':10} {'seq':>7} {'rtt ms':>8} {'max ms':>8} {'server ms':>9} {'x status':>9}")
    for label, r in rw["rewind"].items():
        print(
            f"{label:10} {r['seq']:7d} {r['rtt_ms']:8.2f} {r['rtt_ms_max']:8.2f} "
            f"{r['server_ms']:9.2f} {r['ratio_vs_status']:9.0f}"
        )
    print(
        f"{'checkout back to the tip (fork_switch)':28} rtt {rw['checkout_back_rtt_ms']:.2f} ms"
        f"  x status {rw['checkout_ratio_vs_status']:.0f}"
    )
    restarts = ", ".join(f"{s:.2f}" for s in rw["restart_s"])
    print(
        f"start to READY=1: {restarts} s with {rw['entries']} entries "
        f"(first right after the build, then after {rw['final_head'] - rw['entries']} resets); "
        f"empty state dir {rps['start_empty_s']:.2f} s"
    )


if __name__ == "__main__":
    main()
