"""`reynctl web` in a real headless Chromium against a real daemon (issue 26).

One browser and one daemon for the module (a browser start costs seconds).
Chromium and its driver are Debian's (`chromium`, `chromium-driver`); without
them these tests fail, saying what to install, rather than pass silently.
Waits are WebDriverWait conditions on what the page shows, never sleeps.

REYND_UPDATE_SCREENSHOT=1 writes docs/web.png (the screenshot docs/web.md shows).
"""

from __future__ import annotations

import os
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from tests.harness import Daemon, short_tempdir, start_daemon
from tests.web_helpers import CHROMEDRIVER, CHROMIUM, Web, chromium, web_server

WAIT = 20.0
SCREENSHOT = Path(__file__).resolve().parent.parent / "docs" / "web.png"


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if missing:
        pytest.fail(
            f"no {' and no '.join(missing)}: these tests need a real browser; "
            "run `apt-get install chromium chromium-driver` (.ci/run does)"
        )
    with tempfile.TemporaryDirectory(prefix="reynd-chromium-") as profile:
        driver = chromium(profile)
        try:
            yield driver
        finally:
            driver.quit()


class Run:
    """The module's daemon (restartable on the same state) and its web server."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.daemon = start_daemon(workdir)

    def restart(self) -> None:
        self.daemon = start_daemon(self.workdir)


@pytest.fixture(scope="module")
def run() -> Iterator[Run]:
    with short_tempdir() as path:
        r = Run(path)
        d = r.daemon
        d.call("agents.create", {"name": "ada"})
        for text in ("first question", "second question", "third question"):
            d.call("agents.send", {"agent": "ada", "text": text, "wait": True})
        try:
            yield r
        finally:
            r.daemon.stop(expect=None)


@pytest.fixture(scope="module")
def web(run: Run) -> Iterator[Web]:
    with web_server(run.daemon.socket) as server:
        yield server


def until(driver: WebDriver, cond: Callable[[WebDriver], Any], what: str) -> Any:
    try:
        return WebDriverWait(driver, WAIT).until(cond)
    except TimeoutException:
        shown = driver.execute_script("return document.body.innerText")
        raise AssertionError(f"the page never showed {what}; it shows:\n{shown}") from None


def rows(driver: WebDriver) -> list[dict[str, Any]]:
    """The timeline rows in the DOM: seq, classes and text."""
    script = (
        "return [...document.querySelectorAll('#window .row')].map("
        "r => ({seq: +r.dataset.seq, cls: r.className, text: r.innerText}))"
    )
    result: list[dict[str, Any]] = driver.execute_script(script)
    return result


def here(driver: WebDriver) -> dict[str, Any] | None:
    return next((r for r in rows(driver) if "you are here" in r["text"]), None)


def turns(daemon: Daemon) -> list[int]:
    gens = daemon.call("generations.list", {"limit": 100})["generations"]
    return sorted(g["seq"] for g in gens)


def test_the_page_loads_with_the_token_and_is_refused_without(
    browser: WebDriver, web: Web, run: Run
) -> None:
    browser.get(web.origin + "/")
    assert "no valid token" in browser.find_element(By.TAG_NAME, "body").text
    browser.get(web.url)
    head = run.daemon.call("daemon.status")["head"]
    mark = until(browser, here, "the tip")
    assert mark["seq"] == head
    assert "token" not in browser.current_url  # the cookie carries it from now on
    assert until(browser, lambda d: "head" in d.find_element(By.ID, "status").text, "status")
    svg_dots = browser.find_elements(By.CSS_SELECTOR, "#window svg circle")
    assert len(svg_dots) == len(rows(browser)) == len(turns(run.daemon)) + 1  # + genesis
    # Usable at a phone's width: nothing wider than the screen.
    browser.set_window_size(390, 844)
    try:
        overflow = browser.execute_script(
            "return document.documentElement.scrollWidth - window.innerWidth"
        )
        assert overflow <= 0
    finally:
        browser.set_window_size(1280, 800)


def test_a_click_rewinds_and_the_tree_redraws(browser: WebDriver, web: Web, run: Run) -> None:
    first, second, third = turns(run.daemon)
    browser.get(web.url)
    until(browser, here, "the tip")
    # Rows are redrawn on every update: click the one there is now.
    browser.execute_script(f"document.querySelector('#window .row[data-seq=\"{first}\"]').click()")
    until(browser, lambda d: d.find_element(By.ID, "do-rewind").is_enabled(), "Rewind enabled")
    # The detail's diff to the tip reads as a conversation: the turns after `first`.
    diff = until(
        browser,
        lambda d: (t := d.find_element(By.ID, "diff").text) and "+ user" in t and t,
        "the conversation diff",
    )
    assert "ada: 0 message(s) only as of" in diff
    assert "second question" in diff and "third question" in diff
    assert "first question" not in diff  # shared: not a difference
    browser.find_element(By.ID, "do-rewind").click()
    dialog = until(browser, lambda d: d.find_element(By.ID, "confirm"), "the confirm")
    until(browser, lambda d: dialog.is_displayed(), "the confirm dialog")
    text = dialog.text
    assert f"The tip moves from {third} to the state as of {first}" in text
    assert "change(s) to the agents' state" in text
    browser.find_element(By.ID, "reason").send_keys("from the browser")
    browser.find_element(By.ID, "confirm-ok").click()
    mark = until(browser, lambda d: (h := here(d)) and "rewind" in h["text"] and h, "the reset")
    assert f"rewind → {first}" in mark["text"]
    assert "from the browser" in mark["text"]
    status = run.daemon.call("daemon.status")
    assert mark["seq"] == status["head"]
    abandoned = {r["seq"] for r in rows(browser) if "abandoned" in r["cls"]}
    assert {second, third} <= abandoned
    if os.environ.get("REYND_UPDATE_SCREENSHOT") == "1":
        browser.save_screenshot(str(SCREENSHOT))


def _selected(browser: WebDriver) -> str | None:
    """The selected row's seq, read in one step: the rows are redrawn on every reload."""
    seq: str | None = browser.execute_script(
        "const r = document.querySelector('#window .row.sel'); return r && r.dataset.seq"
    )
    return seq


def test_another_clients_write_appears_live(browser: WebDriver, web: Web, run: Run) -> None:
    browser.get(web.url)
    until(browser, here, "the tip")
    # Select a row with the keyboard; the live update must keep it selected.
    browser.find_element(By.ID, "timeline").send_keys("j")
    chosen = until(browser, _selected, "a selection")
    run.daemon.call("agents.send", {"agent": "ada", "text": "written elsewhere", "wait": True})
    head = run.daemon.call("daemon.status")["head"]
    mark = until(browser, lambda d: (h := here(d)) and h["seq"] == head and h, "the new turn")
    assert "written elsewhere" in mark["text"]
    assert _selected(browser) == chosen


def test_a_message_sent_from_the_page_runs_a_turn(browser: WebDriver, web: Web, run: Run) -> None:
    browser.get(web.url)
    until(browser, here, "the tip")
    box = browser.find_element(By.ID, "message")
    box.send_keys("sent from the page")
    box.submit()
    # Selected at the tip, the page follows it: the new turn is the one shown.
    mark = until(
        browser, lambda d: (h := here(d)) and "sent from the page" in h["text"] and h, "the turn"
    )
    assert mark["seq"] == run.daemon.call("daemon.status")["head"]
    said = until(
        browser,
        lambda d: "You said: 'sent from the page'" in d.find_element(By.ID, "conversation").text,
        "the reply in the conversation",
    )
    assert said


def test_a_question_is_answered_from_the_page(browser: WebDriver, web: Web, run: Run) -> None:
    asked = {"intervention_id": "q1", "question": "deploy to staging?"}
    run.daemon.call("wal.append", {"agent": "ada", "kind": "intervention.asked", "data": asked})
    browser.get(web.url)
    box = until(
        browser,
        lambda d: d.find_elements(
            By.CSS_SELECTOR, 'input[aria-label="answer to deploy to staging?"]'
        ),
        "the question",
    )[0]
    box.send_keys("yes, go")
    box.submit()
    until(
        browser,
        lambda d: not d.find_elements(By.CSS_SELECTOR, "#questions form"),
        "the question answered",
    )
    assert run.daemon.call("interventions.list")["interventions"] == []
    state = run.daemon.call("state.get", {"agent": "ada"})["agents"]["ada"]
    assert "q1" not in state["interventions"]


class _Attacker(BaseHTTPRequestHandler):
    """Another origin's page: a form that posts a rewind to the web server at once."""

    target = ""

    def do_GET(self) -> None:
        page = (
            "<!doctype html><body><form id=f method=POST enctype=text/plain "
            f'action="{self.target}/api/call/rewind">'
            '<input name=\'{"seq": 0, "x": "\' value=\'"}\'></form>'
            "<script>document.getElementById('f').submit()</script></body>"
        ).encode()
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(page)))
        self.end_headers()
        self.wfile.write(page)

    def log_message(self, *args: Any) -> None:
        pass


def test_a_forged_cross_site_post_is_refused(browser: WebDriver, web: Web, run: Run) -> None:
    browser.get(web.url)  # the browser holds the cookie: the forgery would ride on it
    until(browser, here, "the tip")
    before = run.daemon.call("daemon.status")["head"]
    _Attacker.target = web.origin
    evil = ThreadingHTTPServer(("127.0.0.1", 0), _Attacker)
    thread = threading.Thread(target=evil.serve_forever, daemon=True)
    thread.start()
    try:
        browser.get(f"http://127.0.0.1:{evil.server_address[1]}/")
        body = until(
            browser,
            lambda d: "refused" in (t := d.execute_script("return document.body.innerText")) and t,
            "the refusal",
        )
        assert "cross-origin write" in body
    finally:
        evil.shutdown()
        evil.server_close()
    assert run.daemon.call("daemon.status")["head"] == before


def test_a_lost_daemon_shows_a_banner_and_reconnects(
    browser: WebDriver, web: Web, run: Run
) -> None:
    browser.get(web.url)
    until(browser, here, "the tip")
    run.daemon.stop(signal.SIGKILL, expect=None)
    banner = browser.find_element(By.ID, "lost")
    until(browser, lambda d: banner.is_displayed(), "the lost-daemon banner")
    assert "daemon is lost" in banner.text
    run.restart()
    until(browser, lambda d: not banner.is_displayed(), "the banner gone")
    head = run.daemon.call("daemon.status")["head"]
    assert until(browser, lambda d: (h := here(d)) and h["seq"] == head, "the tip again")
