"""One rooted error hierarchy; each class declares its stable JSON-RPC code and name.

The daemon raises these; the transport turns them into JSON-RPC error objects;
the client turns error objects back into the same classes (`from_wire`). Codes
are part of the contract and documented in docs/protocol.md: never renumber.

A class is the only place its code and name are written: defining it
registers it (`ERRORS`, `error_class`), and a second class with the same code
or name is refused at import. The module has no literal `__all__`: mypy then
takes every public class of it through `reynctl.errors`' star import, and the
runtime `__all__` below is derived from the registry. A class's docstring
(first line) is its description in the OpenRPC document: most have none.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Final

_BY_CODE: dict[int, type[ReyndError]] = {}


class ReyndError(Exception):
    """Base of every error the daemon reports: a code, a message, structured data.

    A subclass states its code and name as class arguments,
    `class NotActive(ReyndError, code=-32001, name="not_active")`, and is
    registered by them. ReyndError itself stands for a code this version does
    not know (`from_wire`).
    """

    code: ClassVar[int] = -32603
    name: ClassVar[str] = "internal_error"

    def __init_subclass__(cls, *, code: int, name: str, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for other in _BY_CODE.values():
            if code == other.code or name == other.name:
                raise TypeError(
                    f"{cls.__name__} (code {code}, name {name!r}) repeats "
                    f"{other.__name__} (code {other.code}, name {other.name!r})"
                )
        cls.code = code
        cls.name = name
        _BY_CODE[code] = cls

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
class ParseError(ReyndError, code=-32700, name="parse_error"):
    pass


class InvalidRequest(ReyndError, code=-32600, name="invalid_request"):
    pass


class MethodNotFound(ReyndError, code=-32601, name="method_not_found"):
    pass


class InvalidParams(ReyndError, code=-32602, name="invalid_params"):
    pass


class InternalError(ReyndError, code=-32603, name="internal_error"):
    pass


# Application errors, -32000 to -32099.
class NotActive(ReyndError, code=-32001, name="not_active"):
    """rewind(N) where N is not on the active lineage: use checkout."""


class SeqOutOfRange(ReyndError, code=-32002, name="seq_out_of_range"):
    pass


class BelowFloor(ReyndError, code=-32003, name="below_floor"):
    """The seq lies below the retention floor: its history was collected."""


class NothingToDo(ReyndError, code=-32004, name="nothing_to_do"):
    pass


class StaleBranch(ReyndError, code=-32005, name="stale_branch"):
    """A fenced write based on a seq that a rewind has since abandoned."""


class UnknownAgent(ReyndError, code=-32006, name="unknown_agent"):
    pass


class AgentExists(ReyndError, code=-32007, name="agent_exists"):
    pass


class MessageTooLarge(ReyndError, code=-32008, name="message_too_large"):
    pass


class ConnectionLimit(ReyndError, code=-32009, name="connection_limit"):
    pass


class ShuttingDown(ReyndError, code=-32010, name="shutting_down"):
    pass


class StorageFailed(ReyndError, code=-32011, name="storage_failed"):
    """A write or fsync failed: the daemon stops accepting writes and exits."""


class InvalidEvent(ReyndError, code=-32012, name="invalid_event"):
    """The event is well-formed but does not apply to the current state."""


class PermissionDenied(ReyndError, code=-32013, name="permission_denied"):
    pass


class UnknownIntervention(ReyndError, code=-32014, name="unknown_intervention"):
    pass


class WorkspaceDirty(ReyndError, code=-32015, name="workspace_dirty"):
    pass


class UnknownRun(ReyndError, code=-32016, name="unknown_run"):
    """No such daemon run in the audit log (see events.runs)."""


class EventNotFound(ReyndError, code=-32017, name="event_not_found"):
    """The audit log holds no event at that index or seq (never recorded, or collected)."""


class ConfigDamaged(ReyndError, code=-32018, name="config_damaged"):
    """A config generation file failed its checks: the runtime configuration was not restored."""


class LimitExceeded(ReyndError, code=-32019, name="limit_exceeded"):
    """A limit was passed (nesting depth, batch members, subscriptions, integer range).

    `data.limit_name` names the limit (`max_depth`, `max_batch_members`,
    `max_subscriptions_per_connection`, `integer_range`, `max_append_events`,
    `line_timeout_s`: the connection is then closed)
    and `data.limit` its value (for `integer_range` the largest integer;
    `data.min` the smallest).
    """


class ReadOnlyReplica(ReyndError, code=-32020, name="read_only_replica"):
    """This daemon follows a replica (`reynd serve --follow`): it serves reads only."""


class StorageCorrupt(ReyndError, code=-32021, name="storage_corrupt"):
    """A record this call needed is damaged on disk: the daemon stops (exit 3), see its log."""


class StorageUnavailable(ReyndError, code=-32022, name="storage_unavailable"):
    """The daemon could not store what the call needed (disk full, out of file
    descriptors, an I/O error) before anything of it was written to the WAL.

    Nothing was acknowledged and the WAL is untouched: the daemon keeps
    serving. `data.reason` is the system's error, `data.errno` its name
    (`ENOSPC`, `EMFILE`, `EIO`...), `data.store` what could not be written.
    Free the resource and retry.
    """


class WorkspaceUnrestorable(ReyndError, code=-32023, name="workspace_unrestorable"):
    """The workspace cannot be restored as of the target: `data.paths` and `data.reasons` say why.

    `data.stage` "preflight": found before the reset record, nothing changed.
    "restore": the reset stands (its `data.reset_seq`) and these paths were
    not restored; the restore is pending (daemon.status `workspace`) until a
    start or a later reset finishes it.
    """


class TagExists(ReyndError, code=-32024, name="tag_exists"):
    """tags.set of a name that already names another seq: pass `force` to move it."""


class UnknownTag(ReyndError, code=-32025, name="tag_not_found"):
    """No tag of that name: `reynctl tags` lists them."""


ERRORS: Final[Mapping[int, type[ReyndError]]] = MappingProxyType(_BY_CODE)
"""Every error class by its code, in the order they are defined (the registry)."""


def error_class(code: int) -> type[ReyndError]:
    """The class for a stable code (ReyndError for codes this version does not know)."""
    return _BY_CODE.get(code, ReyndError)


if not TYPE_CHECKING:  # mypy reads a star import's names from a literal __all__ only
    __all__ = ["ERRORS", "ReyndError", "error_class"]
    __all__ += [c.__name__ for c in ERRORS.values()]
