"""A read's reply at the tip, encoded once per head.

Every change of the tip's state is a record, and every record moves the head
(a reset record too), so the same head means the same state: the encoded
reply can be served again until the head moves. For `state.get` of a state
of some kilobytes, encoding is a large part of the request's cost.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

__all__ = ["TipReply"]

_ENCODER = msgspec.json.Encoder()


class TipReply:
    """The last encoded reply and the head it was made at (trio thread only)."""

    __slots__ = ("_head", "_raw")

    def __init__(self) -> None:
        self._head = -1
        self._raw = msgspec.Raw()

    def get(self, head: int, make: Callable[[], Any]) -> msgspec.Raw:
        """The reply at `head`: the one kept, or `make()` encoded and kept."""
        if head != self._head:
            # Encode before keeping: an unencodable result keeps nothing.
            self._raw = msgspec.Raw(_ENCODER.encode(make()))
            self._head = head
        return self._raw
