"""The hold figures as the admin sees them: `mailroom assistant` and the web admin page."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from sqlalchemy import select, update

from mailroom.assistant.stats import hold_stats
from mailroom.cli.main import cli
from mailroom.config import Settings
from mailroom.jmap.auth import Authenticator
from mailroom.store.engine import Store, open_store
from mailroom.store.models import Message, utcnow
from mailroom.web.app import create_app
from tests.jmap.conftest import serve
from tests.web.conftest import browser, sign_in
from tests.web.seeding import seed

HOLDS = [1.0, 2.0, 3.0, 60.0]  # seconds; the last two released before the verdict


def _record_holds(store: Store) -> None:
    """Give the first four stored messages these holds, and hold the fifth still."""
    now = utcnow()
    with store.session() as session:
        ids = list(session.scalars(select(Message.id).order_by(Message.id)))
        for message_id, seconds in zip(ids, HOLDS, strict=False):
            held = now - timedelta(minutes=5)
            released = held + timedelta(seconds=seconds)
            asked = released + timedelta(seconds=1) if seconds > 2.5 else released
            session.execute(
                update(Message)
                .where(Message.id == message_id)
                .values(category_held_at=held, category_released_at=released, assistant_at=asked)
            )
        session.execute(
            update(Message).where(Message.id == ids[len(HOLDS)]).values(category_held_at=now)
        )


def test_hold_stats_median_p95_and_share(store: Store) -> None:
    """Median and p95 are nearest-rank over released holds; the share counts holds the
    model had not answered when they ended; mail still held is counted apart."""
    seed(store)
    _record_holds(store)
    with store.session() as session:
        stats = hold_stats(session, utcnow())
    assert (stats.released, stats.held_now) == (4, 1)
    assert (stats.median_seconds, stats.p95_seconds) == (2.0, 60.0)
    assert stats.before_verdict == 2 and stats.before_verdict_share == 0.5


def _run(*args: str, data_dir: Path, **env: str) -> Result:
    return CliRunner().invoke(cli, list(args), env={"MAILROOM_DATA_DIR": str(data_dir), **env})


def test_the_cli_switches_owners_and_shows_the_figures(tmp_path: Path) -> None:
    """`assistant on/off` switch one owner, `assistant stats` prints the figures, and a bad
    MAILROOM_HOLD_MAX_SECONDS is one sentence, not a traceback."""
    data = tmp_path / "data"
    store = open_store(f"sqlite:///{data / 'mailroom.sqlite3'}", data)
    seed(store)
    _record_holds(store)
    store.dispose()
    on = _run("assistant", "on", "--owner", "me", data_dir=data, MAILROOM_ASSISTANT="offline")
    assert on.exit_code == 0, on.output
    assert on.stdout.strip() == "The assistant (offline) now sorts new mail of me."
    shown = _run("assistant", "stats", data_dir=data)
    assert "hold time: median 2.0 s, p95 60.0 s" in shown.stdout
    assert "released before the verdict: 2 (50%)" in shown.stdout
    figures = json.loads(_run("assistant", "stats", "--format", "json", data_dir=data).stdout)
    assert figures["heldNow"] == 1 and figures["holdMaxSeconds"] == 60
    off = _run("assistant", "off", "--owner", "me", data_dir=data)
    assert off.stdout.strip() == "The assistant is off for me."
    bad = _run("assistant", "stats", data_dir=data, MAILROOM_HOLD_MAX_SECONDS="500")
    assert bad.exit_code == 1 and "Traceback" not in bad.output
    assert bad.stderr.strip() == (
        "mailroom: The setting MAILROOM_HOLD_MAX_SECONDS is invalid (500 is not between 2 and "
        "300 seconds); fix it and try again."
    )


@pytest.fixture
def admin_base(store: Store, tmp_path: Path) -> Iterator[str]:
    """The web application with ``me`` as the operator and the offline model configured."""
    seed(store)
    settings = Settings(admins="me", assistant="offline", data_dir=tmp_path / "data")
    yield from serve(create_app(store, auth=Authenticator(store), settings=settings))


def test_the_admin_page_shows_the_hold_figures(store: Store, admin_base: str) -> None:
    """The admin page names the model and shows median, p95 and the share before the verdict."""
    with browser(admin_base) as client:
        assert sign_in(client, admin_base, "me").status_code == 303
        assert "No mail was held in the last 7 days." in client.get("/admin").text
        _record_holds(store)
        page = client.get("/admin").text
    assert "Model: <strong>offline</strong>" in page
    assert "<td>4</td><td>2.0 s</td><td>60.0 s</td><td>2 (50 %)</td><td>1</td>" in page
    # Once, in the page's content: not also inside <title> or <head>.
    assert page.count('id="assistant-heading"') == 1
    assert "<title>Admin — mailroom</title>" in page
