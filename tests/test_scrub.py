"""Damage to a record a start took on trust from a segment index stops the daemon (rule 7).

The start does not read the records an index describes; the scrub reads them
back once the daemon serves. A flipped byte in one of them: the daemon stops
with exit 3 and leaves the damage mark, the next start verifies every record
and refuses with the record and the repair command, the repair makes it start.
A mark over an intact log (restored from a backup, say) costs one full scan.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from reynd.storage.damage import DAMAGE_FILE
from tests.harness import READY_TIMEOUT, run_daemon_to_exit, start_daemon
from tests.runtime_helpers import log_lines, wait_for_log
from tests.test_restart_index import CONFIG, _append


def _indexed_state(short_tmp: Path) -> tuple[Path, int]:
    """A state dir whose first segments are indexed; the daemon stopped cleanly."""
    d = start_daemon(short_tmp, config=CONFIG)
    head = _append(d, 600)
    wait_for_log(d, "index.written")
    d.stop()
    return d.state_dir, head


def _flip_inside(state_dir: Path, needle: bytes) -> Path:
    segment = sorted((state_dir / "state" / "wal").glob("*.jsonl"))[0]
    raw = bytearray(segment.read_bytes())
    at = raw.index(needle)
    raw[at] ^= 0x20  # "h" -> "H": a valid byte, a wrong checksum
    segment.write_bytes(bytes(raw))
    return segment


def test_damage_an_index_vouched_for_stops_the_daemon_then_every_start(short_tmp: Path) -> None:
    state_dir, _ = _indexed_state(short_tmp)
    segment = _flip_inside(state_dir, b"hello 10 ")

    # The start itself reads the index only; the read-back (before or after READY) stops it.
    d = start_daemon(short_tmp, state_dir=state_dir, wait_ready=False)
    assert d.proc.wait(timeout=READY_TIMEOUT) == 3
    d.notify_sock.close()
    (opened,) = log_lines(d, "storage.open")
    assert opened["indexed"] > 10
    (found,) = log_lines(d, "storage.damage_found")
    assert segment.name in found["error"] and "reynd repair" in found["error"]
    assert (state_dir / "state" / DAMAGE_FILE).exists()

    # Every later start verifies every record and refuses at once, naming the repair.
    refused = run_daemon_to_exit(short_tmp, state_dir=state_dir, socket_path=d.socket)
    assert refused.returncode == 3
    assert f"corrupt record in {segment}" in refused.stderr
    repair = re.search(r"reynd repair --state-dir \S+ --truncate-at \S+:\d+", refused.stderr)
    assert repair is not None
    args = repair.group(0).split()[2:]
    fixed = subprocess.run(
        [sys.executable, "-m", "reynd.daemon.cli", "repair", *args, "--yes"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert fixed.returncode == 0, fixed.stderr

    again = start_daemon(short_tmp, state_dir=state_dir)
    try:
        assert not (state_dir / "state" / DAMAGE_FILE).exists()
        assert again.call("daemon.status")["head"] > 10
    finally:
        again.stop()


def test_a_mark_over_an_intact_log_costs_one_full_scan(short_tmp: Path) -> None:
    state_dir, head = _indexed_state(short_tmp)
    (state_dir / "state" / DAMAGE_FILE).write_text("corrupt record in ... (restored since)\n")
    d = start_daemon(short_tmp, state_dir=state_dir)
    try:
        (opened,) = log_lines(d, "storage.open")
        assert opened["indexed"] == 0 and opened["scanned"] == head
        assert not (state_dir / "state" / DAMAGE_FILE).exists()
        assert d.call("daemon.status")["head"] == head
        _append(d, 5, start=600)
        assert d.call("state.get", {"seq": 10})["seq"] == 10
    finally:
        d.stop()
    # The indexes come back with the next writes; a start reads them again.
    d = start_daemon(short_tmp, state_dir=state_dir)
    try:
        _append(d, 300, start=605)  # snapshots, and the index writes that go with them
        wait_for_log(d, "index.written")
    finally:
        d.stop()
    d = start_daemon(short_tmp, state_dir=state_dir)
    try:
        (opened,) = log_lines(d, "storage.open")
        assert opened["indexed"] > 0
    finally:
        d.stop()
