"""Detectors of the cascade's signals: each looks at one kind of evidence and names it.

Every function takes the message's facts and returns the signal it saw as a
short phrase ("list-unsubscribe header", "sender domain linkedin.com"), or
"" when it saw nothing. The phrase is what ``explain`` shows after "decided
by ...", so it says what was seen, not what was concluded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from mailroom.categories.bodies import bulk_body_sign
from mailroom.categories.vocabulary import (
    AUTO_REPLY_SUBJECT,
    AUTOMATED_SENDER,
    ESP_HEADERS,
    FORUM_HEADERS,
    LIST_ADMIN_SENDER,
    LIST_TAG,
    PROMOTIONAL_WORDS,
    REFERENCE_NUMBER,
    ROLE_SENDER,
    SOCIAL_DOMAINS,
    SOCIAL_HEADERS,
    TRANSACTIONAL_WORDS,
    names_mass_mailer,
)
from mailroom.conversations.subject import is_reply

if TYPE_CHECKING:
    from mailroom.categories.cascade import CategoryFacts

_CUT = 120


def _local(sender: str) -> str:
    return sender.partition("@")[0]


def _domain(sender: str) -> str:
    return sender.rpartition("@")[2]


def _auto_submitted(headers: Mapping[str, str]) -> str:
    return headers.get("auto-submitted", "").strip().lower().partition(";")[0].strip()


def esp_header(headers: Mapping[str, str]) -> str:
    """An ESP's or campaign tool's header, or a mass mailer named in X-Mailer."""
    for name in ESP_HEADERS:
        if headers.get(name):
            return f"{name}: {headers[name][:80]}"
    mailer = headers.get("x-mailer", "")
    if mailer and names_mass_mailer(mailer):
        return f"x-mailer: {mailer[:80]}"
    return ""


def forum(facts: CategoryFacts) -> str:
    """Evidence the message came through a discussion list or a group."""
    headers = facts.headers
    for name in FORUM_HEADERS:
        if headers.get(name):
            return f"{name}: {headers[name][:_CUT]}"
    list_id = headers.get("list-id", "")
    # A List-Id is also what newsletter services stamp on their campaigns.
    if list_id and not names_mass_mailer(list_id) and not esp_header(headers):
        return f"list-id: {list_id[:_CUT]}"
    if headers.get("precedence", "").strip().lower() == "list":
        return "precedence: list"
    if headers.get("list-subscribe") and headers.get("list-digest"):
        return "list-subscribe and list-digest headers"
    sender = facts.from_email.lower()
    tagged = LIST_TAG.match(facts.subject)
    # A tag alone is weak: newsletters tag their subjects too, so only unbulky mail counts.
    if (
        tagged
        and not AUTOMATED_SENDER.match(_local(sender))
        and not bulk(facts)
        and not _to_owner(facts)
    ):
        return f"subject tag {tagged.group(1)} on mail not addressed to you"
    return ""


def _to_owner(facts: CategoryFacts) -> bool:
    recipients = (facts.headers.get("to", "") + "," + facts.headers.get("cc", "")).lower()
    return any(address in recipients for address in facts.owner_addresses)


def social(facts: CategoryFacts) -> str:
    """A social network's sender domain or notification header."""
    domain = _domain(facts.from_email.lower())
    parts = domain.split(".")
    for start in range(len(parts) - 1):
        if ".".join(parts[start:]) in SOCIAL_DOMAINS:
            return f"sender domain {domain}"
    for name in SOCIAL_HEADERS:
        if facts.headers.get(name):
            return f"{name} header"
    return ""


def list_admin(facts: CategoryFacts) -> str:
    """A list server's own notice (a reminder, a moderation or bounce report), not a post."""
    sender = facts.from_email.lower()
    if LIST_ADMIN_SENDER.search(_local(sender)):
        return f"list server notice from {sender}"
    return ""


def bounce(facts: CategoryFacts) -> str:
    """A delivery report from a mail system."""
    sender = facts.from_email.lower()
    if _local(sender) in ("mailer-daemon", "postmaster"):
        return f"delivery report from {sender}"
    return ""


def auto_reply(facts: CategoryFacts) -> str:
    """An out-of-office or other automatic answer to the owner's mail."""
    if _auto_submitted(facts.headers) == "auto-replied":
        return "auto-submitted: auto-replied"
    if match := AUTO_REPLY_SUBJECT.match(facts.subject):
        return f"subject starts {match.group(0)!r}"
    return ""


def automated(facts: CategoryFacts) -> str:
    """Evidence a machine sent the message: a bulk or ESP header, a role sender, a number."""
    headers = facts.headers
    sender = facts.from_email.lower()
    if ROLE_SENDER.match(_local(sender)):
        return f"sent from the role address {sender}"
    if _auto_submitted(headers) not in ("", "no"):
        return "auto-submitted header"
    if found := bulk(facts):
        return found
    if REFERENCE_NUMBER.search(facts.subject):
        return "a reference number in the subject"
    return ""


def transactional(facts: CategoryFacts) -> str:
    """Subject words of mail about the owner's own account, order, money or security.

    Only for a message that is not a reply and does not also advertise.
    """
    match = TRANSACTIONAL_WORDS.search(facts.subject)
    if not match or is_reply(facts.subject) or PROMOTIONAL_WORDS.search(facts.subject):
        return ""
    return f"subject mentions {match.group(0).lower()!r}"


def auto_generated(facts: CategoryFacts) -> str:
    """An Auto-Submitted header saying a program generated the message."""
    value = _auto_submitted(facts.headers)
    return f"auto-submitted: {value}" if value not in ("", "no") else ""


def bulk(facts: CategoryFacts) -> str:
    """Evidence of mail sent in bulk: unsubscribe headers, Precedence, ESP headers, the body."""
    headers = facts.headers
    if headers.get("list-unsubscribe"):
        return "list-unsubscribe header"
    if headers.get("list-unsubscribe-post"):
        return "list-unsubscribe-post header"
    precedence = headers.get("precedence", "").strip().lower()
    if precedence in ("bulk", "junk"):
        return f"precedence: {precedence}"
    if found := esp_header(headers):
        return found
    list_id = headers.get("list-id", "")
    if list_id:
        return f"newsletter list-id: {list_id[:_CUT]}"
    if is_reply(facts.subject):
        return ""  # a reply may quote a newsletter; it is not one
    return bulk_body_sign(facts.text_body, facts.html_body)


def promotional(facts: CategoryFacts) -> str:
    """Selling words in the subject of mail from a company's role address."""
    if not ROLE_SENDER.match(_local(facts.from_email.lower())):
        return ""
    match = PROMOTIONAL_WORDS.search(facts.subject)
    return f"subject mentions {match.group(0).lower()!r}" if match else ""


def automated_sender(facts: CategoryFacts) -> str:
    """A sender address no person reads (no-reply, notifications, alerts, ...)."""
    sender = facts.from_email.lower()
    return f"automated sender {sender}" if AUTOMATED_SENDER.match(_local(sender)) else ""
