"""Mail carrying the sample events, stored through the real ingest path."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import func, select

from mailroom.store.engine import Store
from mailroom.store.models import MessageEvent
from tests.factories import make_message
from tests.helpers import ingest, make_account

SAMPLES = Path(__file__).parent / "samples"
# sample name -> how many events its HTML describes
EXPECTED = {"airline": 2, "hotel": 1, "concert": 1, "parcel": 1}


def sample_mail(name: str, minutes: int = 0) -> bytes:
    """A message whose HTML part is the sample ``name`` (with a plain-text part)."""
    return make_message(
        f"{name}@events.test",
        subject=f"Your {name} booking",
        sender=f"Bookings <noreply@{name}.example>",
        body="Your booking is confirmed.\n",
        html=(SAMPLES / f"{name}.html").read_text(),
        minutes=minutes,
    )


def store_samples(store: Store, owner: str = "me") -> tuple[tuple[int, int, int], dict[str, int]]:
    """The owner's account and the stored sample messages (name -> message id), plus a plain one."""
    account = make_account(store, owner=owner)
    raws = [(name, sample_mail(name, i)) for i, name in enumerate(EXPECTED)]
    raws.append(("plain", make_message("plain@events.test", subject="No events", minutes=9)))
    result = ingest(store, account, raws)
    from mailroom.store.models import Message

    with store.session() as session:
        rows = session.execute(
            select(Message.provider_id, Message.id).where(Message.id.in_(result.created_ids))
        )
        ids = {provider_id: message_id for provider_id, message_id in rows}
    return account, ids


def event_count(store: Store) -> int:
    """How many events are stored."""
    with store.session() as session:
        return session.scalar(select(func.count()).select_from(MessageEvent)) or 0
