"""`[replicate]` in reynd.toml: where to ship the WAL, and how often."""

from __future__ import annotations

from typing import Annotated

import msgspec

from reynd.replication.objects import Location, parse_url

__all__ = ["ReplicateConfig"]


class ReplicateConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Off by default. Credentials never go here: the standard AWS chain provides them."""

    # s3://BUCKET/PREFIX; absent: no replication.
    url: str | None = None
    # For R2, MinIO, Garage...: the store's endpoint URL (else $AWS_ENDPOINT_URL, else AWS).
    endpoint: str | None = None
    region: str | None = None
    # The open tail is shipped at most this often: the recovery point when the
    # machine is lost (docs/operations.md).
    interval_s: Annotated[float, msgspec.Meta(ge=0.05, le=3600)] = 1.0
    # One request's connect and read timeout.
    timeout_s: Annotated[float, msgspec.Meta(gt=0, le=600)] = 10.0

    def location(self) -> Location | None:
        """The parsed url; ValueError naming what is wrong with it."""
        return parse_url(self.url) if self.url else None
