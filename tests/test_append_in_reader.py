"""wal.append runs in its connection's reader when it is that connection's only call.

(quick.BRIEF_CALLS.) Alone, an append is answered as any other call is; in
a pipelined burst on one connection, each line still starts in the order it
came (the burst goes to request tasks, and the group commit keeps queue
order), and every reply comes once its record is durable.
"""

from __future__ import annotations

import json

from tests.harness import Daemon


def _line(id: int, method: str, params: dict[str, object] | None = None) -> bytes:
    request: dict[str, object] = {"jsonrpc": "2.0", "method": method, "id": id}
    if params is not None:
        request["params"] = params
    return json.dumps(request).encode() + b"\n"


def test_alone_and_pipelined_appends_are_answered_in_the_order_they_came(daemon: Daemon) -> None:
    with daemon.connect() as c:
        first = c.call("wal.append", {"agent": "p0", "kind": "agent.created"})  # alone
        burst = [
            _line(i, "wal.append", {"agent": f"p{i}", "kind": "agent.created"}) for i in range(1, 9)
        ]
        burst.append(_line(9, "daemon.status"))
        c.send(b"".join(burst))
        replies = {r["id"]: r for r in (c.recv_json() for _ in range(9))}
        seqs = [replies[i]["result"]["seq"] for i in range(1, 9)]
        assert seqs == list(range(first["seq"] + 1, first["seq"] + 9))
        assert replies[9]["result"]["head"] >= first["seq"]
        # Alone again once the burst is answered: in the reader, after it.
        last = c.call(
            "wal.append",
            {"agent": "p0", "kind": "message.received", "data": {"message_id": "m", "text": "hi"}},
        )
        assert last["seq"] == seqs[-1] + 1
    assert "p8" in daemon.call("state.get", {"agent": "p8"})["agents"]
