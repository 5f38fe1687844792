"""The group commit on a real Store: real files, real fdatasync, both ways of syncing.

Kernel AIO (the default on Linux) and the worker thread (elsewhere, for large
batches and segment rotations, and after the kernel refuses) must give the
same log: every acknowledged append durable, seqs in queue order, a failed
sync fatal for every pending and later append.
"""

from __future__ import annotations

import errno
import platform
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import trio

from reynd.daemon.committer import LOOP_WRITE_MAX, Committer
from reynd.protocol import errors
from reynd.protocol import events as ev
from reynd.storage import crashpoints, fsops
from reynd.storage.kernel_aio import KernelSync
from reynd.storage.options import StorageOptions
from reynd.storage.store import Store

AIO_HERE = sys.platform.startswith("linux") and platform.machine() in ("x86_64", "aarch64")
PATHS = [pytest.param(True, id="kernel-aio"), pytest.param(False, id="thread")]


def _msg(i: int, text: str = "x") -> ev.MessageReceived:
    return ev.MessageReceived(agent="a", message_id=f"m{i}", text=text)


def _open(root: Path, segment_bytes: int = 64 * 1024 * 1024) -> Store:
    store = Store.open(
        root, StorageOptions(segment_bytes=segment_bytes, snapshot_min_bytes=1 << 40)
    )
    if store.head == 0:
        store.append([ev.AgentCreated(agent="a")])
    return store


def _message_ids(root: Path) -> list[str]:
    """The message ids in the log, read back by a fresh open (recovery's view)."""
    with Store.open(root) as store:
        return [
            e.message_id for e in store.wal.read(1, store.head) if isinstance(e, ev.MessageReceived)
        ]


async def _append_all(committer: Committer, writers: int, each: int, text: str = "x") -> list[int]:
    seqs: list[int] = []

    async def writer(w: int) -> None:
        for i in range(each):
            (done,) = await committer.append([_msg(w * each + i, text)])
            seqs.append(done.seq)

    async with trio.open_nursery() as nursery:
        for w in range(writers):
            nursery.start_soon(writer, w)
    return seqs


@pytest.mark.parametrize("kernel_aio", PATHS)
async def test_every_acknowledged_append_is_in_the_log(tmp_path: Path, kernel_aio: bool) -> None:
    store = _open(tmp_path)
    committer = Committer(store, lambda events: None, kernel_aio=kernel_aio)
    committer.start()
    seqs = await _append_all(committer, writers=16, each=20)
    await committer.stop()
    if kernel_aio and AIO_HERE:
        assert committer.sync_path == "kernel AIO"
    else:
        assert committer.sync_path.startswith("worker thread")
    assert sorted(seqs) == list(range(2, 2 + 16 * 20))
    assert committer.batches < 16 * 20  # appends waiting on one sync shared the next
    store.close()
    assert sorted(_message_ids(tmp_path)) == sorted(f"m{i}" for i in range(16 * 20))


@pytest.mark.parametrize("kernel_aio", PATHS)
async def test_large_batches_and_segment_rotation(tmp_path: Path, kernel_aio: bool) -> None:
    """Batches past LOOP_WRITE_MAX and ones that open a segment take the thread."""
    store = _open(tmp_path, segment_bytes=8192)
    committer = Committer(store, lambda events: None, kernel_aio=kernel_aio)
    committer.start()
    await _append_all(committer, writers=4, each=10, text="y" * 1000)  # rotates every ~8 records
    big = [_msg(1000 + i, "z" * 4096) for i in range(LOOP_WRITE_MAX // 4096 + 1)]
    await committer.append(big, atomic=True)
    await committer.stop()
    segments = len(store.wal.segments)
    store.close()
    assert segments > 4
    ids = _message_ids(tmp_path)
    assert len(ids) == 40 + len(big)
    assert ids[-len(big) :] == [f"m{1000 + i}" for i in range(len(big))]


@pytest.mark.parametrize("kernel_aio", PATHS)
async def test_a_failed_sync_fails_every_pending_and_later_append(
    tmp_path: Path, kernel_aio: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _open(tmp_path)
    monkeypatch.setattr(crashpoints, "_armed", crashpoints._parse("wal.sync:3:eio"))
    committer = Committer(store, lambda events: None, kernel_aio=kernel_aio)
    committer.start()
    acked: list[str] = []
    failed: list[errors.ReyndError] = []

    async def writer(w: int) -> None:
        for i in range(10):
            try:
                await committer.append([_msg(w * 10 + i)])
            except errors.StorageFailed as exc:
                failed.append(exc)
                return
            acked.append(f"m{w * 10 + i}")

    async with trio.open_nursery() as nursery:
        for w in range(4):
            nursery.start_soon(writer, w)
    assert committer.failed.is_set()
    assert isinstance(committer.failure, OSError) and committer.failure.errno == errno.EIO
    assert len(failed) == 4  # every writer learnt it; none was left waiting
    with pytest.raises(errors.StorageFailed):
        await committer.append([_msg(99)])
    await committer.stop()
    store.close()
    # What was acknowledged is in the log (the failed batch may be too: unknown).
    assert acked  # two syncs went through
    assert set(acked) <= set(_message_ids(tmp_path))


@pytest.mark.parametrize("kernel_aio", PATHS)
async def test_stop_writes_what_is_queued_and_refuses_the_rest(
    tmp_path: Path, kernel_aio: bool
) -> None:
    store = _open(tmp_path)
    committer = Committer(store, lambda events: None, kernel_aio=kernel_aio)
    committer.start()
    results: list[object] = []

    async def one(i: int) -> None:
        try:
            results.append((await committer.append([_msg(i)]))[0].seq)
        except errors.ShuttingDown as exc:
            results.append(exc)

    async with trio.open_nursery() as nursery:
        for i in range(8):
            nursery.start_soon(one, i)
        await trio.testing.wait_all_tasks_blocked()  # all 8 queued, one batch syncing
        await committer.stop()
        nursery.start_soon(one, 8)
    assert sorted(r for r in results if isinstance(r, int)) == list(range(2, 10))
    assert [type(r) for r in results if not isinstance(r, int)] == [errors.ShuttingDown]
    store.close()
    assert len(_message_ids(tmp_path)) == 8


@pytest.mark.skipif(not AIO_HERE, reason="kernel AIO is used on Linux x86_64/aarch64 only")
async def test_a_refused_kernel_sync_falls_back_to_the_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(self: KernelSync, fd: int) -> None:
        raise OSError(errno.EAGAIN, "io_submit: Resource temporarily unavailable")

    monkeypatch.setattr(KernelSync, "submit", refuse)
    store = _open(tmp_path)
    committer = Committer(store, lambda events: None)
    committer.start()
    assert committer.sync_path == "kernel AIO"
    synced: list[int] = []
    real_fdatasync = fsops.fdatasync

    def watched_fdatasync(fd: int) -> None:  # the real call, watched
        real_fdatasync(fd)
        synced.append(fd)

    monkeypatch.setattr(fsops, "fdatasync", watched_fdatasync)
    await _append_all(committer, writers=2, each=5)
    assert committer.sync_path.startswith("worker thread (AIO refused")
    fd = store.wal.start_sync()
    assert synced and set(synced) == {fd} and len(synced) == committer.batches
    await committer.stop()
    store.close()
    assert len(_message_ids(tmp_path)) == 10


@pytest.mark.skipif(not AIO_HERE, reason="kernel AIO is used on Linux x86_64/aarch64 only")
def test_kernel_sync_of_a_file_and_refusal_of_a_pipe(tmp_path: Path) -> None:
    import os
    import select

    aio, why = KernelSync.open()
    assert aio is not None, why
    try:
        fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(fd, b"data")
        aio.submit(fd)
        assert select.select([aio.eventfd], [], [], 10)[0] == [aio.eventfd]
        assert aio.reap() is None
        os.close(fd)
        r, w = os.pipe()
        with pytest.raises(OSError) as refused:
            aio.submit(w)  # a pipe cannot be synced: refused at submission
        assert refused.value.errno == errno.EINVAL
        os.close(r)
        os.close(w)
    finally:
        aio.close()


@pytest.mark.skipif(not AIO_HERE, reason="kernel AIO is used on Linux x86_64/aarch64 only")
async def test_each_batch_is_committed_after_its_kernel_sync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kernel calls are the real ones, watched: submit(segment) -> reap ok -> commit."""
    trace: list[tuple[str, object]] = []
    submit, reap = KernelSync.submit, KernelSync.reap

    def watched_submit(self: KernelSync, fd: int) -> None:
        submit(self, fd)
        trace.append(("submit", fd))

    def watched_reap(self: KernelSync) -> OSError | None:
        error = reap(self)
        trace.append(("reaped", error))
        return error

    monkeypatch.setattr(KernelSync, "submit", watched_submit)
    monkeypatch.setattr(KernelSync, "reap", watched_reap)
    store = _open(tmp_path)
    committed: list[int] = []

    def on_commit(events: Sequence[ev.Event]) -> None:
        committed.append(len(events))
        trace.append(("commit", committed[-1]))

    committer = Committer(store, on_commit)
    committer.start()
    await _append_all(committer, writers=8, each=10)
    await committer.stop()
    fd = store.wal.start_sync()
    store.close()
    assert committer.batches == len(committed) and sum(committed) == 80
    assert trace == [
        step for n in committed for step in (("submit", fd), ("reaped", None), ("commit", n))
    ]


@pytest.mark.parametrize("kernel_aio", PATHS)
async def test_a_cancelled_appender_still_gets_its_answer(tmp_path: Path, kernel_aio: bool) -> None:
    """Once queued, an append runs to its end even if its caller is cancelled (the first
    appender writes the batch: it must not abandon the others queued behind it)."""
    store = _open(tmp_path)
    committer = Committer(store, lambda events: None, kernel_aio=kernel_aio)
    committer.start()
    answered: list[int] = []

    async def cancelled_appender() -> None:
        with trio.CancelScope() as scope:
            scope.cancel()
            (done,) = await committer.append([_msg(100)])  # nothing in flight: it leads
            answered.append(done.seq)
            await trio.lowlevel.checkpoint()  # where the cancellation lands
            answered.append(-1)  # never reached
        assert scope.cancelled_caught

    async with trio.open_nursery() as nursery:
        nursery.start_soon(cancelled_appender)
        seqs = await _append_all(committer, writers=3, each=4)
    await committer.stop()
    assert len(answered) == 1
    assert sorted([*answered, *seqs]) == list(range(2, 2 + 13))
    store.close()
    assert sorted(_message_ids(tmp_path)) == sorted([*(f"m{i}" for i in range(12)), "m100"])


@pytest.mark.parametrize("kernel_aio", PATHS)
async def test_a_failed_commit_fails_the_batch_instead_of_leaving_it_waiting(
    tmp_path: Path, kernel_aio: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Durable but not applied (a bug in indexing or the reducer): stop, recovery applies it."""
    store = _open(tmp_path)
    real_commit = store.commit
    calls = 0

    def commit_failing_at_the_third(*args: Any) -> None:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise RuntimeError("reducer bug")
        real_commit(*args)

    monkeypatch.setattr(store, "commit", commit_failing_at_the_third)
    committer = Committer(store, lambda events: None, kernel_aio=kernel_aio)
    committer.start()
    outcomes: list[str] = []

    async def writer(w: int) -> None:
        for i in range(5):
            try:
                await committer.append([_msg(w * 5 + i)])
            except errors.StorageFailed:
                outcomes.append("failed")
                return
            outcomes.append("ok")

    async with trio.open_nursery() as nursery:  # returns: nobody is left waiting
        for w in range(4):
            nursery.start_soon(writer, w)
    await committer.stop()
    assert committer.failed.is_set() and isinstance(committer.failure, RuntimeError)
    assert outcomes.count("failed") == 4
    store.close()
    assert len(_message_ids(tmp_path)) >= outcomes.count("ok")  # all durable ones reopen
