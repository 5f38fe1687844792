"""state.diff across substrates: per agent the conversation and the state, then the files.

The conversation reads as messages (- removed, + added); the state as paths people
read ("turn in flight 1 > step 2 > output > tokens in"), never JSON pointers; the
files as git shows them: a unified diff per text file, binary files named, or with
`stat` one line per file and a count of lines.
"""

from __future__ import annotations

from reynctl.render.formats import _compact, _plural, truncate
from reynctl.render.table import Style
from reynd.protocol import methods as m
from reynd.protocol.events import Message
from reynd.protocol.pointer import path_order

__all__ = ["diff_text", "human_path"]

_OPS = {"add": ("+", "green"), "remove": ("-", "red"), "change": ("~", "yellow")}
# A list's items by what they are, counted from 1 as people count.
_ITEMS = {
    "history": "message",
    "inbox": "inbox item",
    "pending_chains": "turn in flight",
    "steps": "step",
    "messages": "message",
    "tool_calls": "tool call",
}
# A map's entries by what they are, named by their key.
_ENTRIES = {
    "plans": "plan",
    "skill_runs": "skill run",
    "interventions": "question",
    "answers": "answer",
    "buffered_answers": "answer",
}


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def human_path(path: str) -> str:
    """A JSON pointer inside an agent's state, as words: `/pending_chains/0/steps/1/output/
    tokens_in` -> `turn in flight 1 > step 2 > output > tokens in`."""
    tokens = [_unescape(t) for t in path.split("/")[1:]]
    words: list[str] = []
    i = 0
    while i < len(tokens):
        token, following = tokens[i], tokens[i + 1] if i + 1 < len(tokens) else None
        if token in _ITEMS and following is not None and following.isdigit():
            words.append(f"{_ITEMS[token]} {int(following) + 1}")
            i += 2
        elif token in _ENTRIES and following is not None:
            words.append(f"{_ENTRIES[token]} {following}")
            i += 2
        else:
            words.append(token.replace("_", " "))
            i += 1
    return " > ".join(words) or "the whole agent"


def _message(msg: Message, style: Style, sign: str, color: str, width: int) -> str:
    text = msg.content
    if msg.tool_calls:
        calls = ", ".join(f"{c.name}({c.arguments})" for c in msg.tool_calls)
        text = f"{text} → {calls}" if text else f"→ {calls}"
    return f"    {style(sign, color)} {style(msg.role.ljust(9), 'cyan')}  {truncate(text, width)}"


def _conversation(conv: m.Conversation, style: Style, width: int) -> list[str]:
    head = f"  conversation (after message {conv.common}): " if conv.common else "  conversation: "
    counts = [f"{len(conv.removed)} removed"] if conv.removed else []
    counts += [f"{len(conv.added)} added"] if conv.added else []
    lines = [head + ", ".join(counts)]
    lines += [_message(msg, style, "-", "red", width) for msg in conv.removed]
    lines += [_message(msg, style, "+", "green", width) for msg in conv.added]
    return lines


def _state(changes: list[m.Change], style: Style, width: int) -> list[str]:
    named = [(human_path(c.path), c) for c in sorted(changes, key=lambda c: path_order(c.path))]
    path_w = max(len(name) for name, _ in named)
    lines = [f"  state: {_plural(len(named), 'change')}"]
    for name, c in named:
        sign, color = _OPS[c.op]
        if c.op == "add":
            value = _compact(c.after, width)
        elif c.op == "remove":
            value = _compact(c.before, width)
        else:
            value = f"{_compact(c.before, width // 2)} → {_compact(c.after, width // 2)}"
        lines.append(f"    {style(sign, color)} {name.ljust(path_w)}  {value}")
    return lines


def _counts(patch: str) -> tuple[int, int]:
    """Lines added and removed by a unified diff."""
    body = [ln for ln in patch.splitlines() if not ln.startswith(("+++", "---"))]
    return sum(ln.startswith("+") for ln in body), sum(ln.startswith("-") for ln in body)


def _files(files: list[m.FileChange], style: Style, stat: bool) -> list[str]:
    differ = "differs" if len(files) == 1 else "differ"
    lines = [style(f"files: {_plural(len(files), 'path')} {differ}", "bold")]
    path_w = max(len(f.path) for f in files)
    for f in files:
        sign, color = _OPS[f.op]
        kind = " (binary)" if f.binary else " (symlink)" if _link(f) else ""
        if stat:
            plus, minus = _counts(f.patch) if f.patch else (0, 0)
            bar = style("+" * min(plus, 40), "green") + style("-" * min(minus, 40), "red")
            size = "Bin" if f.binary else f"{plus + minus} {bar}{kind}"
            lines.append(f"  {style(sign, color)} {f.path.ljust(path_w)} | {size}")
            continue
        lines.append(f"  {style(sign, color)} {f.path}{kind}")
        for ln in (f.patch or "").splitlines():
            tint = "green" if ln.startswith("+") else "red" if ln.startswith("-") else ""
            lines.append("    " + (style(ln, tint) if tint else ln))
    return lines


def _link(f: m.FileChange) -> bool:
    return any(e is not None and e.kind == "l" for e in (f.before, f.after))


def diff_text(res: m.DiffResult, style: Style, width: int = 60, stat: bool = False) -> str:
    """state.diff: per agent its conversation and its state, then the workspace's files."""
    fork = "" if res.fork in (None, res.from_seq) else f" (branches fork at seq {res.fork})"
    head = style(f"seq {res.from_seq} → seq {res.to_seq}", "bold") + fork
    blocks: list[str] = []
    for name in sorted(res.agents.keys() | res.conversations.keys()):
        conv = res.conversations.get(name)
        # The conversation shows the messages: the state shows the rest.
        changes = [
            c
            for c in res.agents.get(name, [])
            if conv is None or not c.path.startswith("/history/")
        ]
        if conv is None and not changes:
            continue
        lines = [style(f"agent {name}", "bold")]
        lines += _conversation(conv, style, width) if conv else []
        lines += _state(changes, style, width) if changes else []
        blocks.append("\n".join(lines))
    if res.files:
        blocks.append("\n".join(_files(res.files, style, stat)))
    if not blocks:
        return f"{head}: no differences"
    return "\n".join([head, *blocks])
