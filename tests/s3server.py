"""A real S3-compatible HTTP server on loopback (moto's server mode), and a proxy that breaks it.

`MotoServer` runs `python -m moto.server` as a subprocess: pause it
(SIGSTOP) for a store that stops answering. `FaultyProxy` sits between the
daemon and the server and plays the other faults the way a client sees
them: `down()` (connection refused, as when the store is killed), `errors()`
(every request answered 500 InternalError), `up()` (passes everything).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any, Literal

from tests.runtime_helpers import wait_until

CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


class MotoServer:
    def __init__(self, *, unchecked_requests: int | None = None) -> None:
        """`unchecked_requests`: after that many requests, check credentials (IAM)."""
        self.port = free_port()
        env = {**os.environ, **CREDENTIALS}
        if unchecked_requests is not None:
            env["INITIAL_NO_AUTH_ACTION_COUNT"] = str(unchecked_requests)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        wait_until(lambda: _answers(self.port) or None, "moto's server to listen")
        self.url = f"http://127.0.0.1:{self.port}"

    def client(self) -> Any:
        import boto3

        return boto3.session.Session(
            aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1"
        ).client("s3", endpoint_url=self.url)

    def create_bucket(self, name: str) -> None:
        self.client().create_bucket(Bucket=name)

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        client = self.client()
        out: list[str] = []
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            out += [o["Key"] for o in page.get("Contents", ())]
        return out

    def pause(self) -> None:
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        self.resume()
        self.proc.kill()
        self.proc.wait()


Mode = Literal["up", "down", "errors"]

_ERROR = (
    b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/xml\r\n"
    b"Connection: close\r\nContent-Length: %d\r\n\r\n%b"
)
_ERROR_BODY = (
    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>InternalError</Code>'
    b"<Message>We encountered an internal error. Please try again.</Message></Error>"
)


class FaultyProxy:
    """TCP proxy on a fixed loopback port in front of `upstream`."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.mode: Mode = "down"
        self._listener: socket.socket | None = None
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()
        self.up()

    def up(self) -> None:
        self._set("up")

    def errors(self) -> None:
        """Answer every request with 500 InternalError (kept-alive connections are cut)."""
        self._set("errors")
        self._cut()

    def down(self) -> None:
        """Refuse connections and cut the open ones, as a store that was killed."""
        with self._lock:
            self.mode = "down"
            if self._listener is not None:
                self._listener.close()
                self._listener = None
        self._cut()

    def _cut(self) -> None:
        with self._lock:
            for conn in self._conns:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
                conn.close()
            self._conns.clear()

    def close(self) -> None:
        self.down()

    def _set(self, mode: Mode) -> None:
        with self._lock:
            self.mode = mode
            if self._listener is None:
                listener = socket.socket()
                listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                listener.bind(("127.0.0.1", self.port))
                listener.listen(64)
                self._listener = listener
                threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return  # closed by down()
            with self._lock:
                if self._listener is not listener:
                    conn.close()
                    return
                self._conns.add(conn)
                mode = self.mode
            target = self._serve_error if mode == "errors" else self._pass
            threading.Thread(target=target, args=(conn,), daemon=True).start()

    def _serve_error(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError):
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                data += chunk
            conn.sendall(_ERROR % (len(_ERROR_BODY), _ERROR_BODY))
        self._forget(conn)

    def _pass(self, conn: socket.socket) -> None:
        try:
            up = socket.create_connection(("127.0.0.1", self.upstream))
        except OSError:
            self._forget(conn)
            return
        with self._lock:
            self._conns.add(up)
        threading.Thread(target=_pump, args=(up, conn, self), daemon=True).start()
        _pump(conn, up, self)

    def _forget(self, conn: socket.socket) -> None:
        with self._lock:
            self._conns.discard(conn)
        conn.close()


def _pump(src: socket.socket, dst: socket.socket, proxy: FaultyProxy) -> None:
    try:
        while chunk := src.recv(65536):
            dst.sendall(chunk)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
        proxy._forget(src)


@contextlib.contextmanager
def moto(*, unchecked_requests: int | None = None) -> Iterator[MotoServer]:
    server = MotoServer(unchecked_requests=unchecked_requests)
    try:
        yield server
    finally:
        server.stop()
