"""Events stored from mail on both stores: once per message and position, through the job."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import select

from mailroom.config import Settings
from mailroom.events.extract import backfill_events, extract_events
from mailroom.ingest import IncomingMessage, commit_batch
from mailroom.jobs.runtime import Runtime
from mailroom.store.engine import Store
from mailroom.store.models import MessageEvent
from tests.events.support import EXPECTED, event_count, sample_mail, store_samples
from tests.helpers import drain, make_account


def test_extraction_stores_each_samples_events_once(store: Store) -> None:
    """Each sample's events are stored with its message; running it again adds nothing."""
    _, ids = store_samples(store)
    extract_events(store, list(ids.values()))
    extract_events(store, list(ids.values()))
    with store.session() as session:
        rows = session.execute(
            select(MessageEvent.message_id, MessageEvent.kind, MessageEvent.summary)
        ).all()
    by_message = {name: [r for r in rows if r.message_id == mid] for name, mid in ids.items()}
    assert {name: len(found) for name, found in by_message.items()} == {**EXPECTED, "plain": 0}
    assert by_message["hotel"][0].summary == "Stay at Hotel Adlon Kempinski"
    assert {r.kind for r in rows} == {
        "FlightReservation",
        "LodgingReservation",
        "EventReservation",
        "ParcelDelivery",
    }


def test_backfill_finds_stored_mail_and_adds_nothing_twice(store: Store) -> None:
    """The backfill reads only mail with structured data and is idempotent."""
    account, _ = store_samples(store)
    first = backfill_events(store, account[0], chunk=2)
    again = backfill_events(store, account[0])
    assert (first.messages, first.events) == (4, sum(EXPECTED.values()))
    assert (again.messages, again.events) == (4, 0)
    assert event_count(store) == sum(EXPECTED.values())


def test_ingest_step_enqueues_and_the_follow_up_job_extracts(store: Store, tmp_path: Path) -> None:
    """Committing a batch stores no event; the follow-up job the step enqueued stores them."""
    user_id, account_id, inbox = make_account(store)
    runtime = Runtime(store, Settings(data_dir=tmp_path / "data"))
    try:
        items = [IncomingMessage("flight", sample_mail("airline"), label_ids=[inbox])]
        commit_batch(store, account_id, user_id, items)
        assert event_count(store) == 0  # the step only enqueued
        ran = sum(drain(runtime.queues[q]) for q in ("enrich_live", "enrich", "enrich_backlog"))
    finally:
        runtime.stop()
    assert ran == 1
    assert event_count(store) == 2


def test_backfill_command_reports_what_it_found(store: Store) -> None:
    """`mailroom backfill events` stores the events of stored mail, then finds nothing new."""
    from click.testing import CliRunner

    from mailroom.cli.main import cli

    store_samples(store)
    url = store.engine.url.render_as_string(hide_password=False)
    where = ["--data-dir", str(store.data_dir)] if store.data_dir else []
    args = [*where, "--database-url", url, "backfill", "events", "--owner", "me"]
    first = CliRunner().invoke(cli, args, catch_exceptions=False)
    again = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert first.output.strip() == "4 messages with structured data read; 5 new events."
    assert again.output.strip() == "4 messages with structured data read; 0 new events."


def test_control_characters_never_reach_the_store(store: Store) -> None:
    """NUL and other control characters in a sender's JSON-LD are dropped (PostgreSQL stores it)."""
    from tests.factories import make_message
    from tests.helpers import ingest

    html = (
        '<script type="application/ld+json">{"@type": "Event", "name": "A\\u0000B\\u001bC",'
        ' "startDate": "2027-01-01T10:00:00Z", "location": "Hall\\u0007 1"}</script>'
    )
    account = make_account(store)
    result = ingest(store, account, [("nul", make_message("nul@x", html=html))])
    extract_events(store, result.created_ids)
    with store.session() as session:
        event = session.scalars(select(MessageEvent)).one()
    assert (event.summary, event.location) == ("A B C", "Hall 1")
