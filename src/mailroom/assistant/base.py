"""The model adapter protocol: what the assistant asks a model, and what it gets back.

An adapter sees only what the store already holds about a message
(:class:`MailFacts`, loaded by :func:`mailroom.assistant.mail.load_mail`) and
answers with a :class:`Verdict` — one of the inbox tabs, how sure it is and
why — or ``None`` when it has no verdict (no answer in time, an answer that
is not a tab, too little to learn from). ``None`` is never an error: the mail
then keeps the rule cascade's tab.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from mailroom.categories.tabs import CATEGORIES


@dataclass(frozen=True, slots=True)
class MailFacts:
    """The stored facts of one message a model may look at."""

    message_id: int
    user_id: int
    from_name: str
    from_email: str
    subject: str
    text: str  # the start of the plain-text body (or the preview)
    headers: Mapping[str, str] = field(default_factory=dict)  # lower-case name -> first value
    cascade: str = ""  # the rule cascade's tab for it (stored at ingest)
    stage: str = ""  # and the cascade stage that decided it


@dataclass(frozen=True, slots=True)
class Verdict:
    """A model's answer: the tab, its confidence (0–1) and a short reason."""

    tab: str
    confidence: float
    reason: str

    def __post_init__(self) -> None:
        if self.tab not in CATEGORIES:
            raise ValueError(f"{self.tab!r} is not a tab")


class Classifier(Protocol):
    """A model adapter: stored facts of a message in, a verdict (or none) out."""

    name: str

    def classify(self, mail: MailFacts) -> Verdict | None:
        """The tab this message belongs in, or None for no verdict (logged by the adapter)."""

    def close(self) -> None:
        """Let go of connections and loaded models."""
