"""KeyedLock (wal.append's per-agent lock): exclusion per key, in turn, nothing left behind."""

from __future__ import annotations

import trio
import trio.testing

from reynd.daemon.keyed_lock import KeyedLock


async def test_one_holder_per_key_served_in_the_order_they_came() -> None:
    locks = KeyedLock()
    order: list[str] = []
    inside: set[str] = set()

    async def hold(key: str, name: str) -> None:
        await locks.acquire(key)
        try:
            assert key not in inside, f"{name} entered {key} while it was held"
            inside.add(key)
            order.append(name)
            await trio.sleep(0.01)
            inside.discard(key)
        finally:
            locks.release(key)

    async with trio.open_nursery() as nursery:
        for i in range(4):
            nursery.start_soon(hold, "a", f"a{i}")
            await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(hold, "b", "b0")  # another key does not wait behind "a"
        await trio.testing.wait_all_tasks_blocked()
        assert order == ["a0", "b0"]
    assert order == ["a0", "b0", "a1", "a2", "a3"]
    assert "a" not in locks and "b" not in locks  # a free key keeps no entry


async def test_a_free_key_is_taken_without_a_scheduler_pass() -> None:
    locks = KeyedLock()
    other_ran = False

    async def other() -> None:
        nonlocal other_ran
        other_ran = True

    async with trio.open_nursery() as nursery:
        nursery.start_soon(other)
        await locks.acquire("a")
        assert not other_ran  # no checkpoint was taken
        locks.release("a")


async def test_a_cancelled_waiter_leaves_the_queue_holding_nothing() -> None:
    locks = KeyedLock()
    await locks.acquire("a")
    with trio.move_on_after(0.01) as scope:
        await locks.acquire("a")
    assert scope.cancelled_caught
    locks.release("a")  # nobody left waiting: the key is free again
    assert "a" not in locks
    with trio.CancelScope() as cancelled:
        cancelled.cancel()
        await locks.acquire("a")  # a cancelled caller stops even when the key is free
    assert "a" not in locks
