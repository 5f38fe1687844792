"""Workspace rewind at a reset (rewind, checkout, act-turn rewind): the Substrate hooks.

`files` is the seq whose tree the files take: the reset's target, or (issue
25's scope) None, the files stay (they are recorded as the reset record's
tree), or with a reset record to the tip itself, the seq a workspace-only
restore names (its files recorded by a `workspace.files` record right after
the reset record, cause "restore").

- `before_reset(target, force, files)`: the workspace is scanned and compared with
  the tree as of the tip; changes reynd did not record refuse the reset
  (WorkspaceDirty) unless `force`. Then the preflight proves the restore
  can finish (names, directories, inode flags, special files, space):
  what cannot be restored refuses the reset (WorkspaceUnrestorable), and
  nothing is written. The steps in flight still run.
- `reset_records(target, files)`: they are cancelled now: what the workspace holds
  that is not recorded (what the scan found, what the watcher saw since) is
  stored and becomes a `workspace.files` record just before the reset
  record (so `checkout <reset - 1>` brings it back); the restore journal is
  written.
- `after_reset(target, reset_seq)`: restore tree(files), file by file;
  index it as the tree of `files`; remove the journal. A path that
  fails does not stop the others; with any failed, the journal stays, the
  restore is reported pending (`unfinished`, daemon.status) and the reset
  answers WorkspaceUnrestorable (stage "restore"): it stands.
"""

from __future__ import annotations

import time
from typing import Any

import msgspec
import trio

from reynd.protocol import errors
from reynd.protocol.events import Event
from reynd.storage import crashpoints
from reynd.workspace import journal
from reynd.workspace.core import (
    Pending,
    Prepared,
    WorkspaceCore,
    file_records,
    log,
    owed,
    unrecorded,
)
from reynd.workspace.model import Dir, Tree, apply, changed, flat
from reynd.workspace.preflight import preflight
from reynd.workspace.refusals import refusing
from reynd.workspace.restore import Restored, restore_tree
from reynd.workspace.tree import Scan, changed_paths, scan, store_dir

__all__ = ["SHOWN_PATHS", "Resets"]

SHOWN_PATHS = 8  # dirty paths named in the error message (all of them are in data.paths)


class Resets(WorkspaceCore):
    # The file system's refusals (unreadable, full, the root not a directory) come
    # back as errors a client can act on: each of these runs before anything is written.

    async def before_reset(self, target: int, force: bool, files: int | None) -> None:
        with refusing():
            await self._before_reset(target, force, files)

    async def restoring(self, target: int) -> tuple[list[str], list[str]]:
        """For a dry run (issue 25): the paths a restore to `target` would write or
        remove, as recorded, and the changes reynd did not record that refuse it
        without force, as before_reset's scan finds them. Nothing is stored or
        changed."""
        with refusing():
            return await self._restoring(target)

    async def reset_records(
        self, target: int, files: int | None
    ) -> tuple[list[Event], list[Event]]:
        """Record what the workspace holds that is not recorded; journal the restore.

        Returns the records before the reset record, and after it: for a
        workspace-only restore (`files` not `target`, the reset record
        targeting the tip), the change from the tip's tree to the tree as of
        `files`, so that the tree as of the record after the reset is exact.
        """
        with refusing():
            return await self._reset_records(target, files)

    async def _before_reset(self, target: int, force: bool, files: int | None) -> None:
        await self._settled.wait()
        async with self._lock:
            self._planned = None
            if files is None:
                return  # only the runtime moves: the files stay (recorded as the reset's tree)
            plan = self.history.plan(files)
            if plan is None and files != target:
                raise errors.NothingToDo(
                    f"no workspace tree was recorded as of seq {files} (workspace rewind was "
                    "off then), so there are no files to restore: pick a later seq",
                    {"seq": files},
                )
            if plan is None:
                return  # no tree as of target (rewind was off): the files stay as they are
            now = await trio.to_thread.run_sync(self._scan)
            self._dirty.paths.update(changed_paths(flat(self._model), now.tree))  # for _seal
            dirty = unrecorded(flat(self._model), now.tree, self._stuck)
            head = self._store.head
            if dirty and not force:
                raise errors.WorkspaceDirty(
                    _dirty_message(dirty, head, files, workspace_only=files != target),
                    {"paths": dirty, "workspace": str(self.root), "head": head, "target": target},
                )
            try:
                goal = await trio.to_thread.run_sync(self.history.execute, plan)
            except (ValueError, msgspec.DecodeError) as exc:  # a damaged manifest
                problems = [(".", f"the stored tree as of seq {files} is damaged: {exc}")]
            else:
                problems = await trio.to_thread.run_sync(
                    preflight, self.root, self._ignore, now, flat(goal), self.blobs
                )
            if problems:
                log.warning("workspace.unrestorable", target=target, paths=len(problems))
                raise errors.WorkspaceUnrestorable(
                    _unrestorable_message(problems, files, None),
                    {**_problem_data(problems), "stage": "preflight", "target": files},
                )
            self._planned = (files, goal)
            self._leftovers = now.leftovers  # tmp files a crash left: the restore removes them
            if dirty:
                log.warning("workspace.forced", paths=len(dirty), kept_as_record_after=head)

    async def _restoring(self, target: int) -> tuple[list[str], list[str]]:
        await self._settled.wait()
        async with self._lock:
            plan = self.history.plan(target)
            if plan is None:
                return [], []  # no tree as of target (rewind was off): the files stay
            goal = await trio.to_thread.run_sync(self.history.execute, plan)
            await trio.to_thread.run_sync(self._check_root)
            model, cache, stuck = flat(self._model), dict(self._cache), dict(self._stuck)
        # Outside the lock (steps commit meanwhile), on a copy of the hash cache: what it
        # finds is advice, as of now; the move itself scans again under the lock.
        now = await trio.to_thread.run_sync(scan, self.root, self._ignore, cache)
        return sorted(changed(model, flat(goal))), unrecorded(model, now.tree, stuck)

    async def _reset_records(
        self, target: int, files: int | None
    ) -> tuple[list[Event], list[Event]]:
        async with self._lock:
            plan = self.history.plan(files) if files is not None else None
            tip = self._model  # the tree as of the tip: what the reset record's lineage holds
            prepared = await trio.to_thread.run_sync(self._seal)
            planned, self._planned = self._planned, None
            if planned is not None and planned[0] == files:
                goal: Dir | None = planned[1]  # the preflight's: the tree as of `files`
            else:
                goal = await trio.to_thread.run_sync(self.history.execute, plan) if plan else None
            intent = journal.Intent(target=target, head=self._store.head, goal=None, tip=None)
            if files != target:
                intent.files = files
            await trio.to_thread.run_sync(self._write_intent, intent, goal, prepared.model)
            self._adopt(prepared, ())
            self._pending = (intent, goal)
            after: list[Event] = []
            if goal is not None and files != target:
                after.extend(file_records(changed(flat(tip), flat(goal)), "restore"))
            return list(file_records(prepared.changes, "reset")), after

    def _seal(self) -> Prepared:
        """Everything that differs from the model, stored (worker thread, locked).

        What before_reset's full scan found, and what the watcher saw since
        (a cancelled step's last writes): each looked at and stored.
        """
        looked, hasher = self._look(self.blobs)
        changes = self._unstuck(looked)  # what a failed restore left is not the branch's
        self.blobs.sync()
        if changes:
            log.warning("workspace.unrecorded_kept", paths=len(changes))
        return Prepared(apply(self._model, changes), changes, None, hasher.hashed, hasher.added)

    def _write_intent(self, intent: journal.Intent, goal: Dir | None, left: Dir) -> None:
        if goal is not None:
            intent.goal = store_dir(self.manifests, goal)[0]
        else:
            intent.tip = store_dir(self.manifests, left)[0]
        journal.write(self._journal, intent)

    async def after_reset(self, target: int, reset_seq: int) -> None:
        async with self._lock:
            pending, self._pending = self._pending, None
            if pending is None or pending[0].target != target:  # not prepared: rebuild it
                plan = self.history.plan(target)
                goal = await trio.to_thread.run_sync(self.history.execute, plan) if plan else None
                intent = journal.Intent(target=target, head=reset_seq - 1, goal=None, tip=None)
                await trio.to_thread.run_sync(self._write_intent, intent, goal, self._model)
                pending = (intent, goal)
            intent, goal = pending
            now: Scan | None = None
            try:
                now = await trio.to_thread.run_sync(self._now) if goal is not None else None
                if now is not None:
                    now.leftovers, self._leftovers = self._leftovers, []
                tree = flat(goal) if goal is not None else None
                restored = await trio.to_thread.run_sync(self._apply, intent, reset_seq, now, tree)
            except OSError as exc:  # the root is gone, the disk failed: not an internal error
                restored = Restored(failed=[(".", str(exc))])
                self.unfinished = Pending(intent.target, reset_seq, restored.failed)
                if now is not None and goal is not None:
                    self._stuck = owed(["."], now.tree, flat(goal))
                log.error("workspace.restore_unfinished", target=target, error=str(exc))
            finally:
                # Not finished, the journal stays and a start (or the next reset)
                # finishes the restore: the goal is the tree as of the tip
                # meanwhile, whatever the files hold.
                if goal is not None:
                    self._model = goal
                self._unindexed = False
                self._dirty.clear()  # looked at for the restore; later changes are queued
                self._dirty.full = self._watcher is None
        if restored.failed:
            raise errors.WorkspaceUnrestorable(
                _unrestorable_message(restored.failed, target, reset_seq),
                {
                    **_problem_data(restored.failed),
                    "stage": "restore",
                    "target": target,
                    "reset_seq": reset_seq,
                },
            )

    def _apply(
        self,
        intent: journal.Intent,
        reset_seq: int,
        current: Scan | None = None,
        goal: Tree | None = None,
    ) -> Restored:
        """Restore intent.goal (or `goal`), then index the trees; idempotent (a restart redoes it).

        `current`: what the workspace holds (a full scan when not known, as at
        start). With a path not restored, the journal stays (`unfinished`).
        """
        started = time.perf_counter()
        crashpoints.hit("workspace.before_restore")
        restored = Restored() if intent.goal is None else self._restore(intent.goal, current, goal)
        crashpoints.hit("workspace.after_restore")
        if intent.backup is not None:  # a journal of 0.1.0: its forced checkout's backup
            self.index.set(intent.head, intent.backup)
        if intent.goal is not None:
            of = intent.target if intent.files is None else intent.files
            if self.index.get(of) != intent.goal:
                self.index.set(of, intent.goal)  # tree(reset) = tree(target)
        elif intent.tip is not None:
            self.index.set(reset_seq, intent.tip)  # nothing to restore: the files stay
        if restored.failed:
            self.unfinished = Pending(intent.target, reset_seq, restored.failed)
            log.error(
                "workspace.restore_unfinished",
                target=intent.target,
                reset=reset_seq,
                paths=[p for p, _ in restored.failed[:SHOWN_PATHS]],
                reasons=dict(restored.failed[:SHOWN_PATHS]),
                count=len(restored.failed),
                written=restored.written,
                deleted=restored.deleted,
                effect="the journal stays: the next start finishes the restore",
            )
            return restored
        self.unfinished, self._stuck = None, {}  # a restore superseded is owed nothing
        journal.clear(self._journal)
        log.info(
            "workspace.restored",
            target=intent.target,
            reset=reset_seq,
            written=restored.written,
            deleted=restored.deleted,
            skipped=len(restored.skipped),
            duration_ms=round((time.perf_counter() - started) * 1e3, 3),
        )
        return restored

    def _restore(self, digest: str, current: Scan | None, goal: Tree | None) -> Restored:
        """Make the files the tree `digest` (or `goal`, its flat form), `current` what they hold."""
        if self._check_root() or current is None:  # a new root: that scan was of the old one
            current = self._scan()
        if goal is None:
            goal = flat(self.history.load(digest))
        restored = restore_tree(self.root, self._ignore, current, goal, self.blobs)
        # What it could not write is its debt until written (`_unstuck`); a success, none.
        self._stuck = owed([p for p, _ in restored.failed], current.tree, goal)
        if restored.skipped:
            log.error(
                "workspace.restore_skipped",
                paths=[p for p, _ in restored.skipped[:SHOWN_PATHS]],
                reasons=dict(restored.skipped[:SHOWN_PATHS]),
                count=len(restored.skipped),
                reason="a directory, symlink, special file or ignored path not recorded "
                "is in the way, or a directory changed during the restore",
            )
        return restored

    def _reset_after(self, intent: journal.Intent) -> int | None:
        """The reset record the journal was written for, if it became durable."""
        for r, t in self._store.lineage.resets:
            if r > intent.head:
                return r if t == intent.target else None
        return None


def _dirty_message(paths: list[str], head: int, files: int, *, workspace_only: bool) -> str:
    """What was not recorded, and the ways on, each a command that works whatever the
    move was (only checkout has `force`; act_turn.rewind and undo have no `only`)."""
    shown = ", ".join(paths[:SHOWN_PATHS])
    more = f" and {len(paths) - SHOWN_PATHS} more" if len(paths) > SHOWN_PATHS else ""
    scope = " --only workspace" if workspace_only else ""
    text = (
        f"the workspace has {len(paths)} change(s) reynd did not record since seq {head}: "
        f"{shown}{more}. Nothing was changed. Save them elsewhere and retry; or restore "
        f"anyway with a checkout and force=true (`reynctl checkout {files} --force{scope}`): "
        "what it overwrites is recorded first, right before its reset record R, and "
        "`checkout R-1` brings it back"
    )
    if not workspace_only:
        text += (
            "; or leave the files and move the conversation alone, with a checkout and "
            f"only=runtime (`reynctl checkout {files} --only runtime`)"
        )
    return text


def _problem_data(problems: list[tuple[str, str]]) -> dict[str, Any]:
    return {"paths": [p for p, _ in problems], "reasons": dict(problems)}


def _unrestorable_message(problems: list[tuple[str, str]], target: int, reset: int | None) -> str:
    shown = "; ".join(f"{p}: {why}" for p, why in problems[:SHOWN_PATHS])
    more = f"; and {len(problems) - SHOWN_PATHS} more" if len(problems) > SHOWN_PATHS else ""
    if reset is None:
        return (
            f"the workspace cannot be restored as of seq {target}, so nothing was changed: "
            f"{shown}{more}. Rename, move or unlock these (chattr -i), free space if that is "
            "what is short, then retry"
        )
    return (
        f"the reset {reset} to seq {target} stands, but {len(problems)} path(s) of the "
        f"workspace were not restored: {shown}{more}. The restore is pending (daemon.status "
        "`workspace`): fix these, then restart the daemon to finish it"
    )
