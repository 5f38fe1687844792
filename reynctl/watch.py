"""`reynctl watch`: the current state, then live notifications, resynced on gaps.

Order matters: subscribe first, then read the state as of the head the
subscription reports, so no change can fall between the two. Each `records`
notification must follow the last seq seen; a gap (or a `lagged` notice, after
which the daemon has dropped the subscription) triggers a resync: a fresh state
and, after `lagged`, a fresh subscription.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Literal

import click

from reynctl import render
from reynctl.client import Client
from reynctl.errors import ConnectionClosed
from reynctl.jsonrpc import decode_notification
from reynd.protocol import methods as m

if TYPE_CHECKING:
    from reynctl.cli.options import Options

__all__ = ["Gap", "Watcher", "check_order"]

Reason = Literal["initial", "gap", "lagged"]


class Gap(Exception):
    """A `records` notification did not follow the last seq seen."""


def check_order(last: int, n: m.Notification) -> bool:
    """Whether `n` is new (True) or already covered by the state at `last` (False).

    Raises Gap when a `records` notification skips a seq. Other topics share
    the seq of the record that caused them, so they are only dropped when older.
    """
    if n.topic != "records":
        return n.seq >= last
    if n.seq <= last:
        return False
    if n.seq != last + 1:
        raise Gap(f"expected seq {last + 1}, got {n.seq}")
    return True


class Watcher:
    """One `watch` session; `run` returns only when the daemon goes away."""

    def __init__(
        self, opts: Options, topics: list[m.Topic] | None, *, initial: bool = True
    ) -> None:
        self.opts = opts
        self.initial = initial  # print the state first (`watch --no-initial`: False)
        self.topics = topics
        self.style = opts.style
        self.last = 0
        self.client: Client | None = None

    def run(self) -> None:
        """Stream until interrupted; ConnectionClosed propagates when the daemon stops."""
        self.client = self.opts.client()
        # No per-call timeout while waiting for changes: silence is normal here.
        try:
            self.client.check_protocol()
            self._resync("initial", subscribe=True)
            if not self.opts.json:
                self.opts.note("watching for changes (Ctrl-C to stop)")
            self._loop()
        finally:
            self.client.close()

    def _loop(self) -> None:
        assert self.client is not None
        while True:
            for msg in self.client.notifications():
                if msg.method == "lagged":
                    self._resync("lagged", subscribe=True)
                    break
                if msg.method != "notify":
                    continue
                n = decode_notification(msg)
                try:
                    new = check_order(self.last, n)
                except Gap:
                    self._resync("gap", subscribe=False)
                    continue
                if new:
                    if n.topic == "records":
                        self.last = n.seq
                    self._emit_notification(n)

    def _resync(self, reason: Reason, *, subscribe: bool) -> None:
        assert self.client is not None
        at: int | None = None
        if subscribe:
            try:
                sub = self.client.subscribe(self.topics)
            except ConnectionClosed:
                if reason != "lagged":
                    raise
                # The daemon may hang up on a lagging subscriber: connect again.
                self.client.close()
                self.client = self.opts.client()
                sub = self.client.subscribe(self.topics)
            at = sub.head
        if reason == "initial" and not self.initial and at is not None:
            self.last = at  # the changes follow the subscription's head: nothing to print
            return
        reply = self.client.call("state.get", m.StateParams(seq=at), m.StateResult)
        self.last = reply.value.seq
        self._emit_state(reason, reply.raw, reply.value)

    def _emit_state(self, reason: Reason, raw: bytes, state: m.StateResult) -> None:
        if self.opts.json:
            line = b'{"type":"state","reason":"%s","state":%s}' % (reason.encode(), raw)
            click.echo(line.decode())
            return
        if reason != "initial":
            self.opts.note(f"resync after a {reason}: reading the state again")
        click.echo(render.state_text(state, self.style), color=self.style.color)
        click.echo("")

    def _emit_notification(self, n: m.Notification) -> None:
        if self.opts.json:
            obj: dict[str, Any] = {
                "type": "notify",
                "topic": n.topic,
                "seq": n.seq,
                "subscription": n.subscription,
                "data": n.data,
            }
            click.echo(json.dumps(obj, ensure_ascii=False, separators=(",", ":")))
        else:
            click.echo(render.notification_line(n, self.style), color=self.style.color)
