"""The `openai` and `command` executors, driven through the real daemon.

`openai` talks to a real HTTP server on loopback (stdlib http.server in a
thread, one scripted scenario per URL prefix), never a mocked client: the
server records every request (headers, JSON body) and can answer, fail with a
status, send garbage, or hang until the client closes the connection.

`command` runs small Python programs that speak the StepRequest/StepResult
contract on stdin/stdout.
"""

from __future__ import annotations

import json
import select
import socket
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from reynd.protocol.limits import MAX_COUNT
from tests.harness import Daemon, short_tempdir, start_daemon

KEY_ENV = "REYND_TEST_OPENAI_KEY"
KEY = "sk-loopback-test-1234"
WAIT = 20.0  # upper bound for anything that should happen at once

# -- the loopback chat-completions server ---------------------------------------------------


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class Scenario:
    """Replies for one URL prefix, in order: a dict (JSON 200), (status, text), b"raw", "hang"."""

    replies: list[Any]
    seen: list[Seen] = field(default_factory=list)
    arrived: threading.Event = field(default_factory=threading.Event)  # a hang began
    closed: threading.Event = field(default_factory=threading.Event)  # client hung up on it
    closed_at: float = 0.0


class ChatServer:
    def __init__(self) -> None:
        self.scenarios: dict[str, Scenario] = {}
        self.release = threading.Event()  # ends every hang (teardown)
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                prefix, _, rest = self.path.lstrip("/").partition("/")
                scenario = server.scenarios[prefix]
                raw = self.rfile.read(int(self.headers.get("content-length", "0")))
                scenario.seen.append(
                    Seen(
                        "/" + rest, {k.lower(): v for k, v in self.headers.items()}, json.loads(raw)
                    )
                )
                if rest != "v1/chat/completions":
                    return self._send(404, b"no such path")
                reply = scenario.replies.pop(0) if scenario.replies else (500, "unscripted")
                if reply == "hang":
                    scenario.arrived.set()
                    self._hang(scenario)
                elif isinstance(reply, dict):
                    self._send(200, json.dumps(reply).encode(), "application/json")
                elif isinstance(reply, bytes):
                    self._send(200, reply, "application/json")
                else:
                    status, text = reply
                    self._send(status, text.encode())

            def _send(self, status: int, body: bytes, ctype: str = "text/plain") -> None:
                self.send_response(status)
                self.send_header("content-type", ctype)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _hang(self, scenario: Scenario) -> None:
                """Answer nothing; note when the client closes the connection."""
                conn: socket.socket = self.connection
                while not server.release.is_set():
                    readable, _, _ = select.select([conn], [], [], 0.05)
                    if readable:
                        try:
                            data = conn.recv(1, socket.MSG_PEEK)
                        except OSError:
                            data = b""
                        if not data:
                            scenario.closed_at = time.monotonic()
                            scenario.closed.set()
                            break
                self.close_connection = True

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def scenario(self, name: str, *replies: Any) -> tuple[Scenario, str]:
        """Register a scenario; returns it and the base_url that reaches it."""
        scenario = self.scenarios[name] = Scenario(list(replies))
        return scenario, f"http://127.0.0.1:{self.port}/{name}/v1"

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def completion(
    content: str | None = None,
    *,
    calls: list[dict[str, Any]] | None = None,
    prompt: int = 0,
    out: int = 0,
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": "cmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": out, "total_tokens": prompt + out},
    }


# -- fixtures ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[ChatServer]:
    s = ChatServer()
    s.thread.start()
    yield s
    s.close()
    s.thread.join(5)


@pytest.fixture(scope="module")
def reynd() -> Iterator[Daemon]:
    """One daemon for the module; every test uses its own agents."""
    with short_tempdir() as path:
        d = start_daemon(path, env={KEY_ENV: KEY, "REYND_TEST_NON_ASCII_KEY": "clé"})
        yield d
        d.stop()


_names = iter(range(1_000_000))


def create(d: Daemon, executor: str, options: dict[str, Any]) -> str:
    name = f"{executor}-{next(_names)}"
    d.call("agents.create", {"name": name, "executor": executor, "options": options})
    return name


def send(d: Daemon, agent: str, text: str) -> dict[str, Any]:
    result: dict[str, Any] = d.call(
        "agents.send", {"agent": agent, "text": text, "wait": True, "timeout": WAIT}
    )
    assert result.get("outcome") is not None, f"the turn did not end: {result}"
    return result


def history(d: Daemon, agent: str) -> list[dict[str, Any]]:
    return list(d.call("state.get")["agents"][agent]["history"])


# -- openai -------------------------------------------------------------------------------------


def test_openai_plain_completion(reynd: Daemon, server: ChatServer) -> None:
    scenario, url = server.scenario("plain", completion("hello from the model", prompt=12, out=4))
    agent = create(
        reynd, "openai", {"base_url": url, "model": "tiny-1", "timeout": 10, "api_key_env": KEY_ENV}
    )
    result = send(reynd, agent, "say hello")
    assert result["outcome"] == "completed", result
    assert result["reply"] == "hello from the model"
    info = reynd.call("agents.get", {"agent": agent})
    assert (info["tokens_in"], info["tokens_out"]) == (12, 4)
    assert info["executor_calls"] == 1
    (req,) = scenario.seen
    assert req.path == "/v1/chat/completions"
    assert req.body["model"] == "tiny-1"
    assert req.body["messages"] == [{"role": "user", "content": "say hello"}]
    assert req.headers["authorization"] == f"Bearer {KEY}"
    assert req.headers["content-type"] == "application/json"
    assert history(reynd, agent)[-1] == {"role": "assistant", "content": "hello from the model"}


def test_openai_key_only_from_the_named_env_var(reynd: Daemon, server: ChatServer) -> None:
    scenario, url = server.scenario("nokey", completion("ok"))
    agent = create(reynd, "openai", {"base_url": url, "api_key_env": "REYND_TEST_UNSET_KEY"})
    assert send(reynd, agent, "hi")["outcome"] == "completed"
    assert "authorization" not in scenario.seen[0].headers


def test_openai_tool_cycle(reynd: Daemon, server: ChatServer) -> None:
    call = {
        "id": "call_7",
        "type": "function",
        "function": {"name": "echo", "arguments": json.dumps({"text": "ping"})},
    }
    scenario, url = server.scenario(
        "tools",
        completion(None, calls=[call], prompt=20, out=5),
        completion("the tool said ping", prompt=30, out=6),
    )
    agent = create(
        reynd,
        "openai",
        {"base_url": url, "model": "m", "api_key_env": KEY_ENV, "system": "be brief"},
    )
    result = send(reynd, agent, "use the echo tool")
    assert result["outcome"] == "completed", result
    assert result["reply"] == "the tool said ping"
    assert len(scenario.seen) == 2, [s.body for s in scenario.seen]
    first, second = (s.body for s in scenario.seen)
    for body in (first, second):
        names = {t["function"]["name"] for t in body["tools"]}
        assert {"echo", "time_now"} <= names
        assert all(t["type"] == "function" for t in body["tools"])
        assert body["messages"][0] == {"role": "system", "content": "be brief"}
    assert first["messages"][1:] == [{"role": "user", "content": "use the echo tool"}]
    assert second["messages"][1:] == [
        {"role": "user", "content": "use the echo tool"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "content": "ping", "tool_call_id": "call_7"},
    ]
    info = reynd.call("agents.get", {"agent": agent})
    assert (info["tokens_in"], info["tokens_out"]) == (50, 11)
    assert info["executor_calls"] == 2  # the tool step calls no model


def test_openai_http_500(reynd: Daemon, server: ChatServer) -> None:
    _, url = server.scenario("err500", (500, "model exploded"))
    agent = create(reynd, "openai", {"base_url": url})
    result = send(reynd, agent, "hi")
    assert result["outcome"] == "failed", result
    assert f"{url}/chat/completions" in result["reply"]
    assert "500" in result["reply"] and "model exploded" in result["reply"]
    info = reynd.call("agents.get", {"agent": agent})
    assert info["last_error"] == result["reply"]
    # The agent keeps serving: the next turn works.
    server.scenarios["err500"].replies.append(completion("better now"))
    assert send(reynd, agent, "again")["reply"] == "better now"


def test_openai_timeout(reynd: Daemon, server: ChatServer) -> None:
    scenario, url = server.scenario("slow", "hang")
    agent = create(reynd, "openai", {"base_url": url, "timeout": 0.3})
    t = time.monotonic()
    result = send(reynd, agent, "hi")
    assert result["outcome"] == "failed", result
    assert "did not answer within 0.3s" in result["reply"] and url in result["reply"]
    assert time.monotonic() - t < WAIT / 2
    assert scenario.closed.wait(WAIT), "the client kept the timed-out connection open"


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"<html>bad gateway</html>", "not a chat completion"),
        (b'{"choices": []}', "not a chat completion"),
        (b'{"object": "error"}', "not a chat completion"),
    ],
)
def test_openai_malformed_body(reynd: Daemon, server: ChatServer, body: bytes, why: str) -> None:
    _, url = server.scenario(f"bad{next(_names)}", body)
    agent = create(reynd, "openai", {"base_url": url})
    result = send(reynd, agent, "hi")
    assert result["outcome"] == "failed", result
    assert why in result["reply"] and url in result["reply"]


def test_openai_usage_past_the_count_limit_fails_the_step(
    reynd: Daemon, server: ChatServer
) -> None:
    """A server's token counts are held to the same bound as any record's (limits.MAX_COUNT)."""
    _, url = server.scenario("usage", completion("hi", prompt=2**64), completion("fine", prompt=3))
    agent = create(reynd, "openai", {"base_url": url})
    result = send(reynd, agent, "hi")
    assert result["outcome"] == "failed", result
    assert result["reply"] == f"the step's result has tokens_in outside 0 to {MAX_COUNT}"
    assert reynd.call("agents.get", {"agent": agent})["tokens_in"] == 0
    assert send(reynd, agent, "again")["reply"] == "fine"


def test_openai_unreachable(reynd: Daemon) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    agent = create(reynd, "openai", {"base_url": url, "timeout": 5})
    result = send(reynd, agent, "hi")
    assert result["outcome"] == "failed", result
    assert f"cannot reach {url}/chat/completions" in result["reply"]


def test_openai_rewind_aborts_the_request_in_flight(short_tmp: Path, server: ChatServer) -> None:
    d = start_daemon(short_tmp)
    try:
        scenario, url = server.scenario("inflight", "hang", completion("after the rewind"))
        agent = create(d, "openai", {"base_url": url, "timeout": 60})
        before = d.call("daemon.status")["head"]
        sent = d.call("agents.send", {"agent": agent, "text": "think hard"})
        assert scenario.arrived.wait(WAIT), "the request never reached the server"
        t = time.monotonic()
        result = d.call("rewind", {"seq": before})
        assert result["cancelled"] == [{"agent": agent, "turn_id": sent["turn_id"]}]
        assert scenario.closed.wait(WAIT), "the server never saw the connection closed"
        assert scenario.closed_at - t < 5.0
        info = d.call("agents.get", {"agent": agent})
        assert info["inbox"] == 0 and info["turn_id"] is None and info["turns_completed"] == 0
        assert history(d, agent) == []
        # The agent keeps serving new messages.
        assert send(d, agent, "again")["reply"] == "after the rewind"
        assert len(scenario.seen) == 2
    finally:
        d.stop()


def test_openai_tool_arguments_that_are_not_an_object(reynd: Daemon, server: ChatServer) -> None:
    calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": "echo", "arguments": args}}
        for i, args in enumerate(["null", "[1]", '"x"', "{bad"])
    ]
    scenario, url = server.scenario("badargs", completion(None, calls=calls), completion("ok"))
    agent = create(reynd, "openai", {"base_url": url})
    assert send(reynd, agent, "hi")["reply"] == "ok"
    tool_messages = [m for m in scenario.seen[1].body["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == ["c0", "c1", "c2", "c3"]
    assert all(m["content"].startswith("error: bad arguments for echo") for m in tool_messages)


def test_openai_key_that_cannot_be_a_header(reynd: Daemon, server: ChatServer) -> None:
    scenario, url = server.scenario("badkey", completion("unreachable"))
    agent = create(reynd, "openai", {"base_url": url, "api_key_env": "REYND_TEST_NON_ASCII_KEY"})
    result = send(reynd, agent, "hi")
    assert result["outcome"] == "failed", result
    assert result["reply"].startswith(f"cannot send a request to {url}/chat/completions")
    assert scenario.seen == []


# -- command --------------------------------------------------------------------------------------

PROGRAM = """
import json, sys
req = json.load(sys.stdin)
reply = f"step {req['step']} of {req['turn_id']}: {req['text']} ({len(req['history'])} msgs)"
print(json.dumps({
    "messages": [{"role": "assistant", "content": reply}],
    "done": True, "reply": reply, "tokens_in": 7, "tokens_out": 3,
}))
"""


def program(tmp: Path, name: str, source: str) -> list[str]:
    path = tmp / f"{name}.py"
    path.write_text(source)
    return [sys.executable, str(path)]


def test_command_request_and_result(reynd: Daemon, short_tmp: Path) -> None:
    agent = create(reynd, "command", {"argv": program(short_tmp, "ok", PROGRAM)})
    result = send(reynd, agent, "hello")
    assert result["outcome"] == "completed", result
    turn = result["turn_id"]
    assert result["reply"] == f"step 0 of {turn}: hello (1 msgs)"
    info = reynd.call("agents.get", {"agent": agent})
    assert (info["tokens_in"], info["tokens_out"], info["executor_calls"]) == (7, 3, 1)


def test_command_env_and_cwd(reynd: Daemon, short_tmp: Path) -> None:
    source = (
        "import json, os, sys\njson.load(sys.stdin)\n"
        "r = os.environ['REYND_T'] + ' in ' + os.path.basename(os.getcwd())\n"
        "print(json.dumps({'done': True, 'reply': r}))\n"
    )
    (short_tmp / "work").mkdir()
    agent = create(
        reynd,
        "command",
        {
            "argv": program(short_tmp, "env", source),
            "env": {"REYND_T": "set"},
            "cwd": str(short_tmp / "work"),
        },
    )
    assert send(reynd, agent, "x")["reply"] == "set in work"


def test_command_nonzero_exit_quotes_stderr(reynd: Daemon, short_tmp: Path) -> None:
    argv = program(
        short_tmp, "fail", "import sys\nsys.stderr.write('model not found\\n')\nsys.exit(3)\n"
    )
    agent = create(reynd, "command", {"argv": argv})
    result = send(reynd, agent, "hi")
    assert result["outcome"] == "failed", result
    assert result["reply"] == f"{argv[0]} exited with status 3: model not found"


@pytest.mark.parametrize(
    ("stdout", "why"),
    [
        ("this is not json", "did not print a StepResult as JSON"),
        ('{"done": true, "surprise": 1}', "did not print a StepResult as JSON"),
        ("", "did not print a StepResult as JSON"),
    ],
)
def test_command_bad_stdout(reynd: Daemon, short_tmp: Path, stdout: str, why: str) -> None:
    argv = program(short_tmp, "bad", f"import sys\nsys.stdout.write({stdout!r})\n")
    agent = create(reynd, "command", {"argv": argv})
    result = send(reynd, agent, "hi")
    assert result["outcome"] == "failed", result
    assert why in result["reply"], result
    assert repr(stdout[:20])[1:-1] in result["reply"]


@pytest.mark.parametrize(
    ("field", "value"),
    [("tokens_in", 2**64), ("tokens_out", MAX_COUNT + 1), ("plan_step_done", 10**30)],
)
def test_command_counts_past_the_limit_fail_the_step(
    reynd: Daemon, short_tmp: Path, field: str, value: int
) -> None:
    """Not written: a memo holding them would reach the agent's sums and its snapshots."""
    result_json = json.dumps({"done": True, "reply": "r", "plan": ["p"], field: value})
    argv = program(short_tmp, f"count-{field}", f"import sys\nsys.stdout.write({result_json!r})\n")
    agent = create(reynd, "command", {"argv": argv})
    result = send(reynd, agent, "hi")
    assert result["outcome"] == "failed", result
    assert result["reply"] == f"the step's result has {field} outside 0 to {MAX_COUNT}"
    info = reynd.call("agents.get", {"agent": agent})
    assert (info["tokens_in"], info["tokens_out"]) == (0, 0)


def test_command_killed_by_signal(reynd: Daemon, short_tmp: Path) -> None:
    argv = program(
        short_tmp,
        "killed",
        "import os, signal, sys\nsys.stderr.write('dying\\n')\n"
        "sys.stderr.flush()\nos.kill(os.getpid(), signal.SIGKILL)\n",
    )
    agent = create(reynd, "command", {"argv": argv})
    result = send(reynd, agent, "hi")
    assert result["outcome"] == "failed", result
    assert result["reply"] == f"{argv[0]} was killed by signal 9: dying"


def test_command_missing_program(reynd: Daemon, short_tmp: Path) -> None:
    missing = str(short_tmp / "no-such-model-cli")
    agent = create(reynd, "command", {"argv": [missing]})
    result = send(reynd, agent, "hi")
    assert result["outcome"] == "failed", result
    assert result["reply"].startswith(f"cannot run {missing}")


def test_command_timeout_kills_the_program(reynd: Daemon, short_tmp: Path) -> None:
    pidfile = short_tmp / "pid"
    source = (
        "import os, time\n"
        f"open({str(pidfile) + '.tmp'!r}, 'w').write(str(os.getpid()))\n"
        f"os.rename({str(pidfile) + '.tmp'!r}, {str(pidfile)!r})\n"
        "time.sleep(600)\n"
    )
    argv = program(short_tmp, "sleepy", source)
    agent = create(reynd, "command", {"argv": argv, "timeout": 1.0})
    result = send(reynd, agent, "hi")
    assert result["outcome"] == "failed", result
    assert result["reply"] == f"{argv[0]} did not answer within 1s"
    if pidfile.exists():  # else a very slow start: killed before it got that far
        pid = int(pidfile.read_text())
        assert not Path(f"/proc/{pid}").exists(), "the timed-out program is still there"


def test_an_executor_that_raises_fails_the_turn_not_the_daemon(reynd: Daemon) -> None:
    # subprocess refuses an argv with a NUL byte with ValueError, not OSError:
    # the runner turns any exception but a cancellation into a failed turn.
    agent = create(reynd, "command", {"argv": ["model\x00cli"]})
    result = send(reynd, agent, "hi")
    assert result["outcome"] == "failed", result
    assert result["reply"].startswith("executor error: ValueError(")
    assert reynd.proc.poll() is None
    builtin = create(reynd, "builtin", {})
    assert send(reynd, builtin, "still there?")["outcome"] == "completed"


# -- option validation at agents.create ----------------------------------------------------------


@pytest.mark.parametrize(
    ("executor", "options", "named"),
    [
        ("command", {}, "argv"),
        ("command", {"argv": []}, "argv"),
        ("command", {"argv": "echo hi"}, "argv"),
        ("command", {"argv": ["x"], "timeout": 0}, "timeout"),
        ("command", {"argv": ["x"], "shell": True}, "shell"),
        ("openai", {"timeout": -1}, "timeout"),
        ("openai", {"base_url": 42}, "base_url"),
        ("openai", {"modle": "typo"}, "modle"),
        ("openai", {"base_url": "localhost:8080/v1"}, "base_url"),
        ("openai", {"base_url": "http://\x01x/v1"}, "base_url"),
        ("builtin", {"delay": -1}, "delay"),
    ],
)
def test_create_refuses_bad_options(
    reynd: Daemon, executor: str, options: dict[str, Any], named: str
) -> None:
    name = f"bad-{next(_names)}"
    with reynd.connect() as client:
        reply = client.request(
            "agents.create", {"name": name, "executor": executor, "options": options}
        )
    error = reply["error"]
    assert error["code"] == -32602, error
    assert named in error["message"] and executor in error["message"], error
    assert error["data"]["field"] in ("options", f"options.{named}"), error
    agents = reynd.call("agents.list")["agents"]
    assert name not in {a["name"] for a in agents}


def test_create_refuses_unknown_executor(reynd: Daemon) -> None:
    with reynd.connect() as client:
        reply = client.request("agents.create", {"name": "x-unknown", "executor": "claude"})
    assert reply["error"]["code"] == -32602
    assert "executor" in reply["error"]["message"]


# -- the history a step sees ---------------------------------------------------------------------


def test_open_tool_cycle_of_the_turn_in_flight_is_kept_at_the_tail() -> None:
    from reynd.protocol.events import Message, ToolCall
    from reynd.runtime.history import complete_tool_cycles

    user = Message(role="user", content="q")
    call = Message(role="assistant", tool_calls=(ToolCall("a", "echo"), ToolCall("b", "echo")))
    res_a = Message(role="tool", tool_call_id="a", content="A")
    res_b = Message(role="tool", tool_call_id="b", content="B")
    old = Message(role="assistant", tool_calls=(ToolCall("z", "echo"),))  # cut by a rewind
    for tail in ([call], [call, res_a]):
        history = [old, user, *tail]
        assert complete_tool_cycles(history) == [user]
        assert complete_tool_cycles(history, keep_open_tail=True) == [user, *tail]
    # Complete cycles and a user message after an open call are unaffected.
    assert complete_tool_cycles([user, call, res_a, res_b], keep_open_tail=True) == [
        user,
        call,
        res_a,
        res_b,
    ]
    assert complete_tool_cycles([call, user], keep_open_tail=True) == [user]
