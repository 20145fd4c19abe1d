"""Events found in an owner's sealed mail: their summary, location and source sealed too.

The event a message describes (a flight, a hotel stay, a concert) is that
message's content. While a store seals new mail, an extracted event's row says
``sealed`` (migration 0024) and holds its ``summary``, ``location`` and
``source`` (the schema.org item, JSON) as ``mrf1.`` values under the owner's
data key, bound to ``message_events``, the column and the event's id. The id
comes from the insert, so the rows are inserted with placeholders and the
sealed values written by id in the same transaction (as
``crypto.message_fields`` does for messages). Kind, times, all-day and time
zone stay clear: the calendar feed selects and orders by time in SQL.

Readers load ``MessageEvent`` through the ORM, which opens a sealed row as it
loads (listeners on the model), so the JMAP ``events`` property, the web
page's event lines and the calendar feed need no change. ``crypto.columns``
registers the columns for owner key rotations; deleting the owner (its key
first) leaves them unreadable.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from mailroom.crypto.fields import from_text
from mailroom.crypto.sealed_rows import write_sealed_rows
from mailroom.crypto.sealing import require_cipher

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from mailroom.store.models import MessageEvent

TABLE = "message_events"
TEXT_COLUMNS = ("summary", "location")
JSON_COLUMNS = ("source",)
SEALED_COLUMNS = (*TEXT_COLUMNS, *JSON_COLUMNS)
# What a sealed row holds between its insert and its sealed update.
PLACEHOLDERS: Mapping[str, Any] = {"summary": "", "location": None, "source": {}, "sealed": True}


def write_sealed(session: Session, owner: int, clear: Mapping[int, Mapping[str, Any]]) -> None:
    """Seal the columns of rows just inserted with :data:`PLACEHOLDERS` (event id → clear row)."""
    from mailroom.store.models import MessageEvent

    rows = {event_id: {c: row.get(c) for c in SEALED_COLUMNS} for event_id, row in clear.items()}
    write_sealed_rows(session, MessageEvent, owner, rows, JSON_COLUMNS)


def open_loaded(event: MessageEvent, session: Session | None, attrs: Iterable[str] | None) -> None:
    """Open a sealed ``MessageEvent`` just loaded (or ``attrs`` of it refreshed), in place."""
    from sqlalchemy.orm.attributes import set_committed_value

    if session is None:
        return
    loaded = event.__dict__
    wanted = SEALED_COLUMNS if attrs is None else [c for c in attrs if c in SEALED_COLUMNS]
    cipher = None
    for column in wanted:
        value = loaded.get(column)
        if column not in loaded or value is None:
            continue
        cipher = cipher or require_cipher(session, "This message's event")
        text = value if isinstance(value, str) else ""
        plain = cipher.decrypt_text(event.user_id, TABLE, column, event.id, from_text(text))
        set_committed_value(event, column, json.loads(plain) if column in JSON_COLUMNS else plain)
