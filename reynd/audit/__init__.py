"""The audit EventStore and the replay debugger (docs/audit.md).

The third of reynd's three layers: a record of every user-visible event,
per daemon run, kept apart from the WAL. It is written without fsync, rotated
and collected by its own retention, and never read by recovery.
"""

from reynd.audit.options import AuditOptions

__all__ = ["AuditOptions"]
