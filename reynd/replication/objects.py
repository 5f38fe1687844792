"""An S3-compatible bucket prefix, through boto3 (blocking: callers run it on a worker thread).

boto3 because it is the reference client: the standard AWS credential chain
(environment, shared config and credentials files, SSO, instance and
container roles), `AWS_ENDPOINT_URL` and the `IfNoneMatch` conditional put
that create-once writes need, and it speaks to R2, MinIO and Garage through
`endpoint_url`. Errors are sorted into three kinds a caller acts on:
`Refused` (credentials, permissions, a missing bucket: an operator must act),
`Unavailable` (anything that may pass by retrying) and `Exists`.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

__all__ = ["Bucket", "Exists", "Location", "Missing", "Refused", "Unavailable", "parse_url"]


class Refused(Exception):
    """The store refused us for a reason retrying will not fix; the message says what to do."""


class Unavailable(Exception):
    """The store did not answer or failed (network, timeout, 5xx, throttling): retry later."""


class Exists(Exception):
    """A create-once write found the key already there."""


class Missing(Exception):
    """The object does not exist."""


@dataclass(frozen=True, slots=True)
class Location:
    bucket: str
    prefix: str  # "" or ending with "/"

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"


def parse_url(url: str) -> Location:
    """`s3://bucket/some/prefix` -> Location; ValueError naming what is wrong."""
    parts = urlsplit(url)
    if parts.scheme != "s3":
        raise ValueError(f"{url!r}: expected s3://BUCKET/PREFIX")
    if not parts.netloc:
        raise ValueError(f"{url!r}: no bucket (expected s3://BUCKET/PREFIX)")
    if parts.query or parts.fragment:
        raise ValueError(f"{url!r}: no query or fragment allowed")
    prefix = parts.path.strip("/")
    return Location(parts.netloc, f"{prefix}/" if prefix else "")


# Error codes that mean "an operator must fix something", not "try again".
_REFUSED = {
    "AccessDenied": "access denied: check the credentials and the bucket policy",
    "InvalidAccessKeyId": "the access key is not known to the store: check the credentials",
    "SignatureDoesNotMatch": "the secret key does not match: check the credentials",
    "NoSuchBucket": "no such bucket: create it first, or fix the URL",
    "ExpiredToken": "the credentials expired: renew them",
    "InvalidToken": "the session token is invalid: renew the credentials",
    "AllAccessDisabled": "all access to this bucket is disabled",
    "PermanentRedirect": "the bucket is in another region: set region",
    "AuthorizationHeaderMalformed": "the region does not match the bucket's: set region",
}


class Bucket:
    """One prefix of one bucket; keys given to its methods are relative to the prefix."""

    def __init__(
        self,
        location: Location,
        *,
        endpoint: str | None = None,
        region: str | None = None,
        timeout_s: float = 10.0,
    ) -> None:
        try:
            import boto3
            from botocore.config import Config
        except ImportError:
            raise Refused(
                "replication needs boto3: install it with `pip install 'reynd[replicate]'`"
            ) from None

        self.location = location
        config = Config(
            connect_timeout=timeout_s,
            read_timeout=timeout_s,
            retries={"max_attempts": 1},  # the shipper retries on its own schedule
            region_name=region,
        )
        self._s3: Any = boto3.session.Session().client("s3", endpoint_url=endpoint, config=config)

    def _key(self, key: str) -> str:
        return self.location.prefix + key

    def check(self) -> None:
        """Reach the bucket once (HeadBucket): Refused or Unavailable with a clear reason."""
        self._call(self._s3.head_bucket, Bucket=self.location.bucket)

    def put_new(self, key: str, data: bytes) -> None:
        """Create `key` holding `data` unless it exists (Exists); checked in transit (MD5)."""
        md5 = base64.b64encode(hashlib.md5(data, usedforsecurity=False).digest()).decode()
        self._call(
            self._s3.put_object,
            Bucket=self.location.bucket,
            Key=self._key(key),
            Body=data,
            ContentMD5=md5,
            IfNoneMatch="*",
        )

    def get(self, key: str) -> bytes:
        reply = self._call(self._s3.get_object, Bucket=self.location.bucket, Key=self._key(key))
        try:
            data: bytes = reply["Body"].read()
        except Exception as exc:  # the connection broke mid-body
            raise Unavailable(f"reading {self.location}{key}: {exc}") from exc
        return data

    def exists(self, key: str) -> bool:
        try:
            self._call(self._s3.head_object, Bucket=self.location.bucket, Key=self._key(key))
        except Missing:
            return False
        return True

    def list_keys(self, under: str = "") -> Iterator[str]:
        """Keys below `under` (relative to the prefix), in the store's order (lexicographic)."""
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {
                "Bucket": self.location.bucket,
                "Prefix": self._key(under),
            }
            if token:
                kwargs["ContinuationToken"] = token
            page = self._call(self._s3.list_objects_v2, **kwargs)
            for item in page.get("Contents", ()):
                yield item["Key"][len(self.location.prefix) :]
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                return

    def delete(self, keys: list[str]) -> None:
        for i in range(0, len(keys), 1000):  # DeleteObjects takes at most 1000
            objects = [{"Key": self._key(k)} for k in keys[i : i + 1000]]
            self._call(
                self._s3.delete_objects,
                Bucket=self.location.bucket,
                Delete={"Objects": objects, "Quiet": True},
            )

    def _call(self, method: Any, **kwargs: Any) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

        what = f"{self.location}{kwargs.get('Key', '')[len(self.location.prefix) :]}"
        try:
            return method(**kwargs)
        except NoCredentialsError:
            raise Refused(
                f"{self.location}: no credentials found: set AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY, or AWS_PROFILE, or run where a role provides them"
            ) from None
        except ClientError as exc:
            error = exc.response.get("Error", {})
            code = str(error.get("Code", ""))
            status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
            if code in ("PreconditionFailed", "412") or status == 412:
                raise Exists(what) from None
            if code in ("NoSuchKey", "404", "NotFound") and "Key" in kwargs:
                raise Missing(what) from None
            if code in _REFUSED:
                raise Refused(f"{what}: {_REFUSED[code]}") from None
            if status in (403, 404) and "Key" not in kwargs:  # HEAD: no error body
                reason = (
                    "no such bucket: create it first, or fix the URL"
                    if status == 404
                    else "access denied: check the credentials and the bucket policy"
                )
                raise Refused(f"{self.location}: {reason} (HTTP {status})") from None
            raise Unavailable(f"{what}: {code or status} {error.get('Message', '')}") from exc
        except BotoCoreError as exc:  # connection refused, timeouts, bad endpoint URL...
            raise Unavailable(f"{what}: {exc}") from exc
