"""``mailroom send`` wakes the engine's lane job through the shared queues, like retry does."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from sqlalchemy import select

from mailroom.cli.main import cli
from mailroom.jobs.queues import make_queues
from mailroom.outbound.sender import Sender
from mailroom.store.engine import Store
from mailroom.store.models import Account
from tests.outbound.core_support import sending_settings, subjects
from tests.outbound.port_support import add_people
from tests.support.smtp_sink import SmtpSink


def test_send_enqueues_its_lane_job_and_the_lane_sends_it(
    store: Store, sink: SmtpSink, tmp_path: Path
) -> None:
    """After `mailroom send --lane direct` the direct queue holds one job; the lane sends it."""
    add_people(store)
    with store.session() as session:
        work = session.scalars(select(Account).where(Account.name == "work")).one()
        smtp = {"host": sink.host, "port": sink.port, "security": "none", "login": None}
        work.settings = {**(work.settings or {}), "smtp": smtp}
    settings = sending_settings(tmp_path)
    queues = make_queues(settings)
    assert queues["send_direct"].pending_count() == 0
    url = store.engine.url.render_as_string(hide_password=False)
    done = CliRunner().invoke(
        cli,
        ["--data-dir", str(tmp_path), "--database-url", url, "send", "--owner", "me"]
        + ["--to", "bob@example.net", "--subject", "woken", "--lane", "direct"],
        input=b"Hello Bob.\n",
    )
    assert done.exit_code == 0, done.output
    assert queues["send_direct"].pending_count() == 1
    assert queues["send_calm"].pending_count() == 0
    sender = Sender(store, settings)
    try:
        assert sender.run_lane("direct") == 1
    finally:
        sender.close()
    assert subjects(sink) == ["woken"]
