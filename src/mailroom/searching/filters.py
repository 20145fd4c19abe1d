"""A parsed search as a JMAP ``Email/query`` filter (RFC 8621 §4.4.1).

The filter runs on :class:`mailroom.jmap.emailquery.EmailFilter`, the
engine JMAP clients use, so a search means the same everywhere:

==========================  =================================================
``word "a phrase"``         ``text``: the full-text index (FTS5 / tsvector);
                            the free words of one AND group are one
                            condition, whose last unquoted word is also a
                            prefix, as everywhere in mailroom
``from: to: cc: bcc:``      the same conditions (substrings of the sender
``subject:``                or of the recipients; of the subject)
``has:attachment``          ``hasAttachment``
``is:unread`` / ``is:read``  ``notKeyword`` / ``hasKeyword`` ``$seen``
``is:starred``              ``hasKeyword $flagged`` (the Starred label)
``in:BOX``, ``is:snoozed``  ``inMailbox`` of the system label with that role
``label:NAME``              ``inMailbox``: a user label by path (case does
                            not matter; ``-`` may stand for a space), else a
                            system label by role (``label:inbox``)
``before:`` / ``after:``    the start of that day in the user's time zone:
                            ``before`` earlier than it, ``after`` from it on
``older_than:`` /           now minus days, weeks, calendar months or years
``newer_than:``
``larger:`` / ``smaller:``  ``minSize`` / ``maxSize``
``-x``, ``a OR b``          ``NOT``, ``OR``, groups ``AND``
==========================  =================================================

Mail in Spam or Trash is left out unless the search names that box
(``in:spam``, ``label:trash``, anywhere in the query) or says ``in:anywhere``;
a box the user does not have matches nothing.
"""

from __future__ import annotations

import calendar
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, time, timedelta, tzinfo
from typing import Any

from mailroom.jmap.ids import mailbox_id
from mailroom.searching.syntax import (
    IN_ANYWHERE,
    Either,
    Node,
    Not,
    QueryError,
    Term,
    age_of,
    day_of,
    size_of,
)

Filter = dict[str, Any]
NOTHING: Filter = {"operator": "OR", "conditions": []}  # matches no email
EVERYTHING: Filter = {"operator": "AND", "conditions": []}
LEFT_OUT = ("spam", "trash")  # boxes a search skips unless it names them
_KEYWORDS = {
    "unread": ("notKeyword", "$seen"),
    "read": ("hasKeyword", "$seen"),
    "starred": ("hasKeyword", "$flagged"),
}


def jmap_text(value: str, phrase: bool) -> str:
    """``value`` as one token of a JMAP text condition (quoted when it must stay whole)."""
    if not phrase and not any(char.isspace() or char in "\"'\\" for char in value):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _utc(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _months_back(moment: datetime, months: int) -> datetime:
    year, month = divmod(moment.year * 12 + moment.month - 1 - months, 12)
    if year < 1:
        raise OverflowError
    day = min(moment.day, calendar.monthrange(year, month + 1)[1])
    return moment.replace(year=year, month=month + 1, day=day)


def _ago(now: datetime, count: int, unit: str) -> datetime:
    if unit in "dw":
        return now - timedelta(days=count * (7 if unit == "w" else 1))
    return _months_back(now, count * (12 if unit == "y" else 1))


class _Builder:
    """Turns one tree into a filter for one user."""

    def __init__(
        self,
        now: datetime,
        zone: tzinfo,
        labels: Mapping[str, int],
        roles: Mapping[str, int],
    ) -> None:
        self.now = now
        self.zone = zone
        self.labels = {path.lower(): label for path, label in labels.items()}
        self.roles = roles
        self.named: set[str] = set()  # system boxes the search names (spam, trash, anywhere)

    def node(self, node: Node) -> Filter:
        if isinstance(node, Term):
            return self.term(node)
        if isinstance(node, Not):
            return {"operator": "NOT", "conditions": [self.node(node.node)]}
        if isinstance(node, Either):
            return {"operator": "OR", "conditions": [self.node(part) for part in node.nodes]}
        words: list[str] = []
        conditions: list[Filter] = []
        for part in node.nodes:
            if isinstance(part, Term) and part.field is None:
                words.append(jmap_text(part.value, part.phrase))
            else:
                conditions.append(self.node(part))
        if words:  # one full-text condition for the group's words
            conditions.insert(0, {"text": " ".join(words)})
        if len(conditions) == 1:
            return conditions[0]
        return {"operator": "AND", "conditions": conditions}

    def box(self, role: str) -> Filter:
        self.named.add(role)
        found = self.roles.get(role)
        return {"inMailbox": mailbox_id(found)} if found is not None else NOTHING

    def label(self, name: str) -> Filter:
        wanted = name.lower()
        for key in (wanted, wanted.replace("-", " ")):
            if key in self.labels:
                return {"inMailbox": mailbox_id(self.labels[key])}
        if wanted in self.roles:
            return self.box(wanted)
        raise QueryError(f"There is no label {name!r}; the sidebar lists your labels.")

    def term(self, term: Term) -> Filter:
        field, value = term.field, term.value
        if field is None:
            return {"text": jmap_text(value, term.phrase)}
        if field in ("from", "to", "cc", "bcc", "subject"):
            return {field: jmap_text(value, term.phrase)}
        if field == "has":
            return {"hasAttachment": True}
        if field in ("is", "in") and value in _KEYWORDS:  # in:starred is is:starred
            name, keyword = _KEYWORDS[value]
            return {name: keyword}
        if field == "in" and value == IN_ANYWHERE:
            self.named.add(IN_ANYWHERE)
            return EVERYTHING
        if field in ("is", "in"):  # is:snoozed, in:BOX
            return self.box(value)
        if field == "label":
            return self.label(value)
        if field in ("larger", "smaller"):
            size = size_of(value) or 0
            return {"minSize": size} if field == "larger" else {"maxSize": size}
        return {("before" if field in ("before", "older_than") else "after"): self.moment(term)}

    def moment(self, term: Term) -> str:
        """The UTC instant a date or age term names."""
        try:
            day = day_of(term.value)
            if day is not None:
                return _utc(datetime.combine(day, time(), tzinfo=self.zone))
            age = age_of(term.value)
            assert age is not None  # the parser checked it
            return _utc(_ago(self.now, *age))
        except (OverflowError, ValueError):
            raise QueryError(f"{term.field}:{term.value} is too far back in time.") from None


def _left_out(builder: _Builder) -> Iterator[Filter]:
    if IN_ANYWHERE in builder.named:
        return
    for role in LEFT_OUT:
        if role not in builder.named and role in builder.roles:
            yield {"inMailbox": mailbox_id(builder.roles[role])}


def to_filter(
    node: Node,
    *,
    now: datetime,
    zone: tzinfo,
    labels: Mapping[str, int],
    roles: Mapping[str, int],
) -> Filter:
    """The JMAP filter of a parsed search for one user.

    ``labels`` maps the user's label paths to label ids, ``roles`` system roles
    to label ids; ``now`` and ``zone`` (the user's) place relative ages and
    dates. QueryError names an unknown label or a date out of range.
    """
    builder = _Builder(now, zone, labels, roles)
    built = builder.node(node)
    skipped = list(_left_out(builder))
    if not skipped:
        return built
    return {
        "operator": "AND",
        "conditions": [built, {"operator": "NOT", "conditions": skipped}],
    }
