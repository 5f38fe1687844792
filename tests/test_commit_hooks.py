"""What a commit sets off runs hook by hook: a raising one costs neither the others nor the append.

A real Store in a temporary directory and the real group commit: the
committer calls its on_commit once the batch is durable, so its appenders
must get their seqs whatever a hook does (docs/durability.md rule 1).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import structlog
import trio

from reynd.daemon.commit_hooks import Hooks
from reynd.daemon.committer import Committer
from reynd.protocol import events as ev
from reynd.storage.options import StorageOptions
from reynd.storage.store import Store


def _open(root: Path) -> Store:
    return Store.open(root, StorageOptions(snapshot_min_bytes=1 << 40))


async def test_a_raising_commit_hook_neither_skips_the_others_nor_fails_the_append(
    tmp_path: Path,
) -> None:
    ran: list[tuple[str, list[int]]] = []

    def seen(name: str) -> Callable[[Sequence[ev.Event]], None]:
        return lambda events: ran.append((name, [e.seq for e in events]))

    def broken(events: Sequence[ev.Event]) -> None:
        raise RuntimeError("a hook's bug")

    hooks = Hooks[Sequence[ev.Event]]("commit")
    hooks.add("before", seen("before"))
    hooks.add("broken", broken)
    hooks.add("after", seen("after"))
    store = _open(tmp_path)
    committer = Committer(store, hooks)
    committer.start()
    with structlog.testing.capture_logs() as logs:
        durable = await committer.append([ev.AgentCreated(agent="a")])
        # Appenders that shared a batch all get their seqs too.
        async with trio.open_nursery() as nursery:
            for i in range(4):
                nursery.start_soon(
                    committer.append, [ev.MessageReceived(agent="a", message_id=f"m{i}", text="x")]
                )
    await committer.stop()
    assert [e.seq for e in durable] == [1]
    assert committer.failure is None
    assert ran[:2] == [("before", [1]), ("after", [1])]
    assert sorted(s for name, seqs in ran if name == "after" for s in seqs) == [1, 2, 3, 4, 5]
    assert [name for name, _ in ran] == ["before", "after"] * (len(ran) // 2)
    failed = [e for e in logs if e["event"] == "hook.failed"]
    assert len(failed) == len(ran) // 2  # once per batch
    assert all(e["hook"] == "broken" and e["on"] == "commit" for e in failed)
    assert all(e["log_level"] == "error" and e["exc_info"] is True for e in failed)
    store.close()
    with _open(tmp_path) as again:  # recovery's view: every acknowledged record is there
        assert again.head == 5


def test_hooks_run_in_the_order_added() -> None:
    order: list[str] = []
    hooks = Hooks[int]("reset")

    def hook(name: str) -> Callable[[int], None]:
        return lambda n: order.append(f"{name}:{n}")

    for name in ("audit", "registry", "publish"):
        hooks.add(name, hook(name))
    hooks(7)
    assert hooks.names == ["audit", "registry", "publish"]
    assert order == ["audit:7", "registry:7", "publish:7"]
