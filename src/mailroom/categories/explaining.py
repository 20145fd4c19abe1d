"""``explain``: which tab a stored message belongs in and why, recomputed from stored data.

The facts are the ones :mod:`.recompute` gives the cascade (headers, the
message's labels and their Gmail ``CATEGORY_*`` bindings, the owner's
addresses, Sent label, correspondents and switched-off tabs), read with plain
SQL through a :class:`~mailroom.store.reader.Reader`. So ``mailroom explain``
needs neither SQLAlchemy nor the ORM on the embedded store, and the web page
runs the same SQL in its session (``store.reader`` says how).

The pure helpers both ways of reading share live here too: :func:`first_headers`,
:func:`addresses_in` and :func:`tabs_off`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mailroom.categories.cascade import CategoryDecision, CategoryFacts, categorize
from mailroom.categories.learned import NOTHING_LEARNED, LearnedTabs
from mailroom.reading import user_message
from mailroom.store.chunks import in_chunks
from mailroom.store.reader import Reader, as_reader, in_list, json_value

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

_ADDRESS_KEYS = ("email", "address", "login", "username")


def first_headers(headers: Sequence[Sequence[str]]) -> dict[str, str]:
    """Lower-cased header name → its first value (what the cascade looks at)."""
    found: dict[str, str] = {}
    for pair in headers:
        if len(pair) == 2:
            found.setdefault(str(pair[0]).lower(), str(pair[1]))
    return found


def addresses_in(settings: Any) -> set[str]:
    """The mail addresses an account's or user's settings name (lower-case)."""
    found: set[str] = set()
    if not isinstance(settings, dict):
        return found
    for key in _ADDRESS_KEYS:
        value = settings.get(key)
        if isinstance(value, str) and "@" in value:
            found.add(value.strip().lower())
    extra = settings.get("addresses")
    if isinstance(extra, list):
        found |= {str(v).strip().lower() for v in extra if isinstance(v, str) and "@" in v}
    return found


def tabs_off(settings: Any) -> frozenset[str]:
    """The tabs a user's settings switch off (``categories_off``)."""
    value = settings.get("categories_off") if isinstance(settings, dict) else None
    if not isinstance(value, list):
        return frozenset()
    return frozenset(str(v) for v in value)


@dataclass(frozen=True, slots=True)
class Explanation:
    """Why a message is in its tab: the live decision, a rule's filing, the thread's tab."""

    message_id: int
    decision: CategoryDecision
    rule_category: str | None
    thread_id: int | None
    thread_category: str | None
    thread_pinned: bool

    @property
    def tab(self) -> str:
        """The tab the message itself counts for (a rule's filing wins)."""
        return self.rule_category or self.decision.category

    def lines(self) -> list[str]:
        """The "why is this here?" text, one sentence per line."""
        out = [self.decision.explain()]
        if self.rule_category:
            out.append(
                f"Filed into {self.rule_category.capitalize()} by one of your rules "
                "(the sender's authentication passed)."
            )
        if self.thread_id is not None and self.thread_category:
            pinned = " (pinned by you)" if self.thread_pinned else ""
            out.append(
                f"Its conversation {self.thread_id} is in "
                f"{self.thread_category.capitalize()}{pinned}: a conversation takes the tab "
                "of its newest message unless pinned."
            )
        return out


def user_settings(reader: Reader, user_id: int) -> Any:
    """The user's settings JSON as Python (None when unset or no such user)."""
    rows = reader.rows("SELECT settings FROM users WHERE id = :user", {"user": user_id})
    return json_value(rows[0][0]) if rows else None


@dataclass(frozen=True, slots=True)
class OwnerContext:
    """What the cascade needs to know about the owner, loaded once per run."""

    addresses: frozenset[str]
    switched_off: frozenset[str]
    sent_label: int | None
    learned: LearnedTabs = NOTHING_LEARNED

    @classmethod
    def load(cls, source: Reader | Session, user_id: int) -> OwnerContext:
        """The owner's addresses, switched-off tabs, Sent label id and learned tabs."""
        reader = as_reader(source)
        settings = user_settings(reader, user_id)
        addresses = addresses_in(settings)
        for (account_settings,) in reader.rows(
            "SELECT settings FROM accounts WHERE user_id = :user", {"user": user_id}
        ):
            addresses |= addresses_in(json_value(account_settings))
        sent = reader.rows(
            "SELECT id FROM labels WHERE user_id = :user AND role = 'sent'", {"user": user_id}
        )
        return cls(
            frozenset(addresses),
            tabs_off(settings),
            int(sent[0][0]) if sent else None,
            LearnedTabs.from_settings(settings),
        )


def _correspondents(reader: Reader, user_id: int, senders: set[str]) -> frozenset[str]:
    """Which of these (lower-case) senders the owner has written to.

    A sealing owner's contacts are keyed hashes (``categories.correspondents``): they
    are looked up by every stored form, which needs the store's keys. A bare reader
    (no session) of an owner with a data key says so instead of finding none (the
    CLI then reads again through the store, which has the keys).
    """
    if not senders:
        return frozenset()
    forms = {sender: sender for sender in senders}
    session = _session_of(reader)
    if session is not None:
        from mailroom.crypto.message_fields import LookupKeys

        forms = LookupKeys(session, user_id).address_forms(senders)
    elif reader.rows(_OWNER_HAS_KEY, {"user": user_id}):
        _without_keys()
    found: set[str] = set()
    for chunk in in_chunks(sorted(forms)):
        listed, params = in_list("email", chunk)
        found |= {
            forms[str(email)]
            for (email,) in reader.rows(
                f"SELECT email FROM contacts WHERE user_id = :user AND email IN {listed} "
                "AND sent_count > 0",
                {"user": user_id, **params},
            )
        }
    return frozenset(found)


_OWNER_HAS_KEY = "SELECT 1 FROM owner_keys WHERE user_id = :user LIMIT 1"


def _opened(reader: Reader, user_id: int, row: Sequence[Any]) -> Sequence[Any]:
    """A ``messages`` row of :func:`stored_facts` with its sealed columns opened."""
    if not row[6]:
        return row
    from mailroom.crypto.message_fields import open_value

    session, message_id = _session_of(reader), int(row[0])

    def opened(column: str, value: Any) -> Any:
        return open_value(session, user_id, message_id, column, value, True)

    sender, subject, reason = (
        opened("from_email", row[2]),
        opened("subject", row[3]),
        opened("assistant_reason", row[5]),
    )
    return (row[0], row[1], sender, subject, row[4], reason, row[6])


def _session_of(reader: Reader) -> Session | None:
    """The SQLAlchemy session behind a reader (None for the bare SQLite file reader),
    without importing SQLAlchemy when there is none."""
    session = getattr(reader, "session", None)
    if session is None:
        return None
    from mailroom.crypto.mail_reading import session_of

    return session_of(reader)


def _without_keys() -> None:
    from mailroom.errors import SealedWithoutKeys

    raise SealedWithoutKeys(
        "This owner's contacts are sealed and this store was opened without its keys; read it "
        "through mailroom with MAILROOM_MASTER_KEY_FILE set."
    )


def stored_facts(
    source: Reader | Session, user_id: int, message_ids: Sequence[int], context: OwnerContext
) -> dict[int, CategoryFacts]:
    """The category facts of stored messages (at most one chunk), from stored data only."""
    reader = as_reader(source)
    if not message_ids:
        return {}
    listed, params = in_list("id", message_ids)
    rows = reader.rows(
        "SELECT id, account_id, from_email, subject, assistant_category, assistant_reason, "
        "sealed FROM messages "
        f"WHERE user_id + 0 = :user AND id IN {listed}",
        {"user": user_id, **params},
    )
    if any(row[6] for row in rows):  # the cipher (and SQLAlchemy) load for sealed rows only
        rows = [_opened(reader, user_id, row) for row in rows]
    headers: dict[int, Any] = {}
    bodies: dict[int, tuple[str, str | None]] = {}
    for message_id, owner, sealed, stored, text, html in reader.rows(
        "SELECT message_bodies.message_id, messages.user_id, message_bodies.sealed, headers, "
        "text_body, html_body FROM message_bodies "
        "JOIN messages ON messages.id = message_bodies.message_id "
        f"WHERE message_bodies.message_id IN {listed}",
        params,
    ):
        if sealed:  # the cipher (and SQLAlchemy) load for sealed rows only
            from mailroom.crypto.mail_reading import open_column, session_of

            row = (session_of(source), owner, message_id)
            stored = open_column(*row, "headers", stored, True)
            text = open_column(*row, "text_body", text, True)
            html = open_column(*row, "html_body", html, True)
        headers[message_id] = json_value(stored)
        bodies[message_id] = (text or "", html)
    labels: dict[int, set[int]] = defaultdict(set)
    provider: dict[int, list[str]] = defaultdict(list)
    for message_id, label_id, ref in reader.rows(
        "SELECT message_labels.message_id, message_labels.label_id, label_bindings.provider_ref "
        "FROM message_labels JOIN messages ON messages.id = message_labels.message_id "
        "LEFT OUTER JOIN label_bindings ON label_bindings.label_id = message_labels.label_id "
        "AND label_bindings.account_id = messages.account_id "
        f"WHERE message_labels.message_id IN {listed}",
        params,
    ):
        labels[message_id].add(label_id)
        if ref and ref.startswith("CATEGORY_"):
            provider[message_id].append(ref)
    senders = {str(row[2]).lower() for row in rows if row[2]}
    correspondents = _correspondents(reader, user_id, senders)
    facts: dict[int, CategoryFacts] = {}
    for message_id, _account, from_email, subject, verdict, reason, _sealed in rows:
        sender = (from_email or "").lower()
        own = sender in context.addresses or (
            context.sent_label is not None and context.sent_label in labels[message_id]
        )
        facts[message_id] = CategoryFacts(
            from_email=from_email or "",
            subject=subject or "",
            headers=first_headers(headers.get(message_id) or []),
            provider_labels=sorted(provider[message_id]),
            correspondents=correspondents,
            switched_off=context.switched_off,
            is_own_message=own,
            owner_addresses=context.addresses,
            learned=context.learned,
            text_body=bodies.get(message_id, ("", None))[0],
            html_body=bodies.get(message_id, ("", None))[1],
            assistant=(str(verdict), str(reason or "")) if verdict else None,
        )
    return facts


def explain(source: Reader | Session, user_id: int, message_id: int) -> Explanation:
    """Recompute, from stored data, which tab a message belongs in and why."""
    reader = as_reader(source)
    rule_category, thread_id = user_message(reader, user_id, message_id, "rule_category, thread_id")
    context = OwnerContext.load(reader, user_id)
    facts = stored_facts(reader, user_id, [message_id], context)[message_id]
    thread = (
        reader.rows(
            "SELECT category, category_pinned FROM threads WHERE id = :thread",
            {"thread": thread_id},
        )
        if thread_id is not None
        else []
    )
    return Explanation(
        message_id=message_id,
        decision=categorize(facts),
        rule_category=rule_category,
        thread_id=thread_id,
        thread_category=thread[0][0] if thread else None,
        thread_pinned=bool(thread and thread[0][1]),
    )
