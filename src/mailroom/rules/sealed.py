"""A rule's from / to / subject / list id conditions on sealed messages, matched in Python.

``rules.engine`` matches those conditions in SQL (``ILIKE``), which cannot see a
sealed row's columns. For an owner with sealed rows among the messages looked at,
the rows are opened once (:class:`SealedRuleRows`, for every rule of a batch) and
each rule's conditions are tested here with the same meaning: a case-insensitive
"contains", on the To and Cc lists as their JSON text (as SQL sees it) or their
values. Clear rows keep the SQL path.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable
from typing import Any

from sqlalchemy.orm import Session

from mailroom.categories.sealed_rows import Where, has_sealed, sealed_rows
from mailroom.rules.model import Conditions

__all__ = ["RULE_COLUMNS", "SealedRuleRows", "column_conditions", "columns_of", "matches"]

RULE_COLUMNS = ("from_email", "from_name", "recipients", "subject", "list_id")


def column_conditions(conditions: Conditions) -> bool:
    """Whether the rule has a condition on a mail column (from, to, subject, list id)."""
    return any((conditions.from_, conditions.to, conditions.subject, conditions.list_id))


def columns_of(conditions: Conditions) -> list[str]:
    """The mail columns the rule's conditions test (the only ones worth opening)."""
    wanted: list[str] = []
    if conditions.from_:
        wanted += ["from_email", "from_name"]
    if conditions.to:
        wanted.append("recipients")
    if conditions.subject:
        wanted.append("subject")
    if conditions.list_id:
        wanted.append("list_id")
    return wanted


def _contains(value: Any, wanted: str) -> bool:
    return value is not None and wanted.lower() in str(value).lower()


def _addressed(recipients: Any, wanted: str) -> bool:
    if not isinstance(recipients, dict):
        return False
    escaped = json.dumps(wanted)[1:-1].lower()
    for kind in ("to", "cc"):
        listed = recipients.get(kind)
        if listed is None:
            continue
        if escaped in json.dumps(listed).lower() or _contains(
            json.dumps(listed, ensure_ascii=False), wanted
        ):
            return True
    return False


def matches(conditions: Conditions, row: dict[str, Any]) -> bool:
    """Whether an opened row meets the rule's mail-column conditions (all of them)."""
    if conditions.from_ and not (
        _contains(row.get("from_email"), conditions.from_)
        or _contains(row.get("from_name"), conditions.from_)
    ):
        return False
    if conditions.to and not _addressed(row.get("recipients"), conditions.to):
        return False
    if conditions.subject and not _contains(row.get("subject"), conditions.subject):
        return False
    return not (conditions.list_id and not _contains(row.get("list_id"), conditions.list_id))


class SealedRuleRows:
    """The owner's sealed messages among ``candidates`` (None: all), opened at most once.

    One cheap query first says whether there are any: an owner without sealed mail
    (or a batch of clear mail) never pays for more.
    """

    def __init__(
        self, session: Session, owner: int, candidates: Collection[int] | None = None
    ) -> None:
        self.session = session
        self.owner = owner
        self.candidates = candidates
        self._any: bool | None = None
        self._rows: list[dict[str, Any]] | None = None

    def any(self) -> bool:
        """Whether there is a sealed message to look at."""
        if self._any is None:
            self._any = has_sealed(self.session, self.owner, self.candidates)
        return self._any

    def matching(self, conditions: Conditions, narrowing: Iterable[Where] = ()) -> list[int]:
        """Ids of the sealed messages meeting the rule's mail-column conditions.

        ``narrowing``: SQL conditions every match must meet as well (the rule's text
        condition), used to open fewer rows when all the owner's mail is looked at.
        """
        if not self.any():
            return []
        if self.candidates is None:  # one rule over the whole mailbox: its columns only
            rows = sealed_rows(self.session, self.owner, columns_of(conditions), where=narrowing)
        else:
            if self._rows is None:
                self._rows = sealed_rows(
                    self.session, self.owner, RULE_COLUMNS, candidates=self.candidates
                )
            rows = self._rows
        return sorted(int(row["id"]) for row in rows if matches(conditions, row))
