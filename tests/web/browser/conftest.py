"""Browser fixtures: Debian's Chromium driven by Playwright against a real `mailroom serve`.

* ``chromium`` (session): one headless Chromium (``/usr/bin/chromium``, installed by
  ``scripts/test-services.sh``; never ``playwright install``). Missing, it fails
  under CI=true and skips elsewhere.
* ``served``: ``mailroom serve`` as a subprocess (the engine's jobs included) over
  the test's store — SQLite and PostgreSQL, through the ``store`` fixture — on
  a free port, with its own data dir and a free submission port. At the end it
  is stopped with SIGINT and must have logged no traceback. Starting it takes
  seconds on a busy machine, so:
* ``site``: the base URL the browser opens. By default the same application
  under uvicorn in this process (``tests.jmap.conftest.serve``: no jobs, fast
  to start); a test module that must run against the real ``mailroom serve``
  overrides it: ``@pytest.fixture def site(served: Served) -> str: return served.base``.
* ``mail``: the store seeded with the user ``me`` (password :data:`PASSWORD`), an
  account and one message in every inbox tab (:func:`tests.web.seeding.seed`).
* ``page``: a fresh browser context signed in as ``me`` on the Inbox. Every page
  the context opens records JavaScript dialogs, page errors and CSP
  violations in ``watch.problems`` (:class:`Watch`); a test that must see none
  asserts ``watch.problems == []``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Dialog, Page, expect, sync_playwright

from mailroom.jmap.app import JmapConfig
from mailroom.store.engine import Store
from mailroom.web.app import create_app
from tests.conftest import service_missing
from tests.jmap.conftest import free_port, serve
from tests.web.conftest import PASSWORD
from tests.web.seeding import seed

CHROMIUM = Path(os.environ.get("MAILROOM_TEST_CHROMIUM", "/usr/bin/chromium"))
START_SECONDS = 60  # how long `mailroom serve` may take to answer /health on a busy machine


@dataclass
class Served:
    """A running `mailroom serve`."""

    base: str
    process: subprocess.Popen[str]
    data_dir: Path


def _store_url(store: Store) -> str:
    return store.engine.url.render_as_string(hide_password=False)


def _wait_until_up(base: str, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            _, err = process.communicate()
            pytest.fail(f"mailroom serve stopped before it answered: {err[-2000:]}")
        try:
            if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    pytest.fail(f"mailroom serve did not answer {base}/health within {START_SECONDS} s")


def serve_store(store: Store, directory: Path, *args: str) -> Iterator[Served]:
    """Run `mailroom serve ARGS` over ``store`` until the generator is closed."""
    port = free_port()
    data_dir = directory / "serve-data"
    data_dir.mkdir(exist_ok=True)
    env = {
        **{key: value for key, value in os.environ.items() if not key.startswith("MAILROOM_")},
        "MAILROOM_DATA_DIR": str(data_dir),
        "MAILROOM_DATABASE_URL": _store_url(store),
        "MAILROOM_SUBMISSION_LISTEN": f"127.0.0.1:{free_port()}",
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "mailroom", "serve", "--port", str(port), *args],
        cwd=directory,  # not the checkout: its .env must not point at another store
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(base, process)
        yield Served(base, process, data_dir)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
        try:
            _, err = process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            _, err = process.communicate()
            pytest.fail("mailroom serve did not stop within 30 s of SIGINT")
    assert "Traceback" not in err, err[-4000:]


@pytest.fixture
def mail(store: Store) -> tuple[int, int, int]:
    """The seeded store (see :func:`tests.web.seeding.seed`)."""
    return seed(store)


@pytest.fixture
def served(store: Store, mail: tuple[int, int, int], tmp_path: Path) -> Iterator[Served]:
    """`mailroom serve` over the seeded store."""
    yield from serve_store(store, tmp_path)


@pytest.fixture
def site(store: Store, mail: tuple[int, int, int]) -> Iterator[str]:
    """The seeded store's web application under uvicorn in this process."""
    yield from serve(create_app(store, jmap=JmapConfig(poll_interval=0.05)))


@pytest.fixture(scope="session")
def chromium() -> Iterator[Browser]:
    """Debian's headless Chromium under Playwright, for the whole session."""
    if not CHROMIUM.is_file():
        service_missing("Chromium", f"{CHROMIUM} is missing; scripts/test-services.sh installs it")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM))
        yield browser
        browser.close()


@dataclass
class Watch:
    """What went wrong in a context's pages: dialogs, page errors, CSP violations."""

    problems: list[str] = field(default_factory=list)

    def attach(self, page: Page) -> None:
        """Record ``page``'s dialogs (dismissing them), uncaught errors and CSP reports."""

        def on_dialog(dialog: Dialog) -> None:
            self.problems.append(f"dialog {dialog.type}: {dialog.message}")
            dialog.dismiss()

        page.on("dialog", on_dialog)
        page.on("pageerror", lambda error: self.problems.append(f"page error: {error}"))
        page.on(
            "console",
            lambda message: (
                self.problems.append(f"console: {message.text}")
                if "Content Security Policy" in message.text
                else None
            ),
        )


@pytest.fixture
def watch() -> Watch:
    """The problems the test's browser pages ran into."""
    return Watch()


# Assertions wait as long as page actions do (Playwright's own default is 5 s, too short
# for a page answering on a loaded 2-core machine); nothing here waits when the page is ready.
WAIT_MS = 15_000
expect.set_options(timeout=WAIT_MS)


@pytest.fixture
def context(chromium: Browser, site: str, watch: Watch) -> Iterator[BrowserContext]:
    """A fresh browser context (no cookies) on ``site``, watched."""
    opened = chromium.new_context(base_url=site)
    opened.set_default_timeout(WAIT_MS)
    opened.on("page", watch.attach)
    yield opened
    opened.close()


def sign_in(page: Page, name: str = "me", password: str = PASSWORD) -> None:
    """Fill and send the sign-in form the page shows."""
    page.get_by_label("User name").fill(name)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()


@pytest.fixture
def page(context: BrowserContext) -> Page:
    """A page signed in as ``me``, on the Inbox."""
    opened = context.new_page()
    opened.goto("/")
    sign_in(opened)
    opened.wait_for_url(lambda url: url.endswith("/"))
    return opened
