"""A scripted program for the `command` executor (stdlib only: run as a script).

The message text is the script: word i says what act-step i does.

    call     an assistant message with one tool call, id `<turn_id>.call`
    result   the tool result for `<turn_id>.call`
    msg      a plain assistant message
    write    write `step<step>.txt` (`<turn_id> step <step>`) in the current directory
    rm       delete `step<step - 1>.txt` from the current directory
    sleep    write this process's pid to `$PROG_DIR/<turn_id>.s<step>.pid`, then sleep 60 s
    (none)   past the last word: the final reply (done)

Every request is appended as one JSON line to `$PROG_DIR/requests.jsonl`. A
history with half a tool cycle in it (a call not answered right after, or a
result without its call) makes the program exit 3 naming it: the step fails.
The one exception is the open cycle of the turn in flight at the very end (its
previous step made the calls that this step answers).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any


def half_cycle(history: list[dict[str, Any]], open_tail: str | None = None) -> str | None:
    """What is wrong with `history`'s tool cycles, or None (provider rules).

    With `open_tail` (a turn id), an unanswered cycle at the very end is allowed
    when its calls are that turn's own: the step in flight must answer them.
    """
    i = 0
    while i < len(history):
        m = history[i]
        if m.get("role") == "tool":
            return f"result {m.get('tool_call_id')!r} at {i} has no call right before it"
        i += 1
        calls = {c["id"] for c in m.get("tool_calls") or ()}
        while i < len(history) and history[i].get("role") == "tool":
            tid = history[i].get("tool_call_id")
            if tid not in calls:
                return f"result {tid!r} at {i} answers no call of the message before it"
            calls.discard(tid)
            i += 1
        own = open_tail is not None and all(c.startswith(f"{open_tail}.") for c in calls)
        if calls and not (i == len(history) and own):
            return f"calls {sorted(calls)} at {i} are not answered"
    return None


def main() -> int:
    request = json.loads(sys.stdin.buffer.read())
    out_dir = os.environ["PROG_DIR"]
    with open(os.path.join(out_dir, "requests.jsonl"), "a") as log:
        log.write(json.dumps(request) + "\n")
    problem = half_cycle(request.get("history", []), open_tail=request["turn_id"])
    if problem:
        print(f"half a tool cycle: {problem}", file=sys.stderr)
        return 3
    turn, step = request["turn_id"], request["step"]
    words = request["text"].split()
    word = words[step] if step < len(words) else "done"
    call_id = f"{turn}.call"
    result: dict[str, Any]
    if word == "call":
        call = {"id": call_id, "name": "lookup", "arguments": "{}"}
        result = {"messages": [{"role": "assistant", "tool_calls": [call]}]}
    elif word == "result":
        result = {"messages": [{"role": "tool", "tool_call_id": call_id, "content": "42"}]}
    elif word == "sleep":
        path = os.path.join(out_dir, f"{turn}.s{step}.pid")
        with open(path + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.rename(path + ".tmp", path)
        time.sleep(60)
        result = {"messages": [{"role": "assistant", "content": "woke up"}]}
    elif word in ("write", "rm"):
        if word == "write":
            with open(f"step{step}.txt", "w") as f:
                f.write(f"{turn} step {step}\n")
        else:
            os.unlink(f"step{step - 1}.txt")
        result = {"messages": [{"role": "assistant", "content": f"{word} at step {step}"}]}
    elif word == "msg":
        result = {"messages": [{"role": "assistant", "content": f"step {step}"}]}
    else:
        reply = f"program done after {step} steps"
        result = {
            "messages": [{"role": "assistant", "content": reply}],
            "done": True,
            "reply": reply,
        }
    sys.stdout.write(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
