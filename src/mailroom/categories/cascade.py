"""The category cascade: which inbox tab a message belongs in, and why.

Decided only from stored data (headers, labels, the owner's correspondents),
so the same code runs at ingest and in a backfill. Order matters, each stage
exists because the one after it would get these messages wrong:

1. ``provider_label`` — Gmail's CATEGORY_* labels win outright.
2. ``correspondent`` — the owner has written to this sender: Primary.
3. ``forums`` — mailing-list headers (List-Post, Mailing-List, Mailman's
   X-BeenThere, or a List-Id that is not a newsletter service's). Before
   promotions, because list traffic carries List-Unsubscribe too.
4. ``promotions`` — List-Unsubscribe, Precedence: bulk, marketing mailers.
5. ``social`` — a short, high-signal list of social network sender domains.
6. ``updates`` — automated notices: no-reply senders, receipts, alerts.
7. ``default`` — Primary.

A category the owner switched off gets no mail: the decision becomes Primary
with stage ``switched_off`` and the original signal kept for ``explain``.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from mailroom.categories.tabs import PRIMARY
from mailroom.conversations.subject import is_reply

GMAIL_CATEGORY_LABELS = {
    "CATEGORY_PERSONAL": "primary",
    "CATEGORY_PROMOTIONS": "promotions",
    "CATEGORY_SOCIAL": "social",
    "CATEGORY_UPDATES": "updates",
    "CATEGORY_FORUMS": "forums",
}

SOCIAL_DOMAINS = frozenset(
    {
        "facebookmail.com",
        "facebook.com",
        "linkedin.com",
        "twitter.com",
        "x.com",
        "instagram.com",
        "pinterest.com",
        "tiktok.com",
        "reddit.com",
        "redditmail.com",
        "mastodon.social",
        "xing.com",
        "meetup.com",
        "quora.com",
        "youtube.com",
        "snapchat.com",
        "discord.com",
        "tumblr.com",
        "nextdoor.com",
    }
)

_NOREPLY = re.compile(
    r"^(no-?reply|do-?not-?reply|notifications?|alerts?|mailer-daemon|bounce)", re.I
)
_UPDATE_SUBJECT = re.compile(
    r"\b(receipt|invoice|order|shipped|shipping|delivery|statement|password|verify|"
    r"verification|security alert|sign-?in|confirm|booking|reservation|ticket|"
    r"rechnung|bestellung|lieferung|versand)\b",
    re.I,
)
_MARKETING_MAILERS = re.compile(
    r"(mailchimp|mcsv\.net|sendgrid|constantcontact|exacttarget|campaign|newsletter|"
    r"marketo|hubspot|klaviyo|rsgsv|cmail\d*\.com|mktomail)",
    re.I,
)


# Headers only discussion lists carry (people post to them); List-Id is weighed separately.
_FORUM_HEADERS = (
    "list-post",
    "mailing-list",
    "x-mailing-list",
    "x-mailman-version",
    "x-beenthere",
)
_CAMPAIGN_HEADERS = ("x-campaign", "x-campaignid", "x-mc-user", "x-sg-eid")


@dataclass(frozen=True, slots=True)
class CategoryFacts:
    """What the cascade may look at: stored headers, labels and the owner's context."""

    from_email: str
    subject: str
    headers: Mapping[str, str]  # lower-cased header name -> first value
    provider_labels: Collection[str] = ()
    correspondents: Collection[str] = ()  # addresses the owner has written to
    switched_off: Collection[str] = ()  # categories the owner turned off
    is_own_message: bool = False


@dataclass(frozen=True, slots=True)
class CategoryDecision:
    """A category with the stage that decided it and the signal it saw."""

    category: str
    stage: str
    signal: str = ""
    original: str | None = field(default=None)

    def explain(self) -> str:
        """One sentence for "why is this here?"."""
        text = f"{self.category.capitalize()}: decided by {self.stage}"
        if self.signal:
            text += f" ({self.signal})"
        if self.original:
            text += f"; would be {self.original.capitalize()}, but that tab is switched off"
        return text + "."


def categorize(facts: CategoryFacts) -> CategoryDecision:
    """Run the cascade and apply the owner's switched-off categories."""
    decision = _cascade(facts)
    if decision.category != PRIMARY and decision.category in facts.switched_off:
        return CategoryDecision(PRIMARY, "switched_off", decision.signal, decision.category)
    return decision


def _cascade(facts: CategoryFacts) -> CategoryDecision:
    for label in facts.provider_labels:
        if label in GMAIL_CATEGORY_LABELS:
            return CategoryDecision(GMAIL_CATEGORY_LABELS[label], "provider_label", label)
    if facts.is_own_message:
        return CategoryDecision(PRIMARY, "own_message", "sent by the owner")
    sender = facts.from_email.lower()
    if sender and sender in facts.correspondents:
        return CategoryDecision(PRIMARY, "correspondent", f"you have written to {sender}")
    headers = facts.headers
    for name in _FORUM_HEADERS:
        if headers.get(name):
            return CategoryDecision("forums", "forums", f"{name}: {headers[name][:120]}")
    list_id = headers.get("list-id", "")
    if list_id:
        # A List-Id alone is also what newsletter services stamp on their campaigns; one of
        # theirs (or their campaign headers) makes it marketing, anything else a forum.
        marketing = _MARKETING_MAILERS.search(list_id) or any(
            headers.get(name) for name in _CAMPAIGN_HEADERS
        )
        if not marketing:
            return CategoryDecision("forums", "forums", f"list-id: {list_id[:120]}")
        return CategoryDecision("promotions", "promotions", f"newsletter list-id: {list_id[:120]}")
    precedence = headers.get("precedence", "").strip().lower()
    if precedence == "list":
        return CategoryDecision("forums", "forums", "precedence: list")
    if headers.get("list-unsubscribe"):
        return CategoryDecision("promotions", "promotions", "list-unsubscribe header")
    if precedence in ("bulk", "junk"):
        return CategoryDecision("promotions", "promotions", f"precedence: {precedence}")
    for name in ("x-mailer", *_CAMPAIGN_HEADERS, "feedback-id"):
        value = headers.get(name, "")
        if value and (name != "x-mailer" or _MARKETING_MAILERS.search(value)):
            return CategoryDecision("promotions", "promotions", f"{name}: {value[:80]}")
    domain = sender.rpartition("@")[2]
    if domain in SOCIAL_DOMAINS or domain.partition(".")[2] in SOCIAL_DOMAINS:
        return CategoryDecision("social", "social", f"sender domain {domain}")
    local = sender.partition("@")[0]
    if local and _NOREPLY.match(local):
        return CategoryDecision("updates", "updates", f"automated sender {sender}")
    if headers.get("auto-submitted", "no").strip().lower() not in ("", "no"):
        return CategoryDecision("updates", "updates", "auto-submitted header")
    if not is_reply(facts.subject) and (match := _UPDATE_SUBJECT.search(facts.subject)):
        return CategoryDecision("updates", "updates", f"subject mentions {match.group(0)!r}")
    return CategoryDecision(PRIMARY, "default", "")
