"""The `reynd` command (console script `reynd = reynd.daemon.cli:main`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal

import click

from reynd import __version__
from reynd.daemon.config import ConfigError, ConfigUnreadable, find_config, load_config
from reynd.daemon.logs import LOG_FORMATS, LOG_LEVELS, configure_logging
from reynd.daemon.main import EXIT_FAILURE, EXIT_USAGE, ServeOptions, serve
from reynd.protocol.paths import resolve_socket, resolve_state_dir
from reynd.replication.config import ReplicateConfig
from reynd.replication.objects import Location

__all__ = ["main"]


# Both commands find the state directory the same way.
state_dir_option = click.option(
    "--state-dir",
    type=click.Path(file_okay=False),
    help="State directory [default: $REYN_STATE_DIR, else the nearest .reyn/ from here up, "
    "else ./.reyn].",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="reynd")
def main() -> None:
    """reynd: the daemon that keeps agent-run state and lets you travel in time through it."""


@main.command(name="serve")
@state_dir_option
@click.option(
    "--socket",
    "socket_path",
    type=click.Path(dir_okay=False),
    help="Socket path [default: $REYN_SOCKET, else config, else the state dir's own "
    "socket, $XDG_RUNTIME_DIR/reynd/<project>-<hash>.sock].",
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    help="Config file [default: $REYN_CONFIG, else <state-dir>/reynd.toml if present].",
)
@click.option(
    "--log-format",
    type=click.Choice(LOG_FORMATS),
    default="auto",
    show_default=True,
    envvar="REYN_LOG_FORMAT",
    help="json on a service (native fields under journald), console (key=value) on a "
    "terminal [env: REYN_LOG_FORMAT].",
)
@click.option(
    "--log-level",
    type=click.Choice(LOG_LEVELS),
    default="info",
    show_default=True,
    envvar="REYN_LOG_LEVEL",
    help="[env: REYN_LOG_LEVEL]",
)
@click.option(
    "--log-file",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar="REYN_LOG_FILE",
    help="Append the log to this file (created 0600) instead of stderr [env: REYN_LOG_FILE].",
)
@click.option(
    "--follow",
    metavar="URL",
    help="Serve a read-only replica of what a daemon ships to URL (s3://BUCKET/PREFIX); "
    "an empty state dir is restored from it first.",
)
def serve_command(
    *,
    state_dir: str | None,
    socket_path: str | None,
    config_path: str | None,
    log_format: str,
    log_level: str,
    log_file: Path | None,
    follow: str | None,
) -> None:
    """Run the daemon in the foreground (what systemd runs).

    Exit codes: 0 clean shutdown, 1 another daemon is running, 2 usage or
    configuration error, 3 other failure.
    """
    try:
        logs = configure_logging(log_format, log_level, log_file=log_file)
    except OSError as exc:
        click.echo(f"reynd: cannot open the log file {log_file}: {exc.strerror}", err=True)
        sys.exit(EXIT_USAGE)
    state = resolve_state_dir(state_dir)
    found = find_config(config_path, state)
    try:
        config = load_config(found)
    except ConfigUnreadable as exc:  # a dead disk is no configuration error
        click.echo(f"reynd: {exc}", err=True)
        sys.exit(EXIT_FAILURE)
    except ConfigError as exc:
        click.echo(f"reynd: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    source = None
    if follow:
        source = _follow_source(follow, state, config.replicate)
    sock = resolve_socket(socket_path, configured=config.socket, state_dir=state)
    opts = ServeOptions(
        state_dir=state,
        socket=sock,
        config=config,
        config_path=found,
        follow=source,
        log=logs.where,
    )
    sys.exit(serve(opts))


def _follow_source(url: str, state: Path, replicate: ReplicateConfig) -> Location:
    """The replica to follow; an absent or empty state dir is restored from it first."""
    from reynd.replication.objects import Bucket, Refused, Unavailable, parse_url
    from reynd.replication.restore import RestoreError, restore

    try:
        location = parse_url(url)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--follow") from None
    if state.exists() and any(p.name != "reynd.toml" for p in state.iterdir()):
        return location
    try:
        bucket = Bucket(
            location,
            endpoint=replicate.endpoint,
            region=replicate.region,
            timeout_s=replicate.timeout_s,
        )
        # Adopted: promoting the follower (serve without --follow) continues the prefix.
        restore(bucket, state, adopt=True, say=lambda s: click.echo(s, err=True))
    except (RestoreError, Refused) as exc:
        click.echo(f"reynd: cannot follow {location}: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    except (Unavailable, OSError) as exc:
        click.echo(f"reynd: cannot follow {location}: {exc}", err=True)
        sys.exit(3)
    return location


@main.command(name="repair")
@state_dir_option
@click.option(
    "--truncate-at",
    metavar="SEGMENT:OFFSET",
    help="Where to cut, as named by the corruption error (e.g. 00000000000000000001.jsonl:4096).",
)
@click.option(
    "--verify",
    is_flag=True,
    help="Read every record and snapshot back and check the segment indexes; change nothing.",
)
@click.option(
    "--accept-lost-segments",
    "accept_lost",
    is_flag=True,
    help="Give up the acknowledged seqs whose segment files are gone (as a start names them).",
)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
def repair_command(
    state_dir: str | None, truncate_at: str | None, verify: bool, accept_lost: bool, yes: bool
) -> None:
    """Cut a damaged WAL at a bad record, or (--verify) check a state directory.

    --truncate-at gives up every record from the bad one on. The cut bytes are
    kept under state/wal/torn/; each cut seq is replaced by a `lost` record so
    that no seq is ever issued twice. Run it only with the daemon stopped,
    after reading the corruption error.

    --verify is the full check a start no longer makes (it trusts the segment
    indexes): exit 0 when everything is intact, 3 with the damage found.

    --accept-lost-segments is for a start refused because the newest segment
    files are gone: each seq proven acknowledged past the log's end becomes a
    `lost` record, so the next seq is above every seq ever issued.

    Exit codes: 0 done (or intact), 1 the daemon is running, 2 usage error,
    3 damage found or the repair failed.
    """
    if [verify, truncate_at is not None, accept_lost].count(True) != 1:
        raise click.UsageError(
            "give exactly one of --truncate-at, --verify and --accept-lost-segments"
        )
    state = resolve_state_dir(state_dir)
    if verify:
        _verify(state)
        return
    if accept_lost:
        _accept_lost(state, yes)
        return
    assert truncate_at is not None
    _truncate(state, truncate_at, yes)


def _verify(state: Path) -> None:
    from reynd.storage.errors import StorageError
    from reynd.storage.lock import StateLocked
    from reynd.storage.verify import verify

    try:
        report = verify(state)
    except StateLocked as exc:
        click.echo(f"reynd: {exc}: stop the daemon first", err=True)
        sys.exit(1)
    except (OSError, StorageError) as exc:
        click.echo(f"reynd: verify failed: {exc}", err=True)
        sys.exit(3)
    for note in report.notes:
        click.echo(f"note: {note}")
    for problem in report.problems:
        click.echo(f"reynd: {problem}", err=True)
    summary = (
        f"{report.records} records in {report.segments} segments (head {report.head}), "
        f"{report.snapshots} snapshots, {report.index_chunks} index chunks"
    )
    if report.problems:
        click.echo(f"reynd: {len(report.problems)} problems found; read {summary}", err=True)
        sys.exit(3)
    click.echo(f"ok: {summary} verified")


def _confirm(yes: bool, question: str) -> None:
    """A repair gives records up: asked on a terminal, else only with --yes."""
    if yes:
        return
    if not sys.stdin.isatty():
        click.echo("reynd: repair gives up records; pass --yes to confirm", err=True)
        sys.exit(EXIT_USAGE)
    click.confirm(question, abort=True)


def _accept_lost(state: Path, yes: bool) -> None:
    from reynd.replication.identity import forget_progress
    from reynd.storage.errors import StorageError
    from reynd.storage.lock import StateLocked
    from reynd.storage.repair import accept_lost_segments

    _confirm(yes, "Give up the records of the missing segment files for good?")
    try:
        report = accept_lost_segments(state)
        if report is not None:
            # The replica may hold the originals: it must not be continued.
            forget_progress(state / "state")
    except StateLocked as exc:
        click.echo(f"reynd: {exc}: stop the daemon first", err=True)
        sys.exit(1)
    except (OSError, StorageError) as exc:
        click.echo(f"reynd: repair failed: {exc}", err=True)
        sys.exit(3)
    if report is None:
        click.echo("nothing to accept: the log holds every seq the state directory proves")
        return
    for path in report.missing:
        click.echo(f"gone: {path}")
    if report.last_lost >= report.first_lost:
        click.echo(
            f"seqs {report.first_lost}..{report.last_lost} are now `lost` records "
            f"({report.why}); the next seq is {report.next_seq}"
        )
    else:
        click.echo(
            f"no seq from {report.first_lost} on is proven acknowledged; the loss is "
            f"recorded, the next seq is {report.next_seq}"
        )


def _truncate(state: Path, truncate_at: str, yes: bool) -> None:
    from reynd.replication.identity import forget_progress
    from reynd.storage.errors import StorageError
    from reynd.storage.lock import StateLocked
    from reynd.storage.repair import truncate_at as cut

    segment, sep, offset_text = truncate_at.rpartition(":")
    if not sep or not segment or not offset_text.isdigit():
        raise click.BadParameter("expected SEGMENT:OFFSET", param_hint="--truncate-at")
    _confirm(yes, f"Cut {segment} at byte {offset_text} and give up every later record?")
    try:
        report = cut(state, segment, int(offset_text))
        # Cut seqs are `lost` records now: a replica holding the originals must
        # not be continued (the next start ships from the floor, a new root).
        forget_progress(state / "state")
    except StateLocked as exc:
        click.echo(f"reynd: {exc}: stop the daemon first", err=True)
        sys.exit(1)
    except (OSError, ValueError, StorageError) as exc:
        click.echo(f"reynd: repair failed: {exc}", err=True)
        sys.exit(3)
    click.echo(
        f"cut {report.segment} at byte {report.offset}; seqs {report.first_lost}.."
        f"{report.last_lost} are now `lost` records; the cut bytes are kept in:"
    )
    for path in report.saved:
        click.echo(f"  {path}")


@main.command(name="backup")
@click.argument("dest", type=click.Path(file_okay=False, path_type=Path))
@state_dir_option
def backup_command(dest: Path, state_dir: str | None) -> None:
    """Copy a state directory, live or stopped, into DEST (absent or empty): a copy that opens.

    Safe while the daemon writes: config.db through SQLite's online backup,
    the WAL up to its last complete record, snapshots, the workspace objects,
    the audit log, reynd.toml; each file fsynced, the copy verified as
    `reynd repair --verify` would. Start a daemon on it with
    `reynd serve --state-dir DEST`. Not copied: the replication identity
    (a daemon on the copy replicates to another prefix).

    Exit codes: 0 written and verified, 2 DEST is not empty or not a state
    directory, 3 the copy failed.

    \b
    Example:
      reynd backup --state-dir ~/project/.reyn /backups/reyn-$(date +%F)
    """
    import sqlite3

    from reynd.storage.backup import BackupError, backup
    from reynd.storage.errors import StorageError

    state = resolve_state_dir(state_dir)
    try:
        report = backup(state, dest, say=lambda s: click.echo(f"reynd: {s}", err=True))
    except BackupError as exc:
        click.echo(f"reynd: backup failed: {exc}", err=True)
        sys.exit(EXIT_USAGE if exc.refused else 3)
    except FileNotFoundError as exc:
        click.echo(f"reynd: backup failed: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    except (StorageError, OSError, sqlite3.Error) as exc:  # a damaged config file is one
        click.echo(f"reynd: backup failed: {exc}", err=True)
        sys.exit(3)
    v = report.verified
    click.echo(
        f"backed up {state} at seq {report.seq} into {dest}: {report.files} files, "
        f"{report.bytes} bytes; verified {v.records} records in {v.segments} segments, "
        f"{v.snapshots} snapshots ({report.duration_s:.1f} s, attempt {report.attempts})"
    )


@main.command(name="restore")
@click.option(
    "--from", "url", required=True, metavar="URL", help="The replica: s3://BUCKET/PREFIX."
)
@state_dir_option
@click.option(
    "--to-seq",
    type=click.IntRange(min=1),
    help="Restore history up to this seq only [default: everything shipped].",
)
@click.option(
    "--endpoint", metavar="URL", help="S3-compatible endpoint [default: $AWS_ENDPOINT_URL]."
)
@click.option("--region", help="Region [default: the AWS chain's].")
@click.option(
    "--adopt",
    is_flag=True,
    help="Let a daemon on the restored directory continue the replica (a failover: the "
    "daemon that writes it now stands down). Not with --to-seq short of the end.",
)
def restore_command(  # noqa: PLR0917
    url: str,
    state_dir: str | None,
    to_seq: int | None,
    endpoint: str | None,
    region: str | None,
    adopt: bool,
) -> None:
    """Rebuild a state directory from a replica that `[replicate]` shipped.

    The directory must be absent or empty (a reynd.toml in it is kept).
    Without --to-seq it gets the same head, branches and generations as the
    source had when it last shipped. A daemon started on it is refused the
    prefix (two writers must never share one) unless --adopt: then it
    continues the replica and the daemon writing there now stands down.
    Credentials come from the environment or the standard AWS chain.

    A replica that lacks records it says were shipped (a WAL object removed)
    is refused, exit 3, naming the missing seqs: --to-seq below them restores
    the history before them. The output names the range restored and the
    last shipped seq.

    \b
    Example:
      reynd restore --from s3://backups/reynd/laptop --state-dir ~/reyn-restored
    """
    from reynd.protocol.errors import ReyndError
    from reynd.replication.objects import Bucket, Missing, Refused, Unavailable, parse_url
    from reynd.replication.restore import ReplicaShort, RestoreError, restore
    from reynd.storage.errors import StorageError

    try:
        location = parse_url(url)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--from") from None
    if adopt and to_seq is not None:
        raise click.UsageError("--adopt restores everything: leave out --to-seq")
    state = resolve_state_dir(state_dir)
    try:
        bucket = Bucket(location, endpoint=endpoint, region=region, timeout_s=60)
        report = restore(
            bucket, state, to_seq=to_seq, adopt=adopt, say=lambda s: click.echo(s, err=True)
        )
    except ReplicaShort as exc:  # damage in the replica, not a usage error
        click.echo(f"reynd: restore failed: {exc}", err=True)
        sys.exit(3)
    except (RestoreError, Refused) as exc:
        click.echo(f"reynd: restore failed: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    except Missing as exc:
        click.echo(
            f"reynd: restore failed: {exc} vanished while restoring (the source's retention "
            "removed it): try again",
            err=True,
        )
        sys.exit(3)
    except (Unavailable, StorageError, ReyndError, OSError) as exc:
        click.echo(f"reynd: restore failed: {exc}", err=True)
        sys.exit(3)
    click.echo(
        f"restored seqs {report.floor}..{report.head} ({report.records} records, "
        f"{report.snapshots} snapshots, {report.wal_bytes} WAL bytes) from {location} "
        f"generation {report.generation} into {state} in {report.duration_s:.1f} s; "
        f"the last shipped seq is {report.shipped}"
    )
    if report.adopted:
        click.echo(f"a daemon on {state} with [replicate] url = {url!r} continues the replica")
    else:
        click.echo(f"a daemon on {state} must replicate to another prefix (or restore --adopt)")


@main.command(name="install-units")
@click.option(
    "--user/--system",
    "user",
    default=True,
    help="A per-user daemon (default) or the system daemon.",
)
@click.option(
    "--dir",
    "target",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where to write them [default: ~/.config/systemd/user, or /etc/systemd/system].",
)
@click.option("--force", is_flag=True, help="Replace unit files that are already there.")
def install_units_command(user: bool, target: Path | None, force: bool) -> None:
    """Install the systemd units, running this installation's reynd.

    Writes reynd.service and reynd.socket with ExecStart naming the reynd
    you are running now (a virtual environment, pipx, /usr/bin...), then says
    what to run next. Exit codes: 0 written, 1 they exist (use --force),
    2 cannot write there.

    \b
    Examples:
      reynd install-units                      # per user
      sudo /opt/reynd/bin/reynd install-units --system
    """
    from reynd.daemon.units import UnitsExist, install_units, unit_dir

    scope: Literal["user", "system"] = "user" if user else "system"
    where = target or unit_dir(scope)
    try:
        written = install_units(scope, where, force=force)
    except UnitsExist as exc:
        click.echo(f"reynd: {exc}", err=True)
        sys.exit(1)
    except OSError as exc:
        hint = "" if user else " (run it as root, or pass --dir)"
        click.echo(f"reynd: cannot write the units into {where}: {exc.strerror}{hint}", err=True)
        sys.exit(EXIT_USAGE)
    for w in written:
        click.echo(f"{'replaced' if w.replaced else 'wrote'} {w.path}")
        for warning in w.warnings:
            click.echo(
                f"reynd: warning: {warning}: the service cannot start; install reynd "
                "elsewhere (e.g. /opt/reynd) or relax that line in a drop-in",
                err=True,
            )
    ctl = "systemctl --user" if user else "systemctl"
    click.echo(f"next: {ctl} daemon-reload && {ctl} enable --now reynd.socket && reynctl status")


if __name__ == "__main__":
    main()
