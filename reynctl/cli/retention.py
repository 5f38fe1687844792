"""Retention: show the policy and the floor, change it, collect now; disk use (`du`)."""

from __future__ import annotations

import math
from typing import Any

import click

from reynctl import render
from reynctl.cli.arguments import key_value
from reynctl.cli.group import cli
from reynctl.cli.options import Options, examples, json_option, pass_opts
from reynd.protocol import methods as m

__all__ = ["RETENTION_KEYS", "parse_retention"]


@cli.group(
    invoke_without_command=True,
    epilog=examples(
        "reynctl retention                               # policy, floor, WAL size",
        "reynctl retention set wal_keep_records=1000",
        "reynctl retention gc                            # collect now",
    ),
)
@json_option
@click.pass_context
def retention(ctx: click.Context) -> None:
    """Show the retention policy and the floor (the default), change it, or collect now.

    Every seq from the floor to the tip can be read, rewound to and checked
    out, on any branch; below it, only the coarse points (kept snapshots).
    """
    if ctx.invoked_subcommand is None:
        _show_retention(ctx.find_object(Options))  # type: ignore[arg-type]


def _show_retention(opts: Options) -> None:
    with opts.client() as c:
        reply = c.call("retention.get", m.RetentionGetParams(), m.RetentionInfo)
    opts.emit(reply, lambda: render.retention_text(reply.value, opts.style))


@retention.command("show")
@json_option
@pass_opts
def retention_show(opts: Options) -> None:
    """Show the policy, floor, head, WAL bytes and coarse points."""
    _show_retention(opts)


RETENTION_KEYS = tuple(f for f in m.RetentionSetParams.__struct_fields__)

# What each key counts, in the words of `retention set --help`; a key counted in
# seconds takes any number, the others a whole number.
_UNITS = {
    "wal_keep_records": "records",
    "wal_keep_age_s": "seconds",
    "wal_keep_bytes": "bytes",
    "snapshot_keep": "snapshots",
    "snapshot_keep_age_s": "seconds",
    "gc_interval_s": "seconds",
    "horizon_checkpoints": "checkpoints",
    "horizon_age_s": "seconds",
    "budget_bytes": "bytes",
    "budget_free_pct": "percent",
}
assert set(_UNITS) == set(RETENTION_KEYS), "a new retention key needs its unit here"


def _setting(key: str, value: Any, text: str) -> int | float:
    """One retention value, checked here so that the message names the key and its type."""
    seconds = _UNITS[key] in ("seconds", "percent")
    number = isinstance(value, int | float) and not isinstance(value, bool)
    ceiling = 100 if _UNITS[key] == "percent" else math.inf
    if number and 0 <= value <= ceiling and (seconds or isinstance(value, int)):
        return value  # type: ignore[no-any-return]
    kind = f"a number of {_UNITS[key]}" if seconds else f"a whole number of {_UNITS[key]}"
    if ceiling == 100:
        raise click.BadParameter(
            f"{key} must be a percentage, 0 to 100; got {text!r}", param_hint="KEY=VALUE"
        )
    raise click.BadParameter(
        f"{key} must be {kind}, 0 or above; got {text!r}",
        param_hint="KEY=VALUE",
    )


def parse_retention(pairs: tuple[str, ...]) -> m.RetentionSetParams:
    """KEY=VALUE pairs as retention.set params; a usage error names a bad key or value."""
    fields: dict[str, Any] = {}
    for pair in pairs:
        key, value = key_value(pair, "KEY=VALUE")
        if key not in RETENTION_KEYS:
            raise click.BadParameter(
                f"unknown key {key!r} (one of: {', '.join(RETENTION_KEYS)})",
                param_hint="KEY=VALUE",
            )
        fields[key] = _setting(key, value, pair.partition("=")[2])
    return m.RetentionSetParams(**fields)


@retention.command(
    "set",
    epilog=examples(
        "reynctl retention set wal_keep_records=1000",
        "reynctl retention set wal_keep_age_s=86400 snapshot_keep=8",
        "reynctl retention set wal_keep_bytes=0        # turn that horizon off",
        "reynctl retention set horizon_checkpoints=0 horizon_age_s=0  # recovery needs only",
        "reynctl retention set budget_bytes=2147483648 # the default horizon within 2 GiB",
    ),
)
@click.argument("pairs", metavar="KEY=VALUE...", nargs=-1, required=True)
@json_option
@pass_opts
def retention_set(opts: Options, pairs: tuple[str, ...]) -> None:
    """Change the retention policy; only the keys given change.

    Stored in the state directory (state/config/config.db): it outlives
    restarts and overrides the same key of reynd.toml's [retention].

    \b
    wal_keep_records     keep at least this many newest records (0: off)
    wal_keep_age_s       keep records younger than this (seconds, 0: off)
    wal_keep_bytes       keep at least this many bytes of WAL (0: off)
    snapshot_keep        snapshots kept below the floor (coarse points)
    snapshot_keep_age_s  also keep snapshots younger than this (seconds, 0: off)
    gc_interval_s        collect every this many seconds (0: only on request)
    horizon_checkpoints  default horizon: the newest checkpoints kept (0: off)
    horizon_age_s        default horizon: checkpoints younger than this (0: off)
    budget_bytes         the WAL the default horizon may fill (bytes, 0: no limit)
    budget_free_pct      nor more than this % of the free space (0: no limit)
    """
    params = parse_retention(pairs)
    with opts.client() as c:
        reply = c.call("retention.set", params, m.RetentionInfo)
    opts.emit(reply, lambda: render.retention_text(reply.value, opts.style))


@retention.command("gc")
@json_option
@pass_opts
def retention_gc(opts: Options) -> None:
    """Collect now what the policy no longer keeps; prints how far the floor moved."""
    with opts.client() as c:
        reply = c.call("retention.gc", m.RetentionGcParams(), m.GcResult)
    opts.emit(reply, lambda: render.gc_text(reply.value, opts.style))


@cli.command(
    "du",
    epilog=examples(
        "reynctl du                     # bytes per part, what GC could free",
        "reynctl du --json | jq '.parts[] | select(.name == \"audit\") | .bytes'",
    ),
)
@json_option
@pass_opts
def du(opts: Options) -> None:
    """What the state directory uses on disk, by part, and what GC could free now.

    Parts: the WAL, cut WAL bytes (torn), snapshots, segment indexes, the audit
    log (kept by audit retention, not by GC), config, the workspace's blobs,
    manifests and trees, and the rest.
    """
    with opts.client() as c:
        reply = c.call("state.du", m.DuParams(), m.DiskUsage)
    opts.emit(reply, lambda: render.du_text(reply.value, opts.style))
