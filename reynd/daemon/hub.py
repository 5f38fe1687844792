"""Subscriptions: fan-out of the daemon's events to connected clients.

`Hub.publish` is called synchronously (by the publisher's commit and reset
hooks on the committer's leader, and by the agent registry) and
must never block or fail: it only puts into each matching subscriber's bounded
queue with `send_nowait`. A subscriber whose queue is full is dropped on the
spot and its pump sends a final `lagged` notice after what was queued, so a
slow or stuck client costs at most one bounded queue and never delays the
daemon or anyone else.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import msgspec
import trio

from reynd.protocol.limits import SUBSCRIBER_QUEUE
from reynd.protocol.methods import Lagged

__all__ = ["Hub", "Subscription"]

_ENCODER = msgspec.json.Encoder()

# One queued event: topic, seq, data already encoded (shared by all subscribers).
_Event = tuple[str, int, msgspec.Raw]


class _NotifyParams(msgspec.Struct):
    subscription: str
    topic: str
    seq: int
    data: msgspec.Raw


class _Notify(msgspec.Struct):
    """Wire shape of `notify`: params follow methods.Notification field for field."""

    jsonrpc: str
    method: str
    params: _NotifyParams


class _Lagged(msgspec.Struct):
    jsonrpc: str
    method: str
    params: Lagged


class Subscription:
    """One subscriber: its topics, its bounded queue and what it has been sent."""

    __slots__ = ("_receive", "_send", "connection_id", "id", "lagged", "last_seq", "topics")

    def __init__(self, id: str, connection_id: int, topics: frozenset[str], size: int) -> None:
        self.id = id
        self.connection_id = connection_id
        self.topics = topics
        # Last seq queued for this subscriber: what `lagged` reports.
        self.last_seq: int | None = None
        self.lagged = False
        self._send, self._receive = trio.open_memory_channel[_Event](size)

    def offer(self, event: _Event) -> bool:
        """Queue without waiting; False when the queue is full (the subscriber lags)."""
        try:
            self._send.send_nowait(event)
        except trio.WouldBlock:
            return False
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            return True  # already closed: the pump is finishing
        self.last_seq = event[1]
        return True

    def close(self) -> None:
        """End the stream: the pump writes what is queued, then stops."""
        self._send.close()

    async def pump(self, write: Callable[[bytes], Awaitable[None]]) -> None:
        """Write queued events as `notify` lines, then a `lagged` line if dropped.

        Runs in the subscriber's connection; `write` serializes with the
        connection's responses.
        """
        async with self._receive:
            async for topic, seq, data in self._receive:
                params = _NotifyParams(self.id, topic, seq, data)
                await write(_ENCODER.encode(_Notify("2.0", "notify", params)))
        if self.lagged:
            lag = Lagged(subscription=self.id, dropped_after_seq=self.last_seq)
            await write(_ENCODER.encode(_Lagged("2.0", "lagged", lag)))


class Hub:
    """Routes published events to subscriptions; all methods are synchronous.

    Subscriptions are indexed by topic: an event costs what its own
    subscribers cost, however many subscribe to other topics.
    """

    def __init__(self, queue_size: int = SUBSCRIBER_QUEUE) -> None:
        if queue_size < 1:
            raise ValueError("queue_size must be at least 1")
        self.queue_size = queue_size
        self._subs: dict[str, Subscription] = {}
        self._by_topic: dict[str, dict[str, Subscription]] = {}
        self._ids = itertools.count(1)

    def __len__(self) -> int:
        return len(self._subs)

    def subscribe(self, connection_id: int, topics: Iterable[str]) -> Subscription:
        """Register a subscription; the caller must run its `pump`."""
        sub = Subscription(f"s{next(self._ids)}", connection_id, frozenset(topics), self.queue_size)
        self._subs[sub.id] = sub
        for topic in sub.topics:
            self._by_topic.setdefault(topic, {})[sub.id] = sub
        return sub

    def unsubscribe(self, subscription: str) -> Subscription | None:
        """Remove and close a subscription; None if it does not exist (any more)."""
        sub = self._subs.pop(subscription, None)
        if sub is not None:
            for topic in sub.topics:
                subs = self._by_topic[topic]
                del subs[sub.id]
                if not subs:
                    del self._by_topic[topic]
            sub.close()
        return sub

    def listens(self, topic: str) -> bool:
        """Someone is subscribed to `topic` (else publishing to it does nothing)."""
        return bool(self._by_topic.get(topic))

    def publish(self, topic: str, seq: int, data: dict[str, Any]) -> None:
        """Announce an event; never blocks. Subscribers that cannot keep up are dropped."""
        subs = self._by_topic.get(topic)
        if not subs:
            return
        raw = msgspec.Raw(_ENCODER.encode(data))  # once for every subscriber
        lagging: list[Subscription] = []
        for sub in subs.values():
            if not sub.offer((topic, seq, raw)):
                lagging.append(sub)
        for sub in lagging:
            sub.lagged = True
            self.unsubscribe(sub.id)
