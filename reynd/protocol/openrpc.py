"""The OpenRPC document of the API, generated from `METHODS`.

The schemas come from the same msgspec types that validate requests and
encode results, so the document cannot drift from the implementation.
Standard library and msgspec only (clients import this package).
"""

from __future__ import annotations

from typing import Any

import msgspec

from reynd import __version__
from reynd.protocol import errors
from reynd.protocol.methods import METHODS, NOTIFICATIONS, PROTOCOL_VERSION, MethodDef

__all__ = ["OPENRPC_VERSION", "openrpc_document"]

OPENRPC_VERSION = "1.3.2"
_REF = "#/components/schemas/{name}"

# Errors any method may return besides its own.
_COMMON = (errors.InvalidParams, errors.InternalError, errors.ShuttingDown)


def openrpc_document() -> dict[str, Any]:
    """The whole API as an OpenRPC document (params by name, results, errors)."""
    defs = list(METHODS.values())
    types = [t for d in defs for t in (d.params, d.result)]
    notices = list(NOTIFICATIONS.items())
    schemas, components = msgspec.json.schema_components(
        [*types, *(t for _, (t, _) in notices)], ref_template=_REF
    )
    methods = [_method(d, components, schemas[2 * i + 1]) for i, d in enumerate(defs)]
    # OpenRPC 1.3 has no server-to-client messages: an extension lists them,
    # each shaped like a method without a result (params by name).
    notifications = [
        {
            "name": name,
            "summary": summary,
            "paramStructure": "by-name",
            "params": [
                {
                    "name": field,
                    "required": field in components[t.__name__].get("required", ()),
                    "schema": schema,
                }
                for field, schema in components[t.__name__]["properties"].items()
            ],
        }
        for name, (t, summary) in notices
    ]
    return {
        "openrpc": OPENRPC_VERSION,
        "info": {
            "title": "reynd",
            "version": __version__,
            "description": "JSON-RPC 2.0 over a Unix stream socket, one message per line.",
            "x-protocol": PROTOCOL_VERSION,
        },
        "methods": methods,
        "x-notifications": notifications,
        "components": {"schemas": components},
    }


def _method(d: MethodDef, components: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    params_schema = components[d.params.__name__]
    required = set(params_schema.get("required", ()))
    params = [
        {"name": name, "required": name in required, "schema": schema}
        for name, schema in params_schema.get("properties", {}).items()
    ]
    doc: dict[str, Any] = {
        "name": d.name,
        "summary": d.summary,
        # Named (an object) or by position in field order (an array).
        "paramStructure": "either",
        "params": params,
        "result": {"name": f"{d.name}.result", "schema": result},
        "errors": [_error(e) for e in (*d.errors, *_COMMON)],
    }
    if d.mutating:
        doc["x-mutating"] = True
    return doc


def _error(cls: type[errors.ReyndError]) -> dict[str, Any]:
    error: dict[str, Any] = {"code": cls.code, "message": cls.name, "data": {"error": cls.name}}
    doc = (cls.__doc__ or "").strip()
    if doc and cls.__doc__ != errors.ReyndError.__doc__:
        error["data"]["description"] = doc.splitlines()[0]
    return error
