"""daemon.status."""

from __future__ import annotations

from reynctl.render.agents import ambiguous_block
from reynctl.render.formats import format_bytes, format_duration
from reynctl.render.table import Style, _pairs
from reynd.protocol import methods as m

__all__ = ["follow_line", "replication_line", "restore_block", "status_text"]


def status_text(st: m.StatusResult, style: Style) -> str:
    """daemon.status as aligned `key  value` lines."""
    rows: list[tuple[str, str]] = [
        ("daemon", f"reynd {st.version}, pid {st.pid}, protocol {st.protocol}"),
        ("head", f"seq {st.head} on branch {st.branch}"),
    ]
    if st.floor > 1:  # the lowest seq still in the WAL; 1 means nothing was collected
        rows.append(("history", f"from seq {st.floor} (older seqs were collected)"))
    rows += [
        ("agents", str(st.agents)),
        ("generations", str(st.generations)),
        ("connections", str(st.connections)),
        ("uptime", format_duration(st.uptime_s)),
    ]
    if st.state_dir:
        rows.append(("state dir", st.state_dir))
    if st.socket:
        rows.append(("socket", st.socket))
    if st.log:
        rows.append(("log", st.log))
    if st.replication is not None:
        rows.append(("replication", replication_line(st.replication)))
    if st.follow is not None:
        rows.append(("follows", follow_line(st.follow)))
    if st.workspace is not None:
        rows.append(("workspace", f"{st.workspace.root} (rewound with the runtime)"))
    text = _pairs(rows, style)
    if st.workspace is not None and st.workspace.restore_pending is not None:
        text += "\n\n" + restore_block(st.workspace.restore_pending, style)
    if st.ambiguous:
        text += "\n\n" + ambiguous_block(st.ambiguous, style)
    return text


SHOWN_PATHS = 8


def restore_block(p: m.RestorePending, style: Style) -> str:
    """A workspace restore left unfinished: what it could not restore, and what to do."""
    head = style(
        f"! workspace restore pending: the reset {p.reset_seq} to seq {p.target} stands, "
        f"{p.count} path(s) not restored",
        "red",
        "bold",
    )
    lines = [f"  {path}: {p.reasons.get(path, '')}" for path in p.paths[:SHOWN_PATHS]]
    if p.count > SHOWN_PATHS:
        lines.append(f"  ... and {p.count - SHOWN_PATHS} more (daemon.status, the daemon log)")
    lines.append(
        "  fix these (chattr -i, free space, move what is in the way), then restart the "
        "daemon: the start finishes the restore"
    )
    return "\n".join([head, *lines])


def replication_line(r: m.ReplicationInfo) -> str:
    """Where the WAL goes and how far behind it is, in one line."""
    where = f"{r.url} (generation {r.generation})" if r.generation else r.url
    if r.state == "shipping" and not r.backlog_records:
        return f"{where}: up to date, seq {r.shipped} shipped"
    behind = f"{r.backlog_records} records ({format_bytes(r.backlog_bytes)}) not shipped yet"
    if r.state == "shipping":
        return f"{where}: shipping, {behind}"
    return f"{where}: {r.state}, {behind}; {r.last_error}"


def follow_line(f: m.FollowInfo) -> str:
    """A read-only replica's source and lag, in one line."""
    line = f"{f.url} (read-only): {f.state}, {f.lag_records} records behind"
    return f"{line}; {f.last_error}" if f.last_error else line
