"""`reynctl web` as a subprocess against a real daemon, and plain HTTP to it.

The server's first stdout line is its URL (the readiness signal: it is printed
once the socket listens, so no polling). Requests go through http.client, so
every header (Host, Origin, Sec-Fetch-Site, Cookie) is exactly what the test
says, as a hostile page or a DNS-rebinding attack would send it.
"""

from __future__ import annotations

import http.client
import json
import re
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from tests.harness import READY_TIMEOUT

if TYPE_CHECKING:
    from selenium.webdriver import Chrome

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")


@dataclass
class Web:
    """A running `reynctl web`: its URL, token, origin and process."""

    proc: subprocess.Popen[str]
    url: str

    @property
    def token(self) -> str:
        return self.url.split("token=", 1)[1]

    @property
    def origin(self) -> str:
        return self.url.split("/?", 1)[0]

    @property
    def host(self) -> str:
        return urlsplit(self.url).netloc

    @property
    def cookie(self) -> str:
        return f"reynd-web-{urlsplit(self.url).port}={self.token}"

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, bytes, dict[str, str]]:
        """One request; `headers` replace the defaults (Host and the cookie)."""
        parts = urlsplit(self.url)
        conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=READY_TIMEOUT)
        sent = {"Host": self.host, "Cookie": self.cookie}
        sent.update(headers or {})
        data = None if body is None else json.dumps(body).encode()
        if data is not None:
            sent.setdefault("Content-Type", "application/json")
            sent["Content-Length"] = str(len(data))
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for k, v in sent.items():
            if v is not None:
                conn.putheader(k, v)
        conn.endheaders(data)
        resp = conn.getresponse()
        out = resp.status, resp.read(), {k.lower(): v for k, v in resp.getheaders()}
        conn.close()
        return out

    def csrf(self) -> str:
        """The CSRF value, read from the page as the page's own script reads it."""
        status, page, _ = self.request("GET", "/")
        assert status == 200, page
        found = re.search(rb'<meta name="csrf" content="([0-9a-f]+)">', page)
        assert found is not None, page
        return found.group(1).decode()

    def post(self, method: str, params: Any, **headers: str) -> tuple[int, Any]:
        """A write as the page makes it (same origin, CSRF header); `headers` override."""
        sent = {"Origin": self.origin, "X-Reynd-CSRF": self.csrf(), **headers}
        status, body, _ = self.request("POST", f"/api/call/{method}", params, sent)
        return status, json.loads(body) if body.startswith(b"{") else body.decode()


@contextmanager
def web_server(socket: Path, args: Sequence[str] = ()) -> Iterator[Web]:
    """Start `reynctl web --no-open` on `socket`; stopped (SIGTERM) on exit."""
    cmd = [sys.executable, "-m", "reynctl", "--socket", str(socket), "web", "--no-open", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        if not url.startswith("http://"):
            proc.kill()
            raise AssertionError(f"reynctl web printed {url!r}; stderr: {proc.communicate()[1]}")
        yield Web(proc, url)
    finally:
        proc.terminate()
        try:
            proc.wait(READY_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise AssertionError("reynctl web did not stop on SIGTERM") from None
        finally:
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()


def chromium(profile: str) -> Chrome:
    """Debian's headless Chromium through its driver, a new profile in `profile`: the flags
    keep it off this machine's closed network (it would retry Google's hosts)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1280,800",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    return webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
