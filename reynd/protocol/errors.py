"""One rooted error hierarchy; each class carries its stable JSON-RPC code.

The daemon raises these; the transport turns them into JSON-RPC error objects;
the client turns error objects back into the same classes (`from_wire`). Codes
are part of the contract and documented in docs/protocol.md: never renumber.
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "AgentExists",
    "BelowFloor",
    "ConfigDamaged",
    "ConnectionLimit",
    "EventNotFound",
    "InternalError",
    "InvalidEvent",
    "InvalidParams",
    "InvalidRequest",
    "LimitExceeded",
    "MessageTooLarge",
    "MethodNotFound",
    "NotActive",
    "NothingToDo",
    "ParseError",
    "PermissionDenied",
    "ReadOnlyReplica",
    "ReyndError",
    "SeqOutOfRange",
    "ShuttingDown",
    "StaleBranch",
    "StorageCorrupt",
    "StorageFailed",
    "StorageUnavailable",
    "UnknownAgent",
    "UnknownIntervention",
    "UnknownRun",
    "WorkspaceDirty",
    "WorkspaceUnrestorable",
    "error_class",
]


class ReyndError(Exception):
    """Base of every error the daemon reports: a code, a message, structured data."""

    code: ClassVar[int] = -32603
    name: ClassVar[str] = "internal_error"

    def __init__(self, message: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.data: dict[str, Any] = dict(data or {})

    def to_wire(self) -> dict[str, Any]:
        """The JSON-RPC `error` object."""
        return {
            "code": self.code,
            "message": self.message,
            "data": {"error": self.name, **self.data},
        }

    @staticmethod
    def from_wire(obj: dict[str, Any]) -> ReyndError:
        """Rebuild the matching class from a JSON-RPC error object."""
        code = obj.get("code")
        cls = _BY_CODE.get(code, ReyndError) if isinstance(code, int) else ReyndError
        data = obj.get("data")
        err = cls(str(obj.get("message", "")), data if isinstance(data, dict) else None)
        if cls is ReyndError and isinstance(code, int):
            err.code = code  # type: ignore[misc]  # keep an unknown code as sent
        return err


# JSON-RPC 2.0 reserved codes.
class ParseError(ReyndError):
    code = -32700
    name = "parse_error"


class InvalidRequest(ReyndError):
    code = -32600
    name = "invalid_request"


class MethodNotFound(ReyndError):
    code = -32601
    name = "method_not_found"


class InvalidParams(ReyndError):
    code = -32602
    name = "invalid_params"


class InternalError(ReyndError):
    code = -32603
    name = "internal_error"


# Application errors, -32000 to -32099.
class NotActive(ReyndError):
    """rewind(N) where N is not on the active lineage: use checkout."""

    code = -32001
    name = "not_active"


class SeqOutOfRange(ReyndError):
    code = -32002
    name = "seq_out_of_range"


class BelowFloor(ReyndError):
    """The seq lies below the retention floor: its history was collected."""

    code = -32003
    name = "below_floor"


class NothingToDo(ReyndError):
    code = -32004
    name = "nothing_to_do"


class StaleBranch(ReyndError):
    """A fenced write based on a seq that a rewind has since abandoned."""

    code = -32005
    name = "stale_branch"


class UnknownAgent(ReyndError):
    code = -32006
    name = "unknown_agent"


class AgentExists(ReyndError):
    code = -32007
    name = "agent_exists"


class MessageTooLarge(ReyndError):
    code = -32008
    name = "message_too_large"


class ConnectionLimit(ReyndError):
    code = -32009
    name = "connection_limit"


class ShuttingDown(ReyndError):
    code = -32010
    name = "shutting_down"


class StorageFailed(ReyndError):
    """A write or fsync failed: the daemon stops accepting writes and exits."""

    code = -32011
    name = "storage_failed"


class InvalidEvent(ReyndError):
    """The event is well-formed but does not apply to the current state."""

    code = -32012
    name = "invalid_event"


class PermissionDenied(ReyndError):
    code = -32013
    name = "permission_denied"


class UnknownIntervention(ReyndError):
    code = -32014
    name = "unknown_intervention"


class WorkspaceDirty(ReyndError):
    code = -32015
    name = "workspace_dirty"


class UnknownRun(ReyndError):
    """No such daemon run in the audit log (see events.runs)."""

    code = -32016
    name = "unknown_run"


class EventNotFound(ReyndError):
    """The audit log holds no event at that index or seq (never recorded, or collected)."""

    code = -32017
    name = "event_not_found"


class ConfigDamaged(ReyndError):
    """A config generation file failed its checks: the runtime configuration was not restored."""

    code = -32018
    name = "config_damaged"


class LimitExceeded(ReyndError):
    """A limit was passed (nesting depth, batch members, subscriptions, integer range).

    `data.limit_name` names the limit (`max_depth`, `max_batch_members`,
    `max_subscriptions_per_connection`, `integer_range`, `max_append_events`,
    `line_timeout_s`: the connection is then closed)
    and `data.limit` its value (for `integer_range` the largest integer;
    `data.min` the smallest).
    """

    code = -32019
    name = "limit_exceeded"


class ReadOnlyReplica(ReyndError):
    """This daemon follows a replica (`reynd serve --follow`): it serves reads only."""

    code = -32020
    name = "read_only_replica"


class StorageCorrupt(ReyndError):
    """A record this call needed is damaged on disk: the daemon stops (exit 3), see its log."""

    code = -32021
    name = "storage_corrupt"


class StorageUnavailable(ReyndError):
    """The daemon could not store what the call needed (disk full, out of file
    descriptors, an I/O error) before anything of it was written to the WAL.

    Nothing was acknowledged and the WAL is untouched: the daemon keeps
    serving. `data.reason` is the system's error, `data.errno` its name
    (`ENOSPC`, `EMFILE`, `EIO`...), `data.store` what could not be written.
    Free the resource and retry.
    """

    code = -32022
    name = "storage_unavailable"


class WorkspaceUnrestorable(ReyndError):
    """The workspace cannot be restored as of the target: `data.paths` and `data.reasons` say why.

    `data.stage` "preflight": found before the reset record, nothing changed.
    "restore": the reset stands (its `data.reset_seq`) and these paths were
    not restored; the restore is pending (daemon.status `workspace`) until a
    start or a later reset finishes it.
    """

    code = -32023
    name = "workspace_unrestorable"


_BY_CODE: dict[int, type[ReyndError]] = {
    cls.code: cls
    for cls in (
        ParseError,
        InvalidRequest,
        MethodNotFound,
        InvalidParams,
        InternalError,
        NotActive,
        SeqOutOfRange,
        BelowFloor,
        NothingToDo,
        StaleBranch,
        UnknownAgent,
        AgentExists,
        MessageTooLarge,
        ConnectionLimit,
        ShuttingDown,
        StorageFailed,
        InvalidEvent,
        PermissionDenied,
        UnknownIntervention,
        WorkspaceDirty,
        UnknownRun,
        EventNotFound,
        ConfigDamaged,
        LimitExceeded,
        ReadOnlyReplica,
        StorageCorrupt,
        StorageUnavailable,
        WorkspaceUnrestorable,
    )
}


def error_class(code: int) -> type[ReyndError]:
    """The class for a stable code (ReyndError for codes this version does not know)."""
    return _BY_CODE.get(code, ReyndError)
