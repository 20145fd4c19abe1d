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

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mailroom.categories.cascade import CategoryDecision, CategoryFacts, categorize
from mailroom.errors import NotFoundError
from mailroom.store.reader import Reader, as_reader, json_value

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


def _owner_addresses(reader: Reader, user_id: int, settings: Any) -> set[str]:
    found = addresses_in(settings)
    for (account_settings,) in reader.rows(
        "SELECT settings FROM accounts WHERE user_id = :user", {"user": user_id}
    ):
        found |= addresses_in(json_value(account_settings))
    return found


def _facts(reader: Reader, user_id: int, message_id: int, row: Sequence[Any]) -> CategoryFacts:
    """The cascade's facts of one stored message, given its (account, from, subject) row."""
    message = {"id": message_id, "user": user_id}
    account_id, from_email, subject = row
    settings = user_settings(reader, user_id)
    sent = reader.rows(
        "SELECT id FROM labels WHERE user_id = :user AND role = 'sent'", {"user": user_id}
    )
    labels: set[int] = set()
    provider: list[str] = []
    for label_id, ref in reader.rows(
        "SELECT message_labels.label_id, label_bindings.provider_ref FROM message_labels "
        "LEFT OUTER JOIN label_bindings ON label_bindings.label_id = message_labels.label_id "
        "AND label_bindings.account_id = :account WHERE message_labels.message_id = :id",
        {**message, "account": account_id},
    ):
        labels.add(label_id)
        if ref and ref.startswith("CATEGORY_"):
            provider.append(ref)
    bodies = reader.rows("SELECT headers FROM message_bodies WHERE message_id = :id", message)
    sender = (from_email or "").lower()
    correspondents: frozenset[str] = frozenset()
    if sender:
        correspondents = frozenset(
            str(email).lower()
            for (email,) in reader.rows(
                "SELECT email FROM contacts WHERE user_id = :user AND email = :email "
                "AND sent_count > 0",
                {"user": user_id, "email": sender},
            )
        )
    own = sender in _owner_addresses(reader, user_id, settings) or bool(
        sent and sent[0][0] in labels
    )
    return CategoryFacts(
        from_email=from_email or "",
        subject=subject or "",
        headers=first_headers((json_value(bodies[0][0]) if bodies else None) or []),
        provider_labels=sorted(provider),
        correspondents=correspondents,
        switched_off=tabs_off(settings),
        is_own_message=own,
    )


def explain(source: Reader | Session, user_id: int, message_id: int) -> Explanation:
    """Recompute, from stored data, which tab a message belongs in and why."""
    reader = as_reader(source)
    found = reader.rows(
        "SELECT rule_category, thread_id, account_id, from_email, subject FROM messages "
        "WHERE id = :id AND user_id + 0 = :user",
        {"id": message_id, "user": user_id},
    )
    if not found:
        raise NotFoundError(f"There is no message {message_id}; `mailroom list` shows the ids.")
    rule_category, thread_id, *row = found[0]
    facts = _facts(reader, user_id, message_id, row)
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
