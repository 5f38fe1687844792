"""JSON Schema of a msgspec type as one self-contained object, for schema extensions.

The OpenRPC document's own schemas come from msgspec with shared components;
a schema placed in an annotation's `extra_json_schema` cannot refer to them,
so it is inlined: every `$ref` replaced by its definition (the types inlined
here are not recursive).
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["inline_schema"]


def inline_schema(tp: Any) -> dict[str, Any]:
    """msgspec's JSON Schema of `tp` with its `$defs` substituted in place."""
    schema = msgspec.json.schema(tp)
    defs = schema.pop("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str):
                return resolve(defs[ref.rsplit("/", 1)[1]])
            return {k: resolve(v) for k, v in node.items()}
        if isinstance(node, list | tuple):  # a tuple default (`= ()`) is a JSON array
            return [resolve(v) for v in node]
        return node

    resolved: dict[str, Any] = resolve(schema)
    return resolved
