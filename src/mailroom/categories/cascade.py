"""The category cascade: which inbox tab a message belongs in, and why.

Decided only from stored data (headers, labels, the owner's correspondents,
bulk-mail signs in the body), so the same code runs at ingest and in a backfill.
Order matters, each stage exists because the one after it would get these
messages wrong:

1. ``provider_label`` — Gmail's CATEGORY_* labels win outright.
2. ``own_message`` — the owner's own mail: Primary. Then ``correction`` —
   the tab the owner moved this sender's (or, consistently, this domain's)
   mail to (``categories.learned``). Then ``correspondent`` — someone the
   owner has written to: Primary, whatever bulk headers. Then ``assistant`` —
   the model's verdict, for owners who let one sort their mail
   (``mailroom.assistant``): below the answers that stand, above the rules.
3. ``updates`` for a list server's own notice (a -owner or -request
   sender), then ``forums`` — list and group headers (List-Post, Mailing-List, Mailman,
   Google Groups, Discourse, GitHub/GitLab, a List-Id that is not an ESP's,
   Precedence: list), or a list's subject tag on mail not addressed to the
   owner. Before everything bulk: list traffic carries List-Unsubscribe too.
4. ``social`` — a social network's sender domain or notification header;
   before promotions, because networks send List-Unsubscribe and ESP headers.
5. ``updates`` for a delivery report, then ``auto_reply`` (Primary: an
   out-of-office answers the owner's own conversation).
6. ``updates`` — transactional subject words (receipt, order, Rechnung,
   facture, ...) without selling words, from a machine (a role address, an
   Auto-Submitted, bulk or ESP header, or a reference number): shops send
   receipts through the same ESPs as their marketing, so this goes first.
   Then any other Auto-Submitted mail without selling words.
7. ``promotions`` — List-Unsubscribe(-Post), Precedence: bulk/junk, ESP and
   campaign headers, a mass mailer, a newsletter service's List-Id, bulk
   signs in the body, or selling words from a company's role address.
8. ``updates`` — a sender no person reads (no-reply, notifications, ...).
9. ``default`` — Primary.

A person's invoice or a friend's "your parcel" mail has no machine evidence,
so it stays Primary. A category the owner switched off gets no mail: the
decision becomes Primary with stage ``switched_off`` and the original signal
kept for ``explain``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

from mailroom.categories import signals
from mailroom.categories.learned import NOTHING_LEARNED, LearnedTabs
from mailroom.categories.tabs import PRIMARY
from mailroom.categories.vocabulary import PROMOTIONAL_WORDS

GMAIL_CATEGORY_LABELS = {
    "CATEGORY_PERSONAL": "primary",
    "CATEGORY_PROMOTIONS": "promotions",
    "CATEGORY_SOCIAL": "social",
    "CATEGORY_UPDATES": "updates",
    "CATEGORY_FORUMS": "forums",
}


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
    owner_addresses: Collection[str] = ()  # the owner's own addresses (lower-case)
    # The bodies, read only when the cascade gets as far as looking for bulk-mail signs.
    text_body: str = ""
    html_body: str | None = None
    learned: LearnedTabs = NOTHING_LEARNED  # what the owner's tab corrections teach
    assistant: tuple[str, str] | None = None  # the model's verdict: (tab, reason)


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


def _transactional_update(facts: CategoryFacts) -> str:
    words = signals.transactional(facts)
    if words and (evidence := signals.automated(facts)):
        return words if evidence.startswith("sent from the role") else f"{words}, {evidence}"
    return ""


def _unsold_auto_generated(facts: CategoryFacts) -> str:
    found = signals.auto_generated(facts)
    return "" if found and PROMOTIONAL_WORDS.search(facts.subject) else found


# The rule stages after the owner's own context, in order: (tab, stage, detector).
RULES: tuple[tuple[str, str, Callable[[CategoryFacts], str]], ...] = (
    ("updates", "updates", signals.list_admin),
    ("forums", "forums", signals.forum),
    ("social", "social", signals.social),
    ("updates", "updates", signals.bounce),
    (PRIMARY, "auto_reply", signals.auto_reply),
    ("updates", "updates", _transactional_update),
    ("updates", "updates", _unsold_auto_generated),
    ("promotions", "promotions", signals.bulk),
    ("promotions", "promotions", signals.promotional),
    ("updates", "updates", signals.automated_sender),
)


def _cascade(facts: CategoryFacts) -> CategoryDecision:
    for label in facts.provider_labels:
        if label in GMAIL_CATEGORY_LABELS:
            return CategoryDecision(GMAIL_CATEGORY_LABELS[label], "provider_label", label)
    if facts.is_own_message:
        return CategoryDecision(PRIMARY, "own_message", "sent by the owner")
    sender = facts.from_email.lower()
    if sender and (learned := facts.learned.tab_for(sender)):
        return CategoryDecision(learned[0], "correction", learned[1])
    if sender and sender in facts.correspondents:
        return CategoryDecision(PRIMARY, "correspondent", f"you have written to {sender}")
    if facts.assistant is not None:
        return CategoryDecision(facts.assistant[0], "assistant", facts.assistant[1])
    for category, stage, detect in RULES:
        if found := detect(facts):
            return CategoryDecision(category, stage, found)
    return CategoryDecision(PRIMARY, "default", "")
