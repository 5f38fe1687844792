"""`reynctl web`'s guard over plain HTTP, against a real daemon (issue 26).

Token or cookie, the Host header (DNS rebinding), POST-only writes with the
page's CSRF value and a same-origin Origin/Sec-Fetch-Site, and the daemon's
errors passed on with their code. The browser tests (test_web_browser.py)
prove the same in Chromium; these are the fast, exhaustive ones.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reynctl.web.app import listen
from reynctl.web.security import Policy, check, is_loopback
from tests.harness import Daemon
from tests.web_helpers import Web, web_server


@pytest.fixture(scope="module")
def web(shared_daemon: Daemon) -> Iterator[Web]:
    shared_daemon.call("agents.create", {"name": "a"})
    for text in ("one", "two"):
        shared_daemon.call("agents.send", {"agent": "a", "text": text, "wait": True})
    with web_server(shared_daemon.socket) as server:
        yield server


def head(daemon: Daemon) -> int:
    return int(daemon.call("daemon.status")["head"])


def test_no_token_no_page(web: Web) -> None:
    for path in ("/", "/api/timeline", "/api/read/daemon.status", "/assets/app.js", "/api/events"):
        status, body, _ = web.request("GET", path, headers={"Cookie": ""})
        assert status == 403, path
        assert b"open the URL `reynctl web` printed" in body
    status, _, _ = web.request("GET", "/?token=wrong", headers={"Cookie": ""})
    assert status == 403
    status, _, _ = web.request("GET", "/", headers={"Cookie": web.cookie + "x"})
    assert status == 403


def test_the_token_sets_a_strict_cookie_and_the_cookie_suffices(web: Web) -> None:
    status, page, headers = web.request("GET", f"/?token={web.token}", headers={"Cookie": ""})
    assert status == 200
    assert b'<meta name="csrf"' in page
    cookie = headers["set-cookie"]
    assert cookie.startswith(web.cookie + ";")
    assert "HttpOnly" in cookie
    assert "SameSite=Strict" in cookie
    # Nothing from another origin: the CSP says so to the browser.
    assert "default-src 'self'" in headers["content-security-policy"]
    status, _, _ = web.request("GET", "/api/read/daemon.status")
    assert status == 200


def test_a_foreign_host_header_is_refused_even_with_the_token(web: Web) -> None:
    port = web.host.rsplit(":", 1)[1]
    for host in (f"evil.example:{port}", "127.0.0.1", f"127.0.0.1:{int(port) + 1}", ""):
        status, body, _ = web.request("GET", f"/?token={web.token}", headers={"Host": host})
        assert status == 403, host
        assert b"is not this server's name" in body
    status, _, _ = web.request("GET", "/", headers={"Host": f"localhost:{port}"})
    assert status == 200


def test_writes_need_post_csrf_and_the_same_origin(web: Web, shared_daemon: Daemon) -> None:
    before = head(shared_daemon)
    tag = {"name": "kept", "seq": 1}
    csrf = web.csrf()
    refused = [
        ({"Origin": web.origin}, "needs the x-reynd-csrf header"),
        ({"Origin": web.origin, "X-Reynd-CSRF": "0" * 64}, "needs the x-reynd-csrf header"),
        ({"Origin": "http://evil.example", "X-Reynd-CSRF": csrf}, "cross-origin write"),
        ({"Origin": "null", "X-Reynd-CSRF": csrf}, "cross-origin write"),
        ({"Sec-Fetch-Site": "same-site", "X-Reynd-CSRF": csrf}, "cross-site write"),
        ({"Sec-Fetch-Site": "cross-site", "X-Reynd-CSRF": csrf}, "cross-site write"),
    ]
    for headers, why in refused:
        status, body, _ = web.request("POST", "/api/call/tags.set", tag, headers)
        assert status == 403, headers
        assert why in body.decode(), body
    status, _, _ = web.request("PUT", "/api/call/tags.set", tag, {"X-Reynd-CSRF": csrf})
    assert status == 405
    # A GET never changes anything: the action routes take POST only.
    status, _, _ = web.request("GET", "/api/call/tags.set?p={}")
    assert status == 405
    assert head(shared_daemon) == before
    assert shared_daemon.call("tags.list")["tags"] == []
    status, body = web.post("tags.set", tag)
    assert status == 200, body
    assert body["name"] == "kept"
    assert [t["name"] for t in shared_daemon.call("tags.list")["tags"]] == ["kept"]


def test_bad_input_and_daemon_errors_say_what_to_do(web: Web, shared_daemon: Daemon) -> None:
    status, body = web.post("rewind", {"seq": -3})
    assert status == 400
    assert body["error"]["code"] == -32602
    assert "rewind" in body["error"]["message"]
    status, body = web.post("daemon.shutdown", {})
    assert status == 404
    assert "not an action this page offers" in body["error"]["message"]
    status, raw, _ = web.request("GET", "/api/read/rewind?p=%7B%7D")
    assert status == 404
    status, body = web.post("rewind", {"seq": head(shared_daemon) + 100})
    assert status == 409
    assert body["error"]["code"] < 0
    assert body["error"]["message"]
    status, raw, _ = web.request("GET", "/api/read/state.get?p=%7Bnot-json")
    assert status == 400
    status, raw, _ = web.request("GET", "/api/timeline?first=-1")
    assert status == 400
    assert b"is not a row count" in raw
    status, raw, _ = web.request("GET", "/api/timeline?first=2")
    newest = json.loads(raw)
    status, raw, _ = web.request("GET", "/api/timeline")
    whole = json.loads(raw)
    assert newest["rows"] == whole["rows"][:2]
    assert newest["total"] == whole["total"] == len(whole["rows"]) > 2
    # None of it broke the server or the daemon.
    status, raw, _ = web.request("GET", "/api/read/daemon.status")
    assert status == 200
    assert json.loads(raw)["head"] == head(shared_daemon)


def test_a_non_loopback_host_warns(shared_daemon: Daemon) -> None:
    with web_server(shared_daemon.socket, ["--host", "0.0.0.0"]) as server:
        assert server.proc.stderr is not None
        assert "reachable from other machines" in server.proc.stderr.readline()
        assert server.url.startswith("http://0.0.0.0:")


POLICY = Policy.for_bind("127.0.0.1", 8000, token="t" * 43)


@given(
    method=st.sampled_from(["GET", "HEAD", "POST", "PUT", "DELETE"]),
    host=st.sampled_from(["127.0.0.1:8000", "localhost:8000", "evil:8000", "127.0.0.1:80"]),
    token=st.one_of(st.none(), st.just("t" * 43), st.text(max_size=50)),
    csrf=st.one_of(st.none(), st.just(POLICY.csrf), st.text(max_size=70)),
    origin=st.one_of(st.none(), st.just("http://127.0.0.1:8000"), st.text(max_size=30)),
    site=st.one_of(st.none(), st.sampled_from(["same-origin", "same-site", "cross-site", "none"])),
)
def test_check_lets_through_exactly_the_right_requests(
    *,
    method: str,
    host: str,
    token: str | None,
    csrf: str | None,
    origin: str | None,
    site: str | None,
) -> None:
    headers = {"host": host}
    for name, value in (("x-reynd-csrf", csrf), ("origin", origin), ("sec-fetch-site", site)):
        if value is not None:
            headers[name] = value
    allowed = (
        host in ("127.0.0.1:8000", "localhost:8000")
        and token == POLICY.token
        and (
            method in ("GET", "HEAD")
            or (
                method == "POST"
                and csrf == POLICY.csrf
                and origin in (None, f"http://{host}")
                and site in (None, "same-origin", "none")
            )
        )
    )
    assert (check(POLICY, method, headers, token, None) is None) == allowed


def test_loopback_names() -> None:
    assert all(map(is_loopback, ["127.0.0.1", "localhost", "::1", "[::1]", "127.1.2.3"]))
    assert not any(map(is_loopback, ["0.0.0.0", "192.168.1.1", "example.com", "::"]))


def test_the_servers_connections_send_without_delay() -> None:
    """Each accepted connection has TCP_NODELAY (from the listening socket): uvicorn writes a
    response's head and body apart, and with Nagle the body waited for the browser's delayed
    ACK, 40 ms on every request of a kept-alive connection (bench.web's detail and live update)."""
    server = listen("127.0.0.1", 0)
    with server, socket.create_connection(server.getsockname()[:2]) as client:
        conn, _ = server.accept()
        with conn:
            assert conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
            assert client.fileno() >= 0


def test_the_page_carries_its_first_rows_and_no_label_ends_their_script(
    web: Web, shared_daemon: Daemon
) -> None:
    """The rows of the first paint come in the page (a data block, when the layout is at
    hand): as /api/timeline gives them, with "<" escaped, so a message cannot end the block
    and run as the page's script."""
    text = "</script><script>alert(1)</script><!--"
    shared_daemon.call("agents.send", {"agent": "a", "text": text, "wait": True})
    status, raw, _ = web.request("GET", "/api/timeline?first=100")  # laid out: at hand
    assert status == 200
    status, page, _ = web.request("GET", "/")
    assert status == 200
    block = page.split(b'<script type="application/json" id="first-rows">', 1)[1]
    block = block.split(b"</script>", 1)[0]
    assert b"<" not in block
    assert json.loads(block) == json.loads(raw)
    assert any(text in row["label"] for row in json.loads(block)["rows"])
