"""Screenshots of the web app for docs/screenshots/ (and the README).

    .venv/bin/python scripts/screenshots.py [--out docs/screenshots] [--chromium /usr/bin/chromium]

Builds a demo store in a temporary directory — the sample corpus
(``samples/demo-maildir``, 446 messages) imported for the user ``demo``, its newest
Inbox threads marked unread and a few starred, through the operations service —
runs ``mailroom serve`` over it, signs in with Debian's Chromium under Playwright
and saves one PNG per page: the Inbox with its tabs, a thread, a search, the
accounts page, compose, and the Inbox at phone width. A page the app does not have
(yet) is left out with a note; nothing outside ``--out`` is written.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
from playwright.sync_api import Page, sync_playwright

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples" / "demo-maildir"
USER, PASSWORD = "demo", "demo-password-for-screenshots"
DESKTOP = {"width": 1280, "height": 860}
PHONE = {"width": 390, "height": 844}
UNREAD_THREADS, STARRED_THREADS = 14, 4


@dataclass(frozen=True)
class Shot:
    """One screenshot: its file name, the page and the window size."""

    name: str
    path: str
    viewport: dict[str, int]
    caption: str


def free_port() -> int:
    """A free TCP port on loopback."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def build_store(url: str) -> tuple[int, str]:
    """Import the sample corpus for ``demo``; a thread with several messages and a
    frequent sender's address (for the thread and search shots)."""
    from sqlalchemy import func, select

    from mailroom.jmap.auth import set_password
    from mailroom.labels.operations import Operations
    from mailroom.labels.resolver import system_label
    from mailroom.owners import get_user
    from mailroom.providers.local import import_path
    from mailroom.store import open_store
    from mailroom.store.models import Account, Message, ThreadLabel

    store = open_store(url)
    try:
        summary = import_path(store, SAMPLES, owner=USER, account="demo")
        print(f"demo store: {summary.line()}", file=sys.stderr)
        with store.session() as session:
            set_password(session, USER, PASSWORD)
            user = get_user(session, USER)
            inbox = system_label(session, user.id, "inbox").id
            newest = (
                select(Message.thread_id)
                .join(ThreadLabel, ThreadLabel.thread_id == Message.thread_id)
                .where(ThreadLabel.label_id == inbox, Message.user_id == user.id)
                .group_by(Message.thread_id)
            )
            recent = list(
                session.scalars(
                    newest.order_by(func.max(Message.received_at).desc()).limit(UNREAD_THREADS)
                )
            )
            long = session.scalar(
                newest.having(func.count() >= 3)
                .order_by(func.max(Message.received_at).desc())
                .limit(1)
            )
            sender = session.scalar(
                select(Message.from_email)
                .where(Message.user_id == user.id, Message.from_email != "")
                .group_by(Message.from_email)
                .order_by(func.count().desc())
                .limit(1)
            )
            # The compose shot shows a From line: the imported account gets the address a
            # connected account has (a local import names none, so it could not send).
            account = session.scalars(select(Account).where(Account.user_id == user.id)).one()
            account.settings = {**(account.settings or {}), "email": "me@example.org"}
            operations = Operations(session, user.id)
            operations.mark_read(operations.messages_of_threads(recent), read=False)
            operations.star(operations.messages_of_threads(recent[1 : 1 + STARRED_THREADS]))
        assert long is not None and sender is not None
        return long, sender
    finally:
        store.dispose()


def serve(url: str, data_dir: Path) -> tuple[subprocess.Popen[bytes], str]:
    """`mailroom serve` over the demo store, answering on a free port."""
    port = free_port()
    env = {
        **{key: value for key, value in os.environ.items() if not key.startswith("MAILROOM_")},
        "MAILROOM_DATA_DIR": str(data_dir),
        "MAILROOM_DATABASE_URL": url,
        "MAILROOM_SUBMISSION_LISTEN": f"127.0.0.1:{free_port()}",
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "mailroom", "serve", "--port", str(port)],
        cwd=data_dir,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit("mailroom serve stopped before it answered.")
        try:
            if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                return process, base
        except httpx.TransportError:
            pass
        time.sleep(0.3)
    process.kill()
    raise SystemExit("mailroom serve did not answer within 120 s.")


def sign_in(page: Page) -> None:
    """Sign in as the demo user through the form."""
    page.goto("/signin")
    page.get_by_label("User name").fill(USER)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(lambda url: not url.split("?")[0].endswith("/signin"))


def take(page: Page, shot: Shot, out: Path) -> bool:
    """Open the shot's page and save it; False if the app has no such page."""
    page.set_viewport_size(shot.viewport)
    answer = page.goto(shot.path)
    if answer is None or answer.status >= 400:
        print(f"skipped {shot.name}: {shot.path} answered {answer and answer.status}")
        return False
    # Not "networkidle": the live-update stream stays open. Let frames size themselves.
    page.wait_for_load_state("load")
    page.wait_for_timeout(700)
    page.screenshot(path=str(out / f"{shot.name}.png"))
    print(f"wrote {out / shot.name}.png ({shot.caption})")
    return True


def main() -> None:
    """Build the demo store, serve it and take the screenshots."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    parser.add_argument("--chromium", type=Path, default=Path("/usr/bin/chromium"))
    args = parser.parse_args()
    if not args.chromium.is_file():
        raise SystemExit(f"{args.chromium} is missing; install it with: apt-get install chromium")
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mailroom-screenshots-") as temp:
        url = f"sqlite:///{Path(temp) / 'demo.sqlite3'}"
        thread, sender = build_store(url)
        shots = [
            Shot("inbox", "/", DESKTOP, "the unified Inbox with its tabs"),
            Shot("thread", f"/threads/{thread}", DESKTOP, "a thread"),
            Shot("search", f"/search?q=from:{sender}", DESKTOP, f"search from:{sender}"),
            Shot("accounts", "/accounts", DESKTOP, "the accounts page"),
            Shot("compose", "/compose", DESKTOP, "compose"),
            Shot("phone", "/", PHONE, "the Inbox at phone width"),
        ]
        process, base = serve(url, Path(temp))
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=str(args.chromium))
                context = browser.new_context(base_url=base, viewport=DESKTOP)
                context.set_default_timeout(30_000)
                page = context.new_page()
                sign_in(page)
                taken = [shot.name for shot in shots if take(page, shot, args.out)]
                context.close()
                browser.close()
        finally:
            process.send_signal(signal.SIGINT)
            process.wait(timeout=60)
    print(f"{len(taken)} of {len(shots)} screenshots: {', '.join(taken)}")


if __name__ == "__main__":
    main()
