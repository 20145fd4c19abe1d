"""``Email/query``: the filter as SQL, sorting, thread collapsing and paging.

Filters compile to one SQL condition on ``messages`` (always scoped to the
user). Supported conditions: inMailbox, inMailboxOtherThan, before, after,
minSize, maxSize, hasKeyword, notKeyword, allInThreadHaveKeyword,
someInThreadHaveKeyword, noneInThreadHaveKeyword, hasAttachment, text,
body (the full-text index: subject, participants and body), from, to, cc,
bcc, subject (case-insensitive substring), and with the
``urn:mailroom:jmap:tabs`` capability ``category`` (the inbox tab of the
email's thread). ``header`` is ``unsupportedFilter``.

Sorting is by ``receivedAt`` (ties by id, in the same direction). Results
are read newest-first in keyset pages (``received_at``, ``id``) and, with
``collapseThreads``, only the first email of each thread is kept, so a
first page of 50 reads little more than 50 rows. ``calculateTotal`` is a
separate count; a filter that is just ``inMailbox`` is counted from the
trigger-kept ``thread_labels`` without touching messages.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    String,
    and_,
    cast,
    exists,
    false,
    func,
    not_,
    or_,
    select,
    text,
    true,
)
from sqlalchemy.orm import Session, aliased

from mailroom.categories.cascade import CATEGORIES
from mailroom.jmap import ids
from mailroom.jmap.errors import MethodError, invalid_arguments
from mailroom.jmap.methods.common import is_int, parse_utc_date
from mailroom.store.models import Label, Message, MessageLabel, Thread, ThreadLabel
from mailroom.store.search import match_clause

CONDITIONS = frozenset(
    {
        "inMailbox",
        "inMailboxOtherThan",
        "before",
        "after",
        "minSize",
        "maxSize",
        "allInThreadHaveKeyword",
        "someInThreadHaveKeyword",
        "noneInThreadHaveKeyword",
        "hasKeyword",
        "notKeyword",
        "hasAttachment",
        "text",
        "from",
        "to",
        "cc",
        "bcc",
        "subject",
        "body",
    }
)
TAB_CONDITIONS = frozenset({"category"})
SORT_PROPERTIES = ("receivedAt",)

# Bounds of one filter, so that a filter costs only its own request. SQLite
# parses `a OR b OR …` into a tree one level per term and refuses more than
# 1000 levels; each full-text condition is a subquery on the search index.
# Past a bound the filter is `unsupportedFilter` (RFC 8620 §5.5: valid, but
# the server cannot process it; the client should ask for a simpler search).
MAX_FILTER_DEPTH = 20  # nested FilterOperators
MAX_FILTER_TERMS = 500  # operators + conditions + inMailboxOtherThan entries
MAX_TEXT_CONDITIONS = 50  # text and body conditions

MessageLike = Any  # the Message entity or an alias of it


class EmailFilter:
    """Compiles a JMAP FilterOperator / FilterCondition tree into SQL."""

    def __init__(
        self, session: Session, user_id: int, roles: dict[str, int], *, tabs: bool
    ) -> None:
        self.dialect = session.get_bind().dialect.name
        self.user_id = user_id
        self.roles = roles
        self.tabs = tabs
        self.simple_mailbox: int | None = None  # set when the filter is only inMailbox
        self._params = 0
        self._terms = 0

    def _count(self, terms: int) -> None:
        self._terms += terms
        if self._terms > MAX_FILTER_TERMS:
            raise MethodError(
                "unsupportedFilter",
                f"The filter has more than {MAX_FILTER_TERMS} conditions, operators and "
                "mailbox ids; simplify the search.",
            )

    # -- keywords -------------------------------------------------------------

    def _has_label(self, message: MessageLike, label_id: int | None) -> ColumnElement[bool]:
        if label_id is None:
            return false()
        return exists().where(
            MessageLabel.message_id == message.id, MessageLabel.label_id == label_id
        )

    def keyword(self, message: MessageLike, value: object) -> ColumnElement[bool]:
        """SQL for "this message has the keyword"."""
        if not isinstance(value, str) or not value:
            raise invalid_arguments("A keyword must be a non-empty string.")
        keyword = value.lower()
        if keyword == "$seen":
            return message.seen_at.is_not(None)  # type: ignore[no-any-return]
        if keyword == "$flagged":
            return self._has_label(message, self.roles.get("starred"))
        if keyword == "$draft":
            return self._has_label(message, self.roles.get("drafts"))
        return false()

    def _in_thread(self, value: object, mode: str) -> ColumnElement[bool]:
        other = aliased(Message)
        condition = self.keyword(other, value)
        same_thread = other.thread_id == Message.thread_id
        alone = Message.thread_id.is_(None)
        if mode == "some":
            return or_(
                and_(alone, self.keyword(Message, value)),
                exists().where(same_thread, condition),
            )
        if mode == "none":
            return and_(
                or_(~alone, not_(self.keyword(Message, value))),
                ~exists().where(same_thread, condition),
            )
        return and_(
            or_(~alone, self.keyword(Message, value)),
            ~exists().where(same_thread, not_(condition)),
        )

    # -- conditions -----------------------------------------------------------

    def _fulltext(self, value: object, name: str) -> ColumnElement[bool]:
        if not isinstance(value, str):
            raise invalid_arguments(f"{name} must be a string.")
        clause = match_clause(self.dialect, value)
        if clause is None:
            return true()
        sql, params = clause
        self._params += 1
        if self._params > MAX_TEXT_CONDITIONS:
            raise MethodError(
                "unsupportedFilter",
                f"The filter has more than {MAX_TEXT_CONDITIONS} text and body conditions; "
                "simplify the search.",
            )
        bound = {f"fts_{self._params}": params["fts"]}
        return text(sql.replace(":fts", f":fts_{self._params}")).bindparams(**bound)  # type: ignore[return-value]

    @staticmethod
    def _like(value: object, name: str) -> str:
        if not isinstance(value, str):
            raise invalid_arguments(f"{name} must be a string.")
        escaped = value.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        return f"%{escaped}%"

    def _address(self, key: str, value: object, name: str) -> ColumnElement[bool]:
        plain = self._like(value, name)
        assert isinstance(value, str)
        # recipients is JSON: non-ASCII may be stored \u-escaped, so try both spellings
        escaped = self._like(json.dumps(value)[1:-1], name)
        column = func.lower(cast(Message.recipients[key], String))
        return or_(column.like(plain, escape="\\"), column.like(escaped, escape="\\"))

    def _mailbox_id(self, value: object, name: str) -> int:
        if not isinstance(value, str):
            raise invalid_arguments(f"{name} must be a Mailbox id.")
        return ids.parse_mailbox(value) or -1

    def condition(self, node: dict[str, Any]) -> ColumnElement[bool]:
        """One FilterCondition (all its properties must hold)."""
        known = CONDITIONS | (TAB_CONDITIONS if self.tabs else frozenset())
        parts: list[ColumnElement[bool]] = []
        for key, value in node.items():
            if key not in known:
                raise MethodError("unsupportedFilter", f"The filter {key!r} is not supported.")
            if key == "inMailbox":
                parts.append(self._has_label(Message, self._mailbox_id(value, key)))
            elif key == "inMailboxOtherThan":
                if not isinstance(value, list):
                    raise invalid_arguments("inMailboxOtherThan must be a list of Mailbox ids.")
                self._count(len(value))
                excluded = [self._mailbox_id(v, key) for v in value]
                parts.append(
                    exists().where(
                        MessageLabel.message_id == Message.id,
                        MessageLabel.label_id.not_in(excluded),
                    )
                )
            elif key == "before":
                parts.append(Message.received_at < parse_utc_date(value, key))
            elif key == "after":
                parts.append(Message.received_at >= parse_utc_date(value, key))
            elif key in ("minSize", "maxSize"):
                if not is_int(value, minimum=0):
                    raise invalid_arguments(f"{key} must be an unsigned integer (at most 2^53-1).")
                parts.append(Message.size >= value if key == "minSize" else Message.size < value)
            elif key == "hasKeyword":
                parts.append(self.keyword(Message, value))
            elif key == "notKeyword":
                parts.append(not_(self.keyword(Message, value)))
            elif key == "allInThreadHaveKeyword":
                parts.append(self._in_thread(value, "all"))
            elif key == "someInThreadHaveKeyword":
                parts.append(self._in_thread(value, "some"))
            elif key == "noneInThreadHaveKeyword":
                parts.append(self._in_thread(value, "none"))
            elif key == "hasAttachment":
                if not isinstance(value, bool):
                    raise invalid_arguments("hasAttachment must be true or false.")
                parts.append(Message.has_attachment.is_(value))
            elif key in ("text", "body"):
                parts.append(self._fulltext(value, key))
            elif key == "from":
                pattern = self._like(value, key)
                parts.append(
                    or_(
                        func.lower(Message.from_email).like(pattern, escape="\\"),
                        func.lower(Message.from_name).like(pattern, escape="\\"),
                    )
                )
            elif key in ("to", "cc", "bcc"):
                parts.append(self._address(key, value, key))
            elif key == "subject":
                parts.append(func.lower(Message.subject).like(self._like(value, key), escape="\\"))
            elif key == "category":
                if value not in CATEGORIES:
                    raise invalid_arguments(f"category must be one of {', '.join(CATEGORIES)}.")
                parts.append(
                    exists().where(Thread.id == Message.thread_id, Thread.category == value)
                )
        return and_(true(), *parts)

    def compile(self, node: object) -> ColumnElement[bool]:
        """The whole filter (None: everything), scoped to the user."""
        scope = Message.user_id == self.user_id
        if node is None:
            return scope
        if isinstance(node, dict) and set(node) == {"inMailbox"}:
            self.simple_mailbox = self._mailbox_id(node["inMailbox"], "inMailbox")
        return and_(scope, self._node(node, 0))

    def _node(self, node: object, depth: int) -> ColumnElement[bool]:
        if depth > MAX_FILTER_DEPTH:
            raise MethodError(
                "unsupportedFilter",
                f"The filter is nested deeper than {MAX_FILTER_DEPTH} operators; "
                "simplify the search.",
            )
        if not isinstance(node, dict):
            raise invalid_arguments("A filter must be an object.")
        self._count(1)
        if "operator" not in node:
            return self.condition(node)
        operator, conditions = node.get("operator"), node.get("conditions")
        if set(node) - {"operator", "conditions"} or not isinstance(conditions, list):
            raise invalid_arguments("A FilterOperator has only operator and conditions.")
        compiled = [self._node(c, depth + 1) for c in conditions]
        if operator == "AND":
            return and_(true(), *compiled)
        if operator == "OR":
            return or_(false(), *compiled)
        if operator == "NOT":
            return not_(or_(false(), *compiled))
        raise invalid_arguments(f"Unknown filter operator {operator!r}.")


def sort_direction(sort: object) -> bool:
    """True for ascending; the sort must be receivedAt (the default is newest first)."""
    if sort is None:
        return False
    if not isinstance(sort, list):
        raise invalid_arguments("sort must be a list of comparators.")
    if not sort:
        return False
    ascending: bool | None = None
    for comparator in sort:
        if not isinstance(comparator, dict) or not isinstance(comparator.get("property"), str):
            raise invalid_arguments("A comparator needs a property.")
        if comparator["property"] not in SORT_PROPERTIES:
            raise MethodError(
                "unsupportedSort", f"Sorting by {comparator['property']!r} is not supported."
            )
        is_ascending = comparator.get("isAscending", True)
        if not isinstance(is_ascending, bool):
            raise invalid_arguments("isAscending must be true or false.")
        if ascending is None:
            ascending = is_ascending
    return bool(ascending)


@dataclass
class QueryResult:
    """One page of results and where it starts."""

    ids: list[int]
    position: int
    total: int | None = None


class EmailSearch:
    """Runs a compiled filter: ordered, optionally collapsed, paged."""

    def __init__(
        self,
        session: Session,
        condition: ColumnElement[bool],
        *,
        ascending: bool,
        collapse: bool,
        user_id: int,
        simple_mailbox: int | None = None,
    ) -> None:
        self.session = session
        self.condition = condition
        self.ascending = ascending
        self.collapse = collapse
        self.user_id = user_id
        self.simple_mailbox = simple_mailbox

    def _pages(self, first_size: int) -> Iterator[tuple[int, int | None]]:
        order = (
            (Message.received_at.asc(), Message.id.asc())
            if self.ascending
            else (Message.received_at.desc(), Message.id.desc())
        )
        last: tuple[datetime, int] | None = None
        size = max(first_size, 50)
        while True:
            query = select(Message.id, Message.thread_id, Message.received_at).where(self.condition)
            if last is not None:
                when, key = last
                if self.ascending:
                    query = query.where(
                        Message.received_at >= when,
                        not_(and_(Message.received_at == when, Message.id <= key)),
                    )
                else:
                    query = query.where(
                        Message.received_at <= when,
                        not_(and_(Message.received_at == when, Message.id >= key)),
                    )
            rows = self.session.execute(query.order_by(*order).limit(size)).all()
            for row in rows:
                yield row.id, row.thread_id
            if len(rows) < size:
                return
            last = (rows[-1].received_at, rows[-1].id)
            size = min(size * 4, 20_000)

    def iterate(self, first_size: int = 200) -> Iterator[int]:
        """Result ids in order (collapsed to one per thread when asked)."""
        seen: set[int] = set()
        for message_id, thread in self._pages(first_size):
            if self.collapse:
                key = thread if thread is not None else -message_id
                if key in seen:
                    continue
                seen.add(key)
            yield message_id

    def total(self) -> int:
        """The number of results."""
        if self.simple_mailbox is not None:
            return self._mailbox_total(self.simple_mailbox)
        if self.collapse:
            counted = func.count(func.distinct(func.coalesce(Message.thread_id, -Message.id)))
        else:
            counted = func.count()
        return int(self.session.scalar(select(counted).where(self.condition)) or 0)

    def _mailbox_total(self, label_id: int) -> int:
        owned = self.session.scalar(
            select(Label.id).where(Label.id == label_id, Label.user_id == self.user_id)
        )
        if owned is None:
            return 0
        # The triggers delete a thread_labels row when its count reaches 0, so the
        # collapsed total is a count over the covering label index alone.
        counted = (
            func.count() if self.collapse else func.coalesce(func.sum(ThreadLabel.message_count), 0)
        )
        threaded = self.session.scalar(select(counted).where(ThreadLabel.label_id == label_id))
        # Threading failed for these (rare): count them without scanning the user's mail.
        loose = self.session.scalar(
            select(func.count())
            .select_from(Message)
            .where(
                Message.thread_id.is_(None),
                exists().where(
                    MessageLabel.message_id == Message.id, MessageLabel.label_id == label_id
                ),
            )
        )
        return int(threaded or 0) + int(loose or 0)

    def page(
        self,
        *,
        position: int,
        anchor: int | None,
        anchor_offset: int,
        limit: int,
        want_total: bool,
    ) -> QueryResult:
        """The results from a position (or around an anchor), at most ``limit`` of them."""
        total = self.total() if want_total or (position < 0 and anchor is None) else None
        if anchor is not None:
            collected: list[int] = []
            start: int | None = None
            for message_id in self.iterate(limit * 2 + max(anchor_offset, 0) + 50):
                collected.append(message_id)
                if start is None and message_id == anchor:
                    start = max(0, len(collected) - 1 + anchor_offset)
                if start is not None and len(collected) >= start + limit:
                    break
            if start is None:
                raise MethodError("anchorNotFound", "The anchor is not in the results.")
            return QueryResult(collected[start : start + limit], start, total)
        if position < 0:
            assert total is not None
            position = max(0, total + position)
        if not self.collapse and limit > 0:
            order = (
                (Message.received_at.asc(), Message.id.asc())
                if self.ascending
                else (Message.received_at.desc(), Message.id.desc())
            )
            found = self.session.scalars(
                select(Message.id)
                .where(self.condition)
                .order_by(*order)
                .offset(position)
                .limit(limit)
            ).all()
            return QueryResult(list(found), position, total)
        page: list[int] = []
        if limit > 0:
            for index, message_id in enumerate(self.iterate(2 * (position + limit) + 50)):
                if index >= position:
                    page.append(message_id)
                    if len(page) >= limit:
                        break
        return QueryResult(page, position, total)

    def all_ids(self) -> list[int]:
        """Every result id in order (for queryChanges)."""
        return list(self.iterate(1000))
