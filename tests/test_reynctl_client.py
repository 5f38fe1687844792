"""reynctl's protocol layer and blocking client, against scripted fake daemons.

The fakes are plain threads on a real Unix socket: they let each failure the
client must tell apart (no socket, stale socket, hang-up, wrong protocol,
silence) happen on demand. The real daemon is exercised in test_reynctl_cli.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from reynctl import errors as ce
from reynctl.client import Client, config_socket, find_socket
from reynctl.jsonrpc import ErrorResponse, Response, ServerMessage, Session, decode_result
from reynd.protocol import errors
from reynd.protocol import methods as m
from reynd.protocol.paths import state_socket

Handler = Callable[[dict[str, Any]], list[dict[str, Any]] | None]
CLOSE: dict[str, Any] = {"close": True}  # last item of a handler's list: send, then hang up


def _status(rid: Any, protocol: int = m.PROTOCOL_VERSION) -> dict[str, Any]:
    result = {"head": 3, "branch": 0, "version": "9.9", "pid": 1, "protocol": protocol}
    return {"jsonrpc": "2.0", "id": rid, "result": result}


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[Callable[[Handler], Path]]:
    """Start a one-connection fake daemon answering each request with `handler`.

    The handler returns the messages to send back (ending with CLOSE to hang
    up after them), or None to hang up at once.
    """
    threads: list[threading.Thread] = []
    listeners: list[socket.socket] = []

    def start(handler: Handler) -> Path:
        path = tmp_path / f"fake{len(listeners)}.sock"
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        srv.bind(os.fspath(path))
        srv.listen(1)
        listeners.append(srv)

        def serve() -> None:
            conn, _ = srv.accept()
            with conn, conn.makefile("rb") as reader:
                for line in reader:
                    replies = handler(json.loads(line))
                    if replies is None:
                        return
                    close = bool(replies) and replies[-1] == CLOSE
                    replies = replies[:-1] if close else replies
                    conn.sendall(b"".join(json.dumps(r).encode() + b"\n" for r in replies))
                    if close:
                        return

        t = threading.Thread(target=serve, daemon=True)
        t.start()
        threads.append(t)
        return path

    yield start
    for srv in listeners:
        srv.close()
    for t in threads:
        t.join(timeout=5)


# -- socket discovery ---------------------------------------------------------------


def test_find_socket_order(tmp_path: Path):
    env = {"XDG_RUNTIME_DIR": str(tmp_path), "REYN_STATE_DIR": str(tmp_path / "nope")}
    assert find_socket("/x.sock", {**env, "REYN_SOCKET": "/env.sock"}) == Path("/x.sock")
    assert find_socket(None, {**env, "REYN_SOCKET": "/env.sock"}) == Path("/env.sock")
    assert find_socket(None, env) == state_socket(tmp_path / "nope", env)
    outside = {"XDG_RUNTIME_DIR": str(tmp_path)}
    assert find_socket(None, outside, cwd=tmp_path) == tmp_path / "reynd" / "reynd.sock"
    cfg = tmp_path / "reynd.toml"
    cfg.write_text('socket = "/from/config.sock"\n')
    assert find_socket(None, {**env, "REYN_CONFIG": str(cfg)}) == Path("/from/config.sock")
    state = tmp_path / "state"
    state.mkdir()
    (state / "reynd.toml").write_text('socket = "/state/config.sock"\n')
    assert find_socket(None, {"REYN_STATE_DIR": str(state)}) == Path("/state/config.sock")
    assert config_socket({}, state) == Path("/state/config.sock")
    (state / "reynd.toml").write_text("not toml [[[")
    assert config_socket({}, state) is None


# -- sans-io session ------------------------------------------------------------------


def test_session_frames_and_matches():
    s = Session()
    rid, data = s.request("daemon.status", m.StatusParams())
    assert json.loads(data) == {
        "jsonrpc": "2.0",
        "method": "daemon.status",
        "params": {},
        "id": rid,
    }
    assert data.endswith(b"\n")
    assert json.loads(s.notify("x")) == {"jsonrpc": "2.0", "method": "x"}
    line = json.dumps({"jsonrpc": "2.0", "id": rid, "result": {"ok": True}}).encode() + b"\n"
    assert s.receive(line[:10]) == []  # half a message: nothing yet
    assert s.partial
    [resp] = s.receive(line[10:])
    assert resp == Response(id=rid, method="daemon.status", raw=b'{"ok": true}')
    assert not s.pending


def test_session_notifications_and_errors():
    s = Session()
    rid, _ = s.request("rewind", m.RewindParams(seq=5))
    notify = {"jsonrpc": "2.0", "method": "notify", "params": {"subscription": "s1"}}
    err = {
        "jsonrpc": "2.0",
        "id": rid,
        "error": {"code": -32001, "message": "seq 5 is not active", "data": {"seq": 5}},
    }
    events = s.receive(b"".join(json.dumps(x).encode() + b"\n" for x in (notify, err)))
    assert isinstance(events[0], ServerMessage)
    assert events[0].method == "notify"
    assert isinstance(events[1], ErrorResponse)
    assert isinstance(events[1].error, errors.NotActive)
    assert events[1].error.data["seq"] == 5
    assert events[1].method == "rewind"


def test_session_error_with_null_id_goes_to_the_only_pending_call():
    s = Session()
    rid, _ = s.request("state.get")
    [ev] = s.receive(b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"bad"}}\n')
    assert isinstance(ev, ErrorResponse)
    assert ev.id == rid
    assert isinstance(ev.error, errors.ParseError)


@pytest.mark.parametrize(
    "line",
    [
        b"not json",
        b'{"id":1,"result":{}}',  # no jsonrpc member
        b'{"jsonrpc":"2.0","id":99,"result":{}}',  # unknown id
        b'{"jsonrpc":"2.0","id":1}',  # neither result nor error
        b'{"jsonrpc":"2.0","method":"x","id":7}',  # a request from the server
    ],
)
def test_session_rejects_malformed_messages(line: bytes):
    s = Session()
    s.request("daemon.status")
    with pytest.raises(ce.ProtocolViolation):
        s.receive(line + b"\n")


def test_decode_result_types_and_mismatch():
    assert decode_result(b'{"seq":4,"branch":0}', m.WalAppendResult).seq == 4
    with pytest.raises(ce.ProtocolViolation):
        decode_result(b'{"seq":"four"}', m.WalAppendResult)


def test_methods_table_matches_client_result_types():
    # The CLI decodes with these types; they must be the ones METHODS declares.
    expected = {
        "daemon.status": m.StatusResult,
        "generations.list": m.GenerationsResult,
        "rewind": m.RewindResult,
        "checkout": m.RewindResult,
        "branches.list": m.BranchesResult,
        "state.get": m.StateResult,
        "state.diff": m.DiffResult,
        "wal.append": m.WalAppendResult,
        "subscribe": m.SubscribeResult,
        "daemon.shutdown": m.OkResult,
    }
    for name, result in expected.items():
        assert m.METHODS[name].result is result, name


# -- client failures ---------------------------------------------------------------------


def test_no_daemon(tmp_path: Path):
    path = tmp_path / "absent.sock"
    with pytest.raises(ce.NoDaemon) as info:
        Client(path)
    assert str(path) in info.value.message
    assert "reynd serve" in info.value.message
    assert "systemctl --user start reynd" in info.value.message


def test_stale_socket(tmp_path: Path):
    path = tmp_path / "stale.sock"
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(os.fspath(path))  # bound, never listening: the file of a dead daemon
    dead.close()
    with pytest.raises(ce.StaleSocket) as info:
        Client(path)
    assert "stale" in info.value.message


def test_not_a_socket(tmp_path: Path):
    path = tmp_path / "file"
    path.write_text("")
    with pytest.raises(ce.DaemonUnreachable) as info:
        Client(path)
    assert "not a socket" in info.value.message


def test_permission_denied_is_mapped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    def refuse(self: socket.socket, address: Any) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    with pytest.raises(ce.SocketPermissionDenied) as info:
        Client(tmp_path / "s.sock")
    assert "permission denied" in info.value.message


def test_daemon_error_is_raised_as_its_class(fake):
    path = fake(
        lambda req: [
            {
                "jsonrpc": "2.0",
                "id": req["id"],
                "error": {
                    "code": -32001,
                    "message": "seq 5 is not on the active lineage: use checkout",
                    "data": {"error": "not_active"},
                },
            }
        ]
    )
    with Client(path) as c, pytest.raises(errors.NotActive) as info:
        c.rewind(seq=5)
    assert "use checkout" in info.value.message


def test_connection_closed_mid_request(fake):
    path = fake(lambda req: None)
    with Client(path) as c, pytest.raises(ce.ConnectionClosed):
        c.status()


def test_silence_times_out(fake):
    release = threading.Event()

    def hang(req: dict[str, Any]) -> None:
        release.wait(10)

    path = fake(hang)
    try:
        with Client(path, timeout=0.2) as c, pytest.raises(ce.DaemonTimeout) as info:
            c.status()
        assert "within 0.2s" in info.value.message
    finally:
        release.set()


def test_protocol_mismatch_is_detected_only_when_an_answer_is_odd(fake):
    seen: list[str] = []

    def old_daemon(req: dict[str, Any]) -> list[dict[str, Any]]:
        seen.append(req["method"])
        if req["method"] == "daemon.status":
            return [_status(req["id"], protocol=m.PROTOCOL_VERSION + 1)]
        return [
            {
                "jsonrpc": "2.0",
                "id": req["id"],
                "error": {"code": -32601, "message": "no such method"},
            }
        ]

    with Client(fake(old_daemon)) as c, pytest.raises(ce.ProtocolMismatch) as info:
        c.branches()
    assert seen == ["branches.list", "daemon.status"]
    assert "upgrade reynctl" in info.value.message


def test_unknown_method_with_matching_protocol_is_reported_as_is(fake):
    def daemon(req: dict[str, Any]) -> list[dict[str, Any]]:
        if req["method"] == "daemon.status":
            return [_status(req["id"])]
        return [
            {
                "jsonrpc": "2.0",
                "id": req["id"],
                "error": {"code": -32601, "message": "no such method"},
            }
        ]

    with Client(fake(daemon)) as c, pytest.raises(errors.MethodNotFound):
        c.branches()


def test_happy_path_needs_no_version_check(fake):
    seen: list[str] = []

    def daemon(req: dict[str, Any]) -> list[dict[str, Any]]:
        seen.append(req["method"])
        return [{"jsonrpc": "2.0", "id": req["id"], "result": {"branches": [], "head": 0}}]

    with Client(fake(daemon)) as c:
        assert c.branches().head == 0
    assert seen == ["branches.list"]


def test_notifications_arriving_during_a_call_are_kept_in_order(fake):
    def daemon(req: dict[str, Any]) -> list[dict[str, Any]]:
        notes = [
            {
                "jsonrpc": "2.0",
                "method": "notify",
                "params": {"subscription": "s1", "topic": "records", "seq": s, "data": {}},
            }
            for s in (4, 5)
        ]
        return [
            notes[0],
            {"jsonrpc": "2.0", "id": req["id"], "result": {"subscription": "s1", "head": 3}},
            notes[1],
        ]

    with Client(fake(daemon)) as c:
        assert c.subscribe().head == 3
        stream = c.notifications(timeout=5)
        got = [json.loads(next(stream).params)["seq"] for _ in range(2)]
    assert got == [4, 5]


# -- watch's ordering and resync -------------------------------------------------------------


def _note(seq: int, topic: str = "records") -> dict[str, Any]:
    params = {"subscription": "s1", "topic": topic, "seq": seq, "data": {"kind": "x"}}
    return {"jsonrpc": "2.0", "method": "notify", "params": params}


def _state(rid: Any, seq: int) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "result": {"seq": seq, "active": True, "branch": 0, "agents": {}},
    }


def test_check_order():
    from reynctl.watch import Gap, check_order

    def note(seq: int, topic: m.Topic = "records") -> m.Notification:
        return m.Notification(subscription="s", topic=topic, seq=seq, data={})

    assert check_order(5, note(6))
    assert not check_order(5, note(5))  # already in the state read at 5
    assert check_order(6, note(6, "generations"))  # caused by the record just shown
    assert not check_order(6, note(4, "rewinds"))
    with pytest.raises(Gap):
        check_order(5, note(7))


def test_watch_resyncs_on_a_gap_and_after_lagged(fake, capsys: pytest.CaptureFixture[str]):
    from reynctl.cli import Options
    from reynctl.watch import Watcher

    calls: list[tuple[str, Any]] = []

    def daemon(req: dict[str, Any]) -> list[dict[str, Any]]:
        method, params, rid = req["method"], req.get("params") or {}, req["id"]
        calls.append((method, params.get("seq") if method == "state.get" else None))
        n_state = sum(1 for c in calls if c[0] == "state.get")
        if method == "daemon.status":
            return [_status(rid)]
        if method == "subscribe":
            head = 3 if n_state == 0 else 9
            return [{"jsonrpc": "2.0", "id": rid, "result": {"subscription": "s1", "head": head}}]
        if n_state == 1:  # initial state at 3, then 4, then a gap: 6
            return [_state(rid, 3), _note(3), _note(4), _note(6)]
        if n_state == 2:  # the resync after the gap, then lagged
            return [
                _state(rid, 6),
                _note(7),
                {
                    "jsonrpc": "2.0",
                    "method": "lagged",
                    "params": {"subscription": "s1", "dropped_after_seq": 7},
                },
            ]
        return [_state(rid, 9), _note(10), CLOSE]

    opts = Options(socket=str(fake(daemon)), json=True, color="never", timeout=5.0)
    with pytest.raises(ce.ConnectionClosed):
        Watcher(opts, None).run()
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(o["type"], o.get("reason"), o.get("seq") or o["state"]["seq"]) for o in out] == [
        ("state", "initial", 3),
        ("notify", None, 4),
        ("state", "gap", 6),
        ("notify", None, 7),
        ("state", "lagged", 9),
        ("notify", None, 10),
    ]
    # Subscribe first, then the state at the subscription's head; the gap reads the tip.
    assert calls == [
        ("daemon.status", None),
        ("subscribe", None),
        ("state.get", 3),
        ("state.get", None),
        ("subscribe", None),
        ("state.get", 9),
    ]
