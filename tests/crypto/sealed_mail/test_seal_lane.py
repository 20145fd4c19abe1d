"""An import's sealing lane and memo of opened values: sealed and opened as the writer would."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

import pytest
from sqlalchemy import select, text

from mailroom.crypto.fields import FieldTampered
from mailroom.crypto.mail_reading import bodies_of, raw_message
from mailroom.crypto.message_fields import open_rows, remembering_opened
from mailroom.crypto.seal_lane import sealing_lane
from mailroom.store.engine import Store
from mailroom.store.models import Message
from tests.crypto.sealed_mail.conftest import BODY_PHRASE, HEADER_VALUE
from tests.factories import make_message
from tests.helpers import ingest, make_account


class CountingLane:
    """A real helper process (as ``mime.pool.ParsePool`` gives), counting what it was given."""

    def __init__(self, executor: ProcessPoolExecutor) -> None:
        self.executor = executor
        self.calls = 0

    def call(self, function: Callable[..., Any], *args: Any) -> Future[Any] | None:
        self.calls += 1
        return self.executor.submit(function, *args)


class FailingLane:
    """A helper whose every job fails (a helper process that died)."""

    def __init__(self) -> None:
        self.calls = 0

    def call(self, function: Callable[..., Any], *args: Any) -> Future[Any] | None:
        self.calls += 1
        failed: Future[Any] = Future()
        failed.set_exception(RuntimeError("the helper process died"))
        return failed


@pytest.fixture(scope="module")
def executor() -> Iterator[ProcessPoolExecutor]:
    with ProcessPoolExecutor(1) as pool:
        yield pool


def _mail(tag: str) -> list[tuple[str, bytes]]:
    return [
        (
            f"{tag}-{n}",
            make_message(
                f"{tag}-{n}@example.org",
                subject=f"Hangar forecast {n}",
                sender=f"Ann Example <ann{n}@example.org>",
                to="Bo <bo@example.org>",
                body=f"Hello,\n{BODY_PHRASE} {n}\n",
                headers={"X-Secret-Plan": HEADER_VALUE},
            ),
        )
        for n in range(5)
    ]


def _view(store: Store, ids: list[int]) -> list[tuple[Any, ...]]:
    """What readers see of these messages: mail columns opened by the ORM, bodies opened."""
    with store.session() as session:
        bodies = bodies_of(session, ids)
        messages = session.scalars(select(Message).where(Message.id.in_(ids)).order_by(Message.id))
        return [
            (
                m.subject,
                m.preview,
                m.from_name,
                m.from_email,
                m.recipients,
                bodies[m.id].text_body,
                [list(h) for h in bodies[m.id].headers],
                raw_message(session, m.id),
            )
            for m in messages
        ]


@pytest.mark.parametrize("lane_kind", ["helper process", "failing helper"])
def test_values_sealed_in_a_lane_read_as_sealed_in_the_writer(
    sealed_store: Store, executor: ProcessPoolExecutor, lane_kind: str
) -> None:
    here = ingest(sealed_store, make_account(sealed_store, name="here"), _mail("m"))
    lane = CountingLane(executor) if lane_kind == "helper process" else FailingLane()
    with sealing_lane(lane):
        there = ingest(sealed_store, make_account(sealed_store, name="lane"), _mail("m"))
    assert lane.calls == 3  # the batch's message columns, its bodies, its raw bytes

    assert _view(sealed_store, there.created_ids) == _view(sealed_store, here.created_ids)
    view = _view(sealed_store, there.created_ids)
    assert view[0][0] == "Hangar forecast 0" and BODY_PHRASE in view[0][5]
    assert b"Subject: Hangar forecast 0" in view[0][7]
    with sealed_store.engine.connect() as conn:
        rows = conn.execute(text("SELECT * FROM messages")).all()
        rows += conn.execute(text("SELECT * FROM message_bodies")).all()
        blobs = conn.execute(text("SELECT data FROM blobs")).scalars().all()
    stored = "\n".join(str(value) for row in rows for value in row)
    for clear in ("Hangar forecast", "ann0@example.org", BODY_PHRASE, HEADER_VALUE):
        assert clear not in stored
        assert not any(clear.encode() in bytes(data) for data in blobs)


def test_values_opened_once_in_an_import_are_still_bound_to_their_rows(
    sealed_store: Store,
) -> None:
    """Inside ``remembering_opened`` a value opens once; a sealed text moved onto another
    row is still refused there, remembered or not."""
    result = ingest(sealed_store, make_account(sealed_store), _mail("r"))
    first, second = result.created_ids[:2]
    columns = ["subject", "from_email"]
    query = text("SELECT id, user_id, sealed, subject, from_email FROM messages WHERE id = :id")
    with remembering_opened(), sealed_store.session() as session:
        (row,) = session.execute(query, {"id": first}).all()
        assert open_rows(session, [row], columns)[0]["subject"] == "Hangar forecast 0"
        assert open_rows(session, [row], columns)[0]["subject"] == "Hangar forecast 0"
        session.execute(
            text("UPDATE messages SET subject = :subject WHERE id = :id"),
            {"subject": row.subject, "id": second},
        )
        (moved,) = session.execute(query, {"id": second}).all()
        with pytest.raises(FieldTampered):
            open_rows(session, [moved], columns)
