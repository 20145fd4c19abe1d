"""``Email/query``: the filter as SQL, sorting, thread collapsing and paging.

Filters compile to one SQL condition on ``messages`` (always scoped to the
user). Every RFC 8621 §4.4.1 condition is supported: inMailbox,
inMailboxOtherThan, before, after, minSize, maxSize, hasKeyword,
notKeyword, allInThreadHaveKeyword, someInThreadHaveKeyword,
noneInThreadHaveKeyword, hasAttachment, text (the full-text index: subject,
participants and body), body (the body alone), from, to, cc, bcc, subject
and header (case-insensitive substrings, every token must occur), and with
the ``urn:mailroom:jmap:tabs`` capability ``category`` (the inbox tab of
the email's thread). Keywords: ``$seen`` is ``messages.seen_at``,
``$flagged`` the Starred label, every other keyword (``$draft`` too, which
is independent of the Drafts mailbox) a ``message_keywords`` row.

A sort by ``receivedAt`` alone (the list view) is read in keyset pages
(``received_at``, ``id``) and, with ``collapseThreads``, only the first
email of each thread is kept, so a first page of 50 reads little more than
50 rows. Other sorts (:mod:`mailroom.jmap.emailsort`) without a text
comparator are ordered by the database and read in offset pages; a sort
by ``subject``, ``from`` or ``to`` reads the sort columns of every
matching email and orders them in Python (RFC 5256 base subjects and the
collations, identical on both stores). Sealed rows (``crypto.message_fields``)
hold their address and subject columns as ciphertext: for an owner with sealed
mail, the ``from``, ``to``, ``cc``, ``bcc`` and ``subject`` conditions match
them in Python on the opened values and a text sort opens its columns
(:mod:`mailroom.jmap.sealed_columns`), with the answers the same mail kept
clear gives. ``calculateTotal`` is a separate count; a filter that is just
``inMailbox`` is counted from the trigger-kept ``thread_labels`` without
touching messages.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Boolean,
    ColumnElement,
    String,
    and_,
    case,
    cast,
    exists,
    false,
    func,
    not_,
    or_,
    select,
    text,
    true,
    type_coerce,
)
from sqlalchemy.orm import Session, aliased
from sqlalchemy.types import NullType

from mailroom.categories.tabs import CATEGORIES
from mailroom.crypto.blind_index import blind_terms_for_words
from mailroom.crypto.mail_reading import columns_of
from mailroom.jmap import ids
from mailroom.jmap.comparators import Comparator, keyword_argument, parse_sort
from mailroom.jmap.emailsort import (
    EMAIL_SORTS,
    IMMUTABLE_SORTS,
    KEYWORD_SORTS,
    SORT_PROPERTIES,
    TEXT_SORTS,
    newest_first_only,
    order_rows,
)
from mailroom.jmap.errors import MethodError, invalid_arguments
from mailroom.jmap.methods.common import is_int, parse_utc_date
from mailroom.jmap.sealed_columns import SealedMail, opened
from mailroom.jmap.textsearch import (
    blind_words_of,
    fulltext_clause,
    last_word_is_prefix,
    split_text,
)
from mailroom.store.models import (
    Label,
    Message,
    MessageBody,
    MessageKeyword,
    MessageLabel,
    Thread,
    ThreadLabel,
)

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
        "header",
    }
)
TAB_CONDITIONS = frozenset({"category"})
# Conditions on mail columns a sealed row holds as ciphertext (matched in Python for it).
SEALED_TEXT_CONDITIONS = frozenset({"from", "to", "cc", "bcc", "subject"})
# Conditions on what an email is, never on what is done to it (RFC 8620 §5.6 upToId).
IMMUTABLE_CONDITIONS = frozenset(
    {"before", "after", "minSize", "maxSize", "hasAttachment", "text", "body", "header"}
    | {"from", "to", "cc", "bcc", "subject"}
)
__all__ = ["SORT_PROPERTIES", "EmailFilter", "EmailSearch", "QueryResult"]

# Bounds of one filter, so that a filter costs only its own request. SQLite
# parses `a OR b OR …` into a tree one level per term and refuses more than
# 1000 levels; each full-text condition is a subquery on the search index.
# Past a bound the filter is `unsupportedFilter` (RFC 8620 §5.5: valid, but
# the server cannot process it; the client should ask for a simpler search).
MAX_FILTER_DEPTH = 20  # nested FilterOperators
MAX_FILTER_TERMS = 500  # operators + conditions + inMailboxOtherThan entries
MAX_TEXT_CONDITIONS = 50  # text, body and header conditions

MessageLike = Any  # the Message entity or an alias of it


def like_pattern(value: str) -> str:
    """A LIKE pattern (escape character ``\\``) matching ``value`` anywhere, lower-cased."""
    escaped = value.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def sql_condition(sql: str, params: dict[str, Any]) -> ColumnElement[bool]:
    """A condition written in SQL, parenthesised and typed, so NOT, AND and OR take it."""
    return type_coerce(text(f"({sql})").bindparams(**params), Boolean)


def _verbatim_in_json(value: str) -> bool:
    """Whether JSON text holds ``value`` unchanged (printable ASCII without quotes or \\)."""
    return value.isascii() and value.isprintable() and '"' not in value and "\\" not in value


class EmailFilter:
    """Compiles a JMAP FilterOperator / FilterCondition tree into SQL."""

    def __init__(
        self, session: Session, user_id: int, roles: dict[str, int], *, tabs: bool
    ) -> None:
        self.session = session
        self.dialect = session.get_bind().dialect.name
        self.user_id = user_id
        self.roles = roles
        self.tabs = tabs
        self.simple_mailbox: int | None = None  # set when the filter is only inMailbox
        self.mutable = False  # whether a condition depends on keywords, mailboxes or threads
        self.sealed = SealedMail(session, user_id)  # the owner's sealed mail, opened when needed
        # What the conditions AND-ed with the one being compiled require (None: nothing):
        # sealed rows are opened and matched among those only.
        self._narrow: ColumnElement[bool] | None = None
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
        keyword = keyword_argument(value)
        if keyword == "$seen":
            return message.seen_at.is_not(None)  # type: ignore[no-any-return]
        if keyword == "$flagged":
            return self._has_label(message, self.roles.get("starred"))
        return exists().where(
            MessageKeyword.message_id == message.id, MessageKeyword.keyword == keyword
        )

    def thread_keyword(self, value: object, mode: str) -> ColumnElement[bool]:
        """SQL for "all / some / none of the emails of this email's thread have the keyword"."""
        return self._in_thread(value, mode)

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

    def _next_param(self) -> int:
        """A number for the parameters of one more text, body or header condition."""
        self._params += 1
        if self._params > MAX_TEXT_CONDITIONS:
            raise MethodError(
                "unsupportedFilter",
                f"The filter has more than {MAX_TEXT_CONDITIONS} text, body and header "
                "conditions; simplify the search.",
            )
        return self._params

    def _fulltext(self, value: object, name: str) -> ColumnElement[bool]:
        if not isinstance(value, str):
            raise invalid_arguments(f"{name} must be a string.")
        column = "body" if name == "body" else None
        blind = blind_terms_for_words(
            self.session,
            self.user_id,
            blind_words_of(value),
            body_only=column == "body",
            prefix_last=last_word_is_prefix(value),
        )
        clause = fulltext_clause(
            self.dialect, value, column, f"fts_{self._next_param()}", blind, self.user_id
        )
        if clause is None:
            return true()
        sql, params = clause
        return sql_condition(sql, params)

    def _tokens(self, value: object, name: str) -> list[str]:
        """The tokens of a text condition (all must match), counted towards the bounds."""
        if not isinstance(value, str):
            raise invalid_arguments(f"{name} must be a string.")
        tokens = split_text(value)
        self._count(len(tokens))
        return [token.text for token in tokens]

    def _substrings(self, column: Any, value: object, name: str) -> ColumnElement[bool]:
        lowered = func.lower(column)
        tokens = self._tokens(value, name)
        clear = and_(true(), *(lowered.like(like_pattern(t), escape="\\") for t in tokens))
        return self._clear_or_sealed(
            clear, tokens, lambda: self.sealed.substring_matches(name, tokens, self._narrow)
        )

    def _clear_or_sealed(
        self, clear: ColumnElement[bool], tokens: list[str], sealed: Callable[[], list[int]]
    ) -> ColumnElement[bool]:
        """``clear`` for clear rows; for the owner's sealed rows, the ids ``sealed`` matched.

        Sealed columns cannot be matched in SQL: they are opened and matched in Python
        (``jmap.sealed_columns``), only when the owner has sealed mail, and only among
        the rows the conditions AND-ed with this one allow (``_narrow``): the result is
        the same on every row those allow, and the others fail the AND anyway.
        """
        if not tokens or not self.sealed.present:
            return clear
        found = sealed()
        listed = ", ".join(str(int(message_id)) for message_id in found)
        matched = sql_condition(f"messages.id IN ({listed})" if found else "1 = 0", {})
        return or_(and_(not_(Message.sealed), clear), matched)

    def _address(self, key: str, value: object, name: str) -> ColumnElement[bool]:
        column = func.lower(cast(Message.recipients[key], String))
        parts: list[ColumnElement[bool]] = []
        tokens = self._tokens(value, name)
        for token in tokens:
            # recipients is JSON: non-ASCII may be stored \u-escaped, so try both spellings
            plain, escaped = like_pattern(token), like_pattern(json.dumps(token)[1:-1])
            parts.append(or_(column.like(plain, escape="\\"), column.like(escaped, escape="\\")))
        return self._clear_or_sealed(
            and_(true(), *parts),
            tokens,
            lambda: self.sealed.address_matches(key, tokens, self._narrow),
        )

    def _header(self, value: object) -> ColumnElement[bool]:
        """``header``: [name] has such a field; [name, text] one whose value holds the text.

        A LIKE on the stored JSON text first skips the emails that cannot match
        (for names and ASCII tokens, which JSON keeps as they are), so the
        header list is unpacked only for the candidates.
        """
        if (
            not isinstance(value, list)
            or len(value) not in (1, 2)
            or not all(isinstance(v, str) for v in value)
            or not value[0]
        ):
            raise invalid_arguments("header must be [name] or [name, text], both strings.")
        index = self._next_param()
        name = value[0]
        params: dict[str, str | int] = {f"hname_{index}": name.lower()}
        tokens = self._tokens(value[1], "header") if len(value) == 2 else []
        if self.dialect == "sqlite":
            raw, like = "b.headers", "LIKE"
            # A sealed row's header list is one sealed string: matched in Python instead.
            rows = "json_each(CASE WHEN b.sealed THEN '[]' ELSE b.headers END) AS h"
            name_sql, value_sql = "json_extract(h.value, '$[0]')", "json_extract(h.value, '$[1]')"
        else:
            raw, like = "CAST(b.headers AS TEXT)", "ILIKE"
            rows = (
                "json_array_elements(CASE WHEN b.sealed THEN '[]'::json ELSE b.headers END) "
                "AS h(value)"
            )
            name_sql, value_sql = "(h.value ->> 0)", "(h.value ->> 1)"
        tests = [f"lower({name_sql}) = :hname_{index}"]
        quick: list[str] = []
        literals = [f'"{name}"' if _verbatim_in_json(name) else None]
        literals += [token if _verbatim_in_json(token) else None for token in tokens]
        for number, literal in enumerate(literals):
            if literal is not None:
                params[f"hraw_{index}_{number}"] = like_pattern(literal)
                quick.append(f"{raw} {like} :hraw_{index}_{number} ESCAPE '\\'")
        for number, token in enumerate(tokens):
            params[f"hvalue_{index}_{number}"] = like_pattern(token)
            tests.append(f"lower({value_sql}) LIKE :hvalue_{index}_{number} ESCAPE '\\'")
        sql = (
            f"EXISTS (SELECT 1 FROM {MessageBody.__tablename__} AS b "
            f"WHERE b.message_id = messages.id {''.join(' AND ' + q for q in quick)} "
            f"AND EXISTS (SELECT 1 FROM {rows} WHERE {' AND '.join(tests)}))"
        )
        sealed = self._sealed_header_matches(name.lower(), tokens)
        if sealed:
            listed = {f"hsealed_{index}_{n}": message_id for n, message_id in enumerate(sealed)}
            params.update(listed)
            sql += f" OR messages.id IN ({', '.join(':' + key for key in listed)})"
        return sql_condition(sql, params)

    def _sealed_header_matches(self, name: str, tokens: list[str]) -> list[int]:
        """The owner's sealed messages with a header ``name`` holding every token.

        Sealed header lists cannot be searched in SQL: they are opened and matched here
        (``crypto.mail_reading``), a cost that grows with the owner's sealed mail.
        """
        ids = list(
            self.session.scalars(
                select(MessageBody.message_id)
                .join(Message, Message.id == MessageBody.message_id)
                .where(Message.user_id == self.user_id, MessageBody.sealed)
            )
        )
        if not ids:
            return []
        wanted = [token.lower() for token in tokens]
        found = []
        for message_id, columns in columns_of(self.session, ids, ["headers"]).items():
            for pair in columns["headers"] or []:
                if len(pair) < 2 or str(pair[0]).lower() != name:
                    continue
                value = str(pair[1]).lower()
                if all(token in value for token in wanted):
                    found.append(message_id)
                    break
        return sorted(found)

    def _mailbox_id(self, value: object, name: str) -> int:
        if not isinstance(value, str):
            raise invalid_arguments(f"{name} must be a Mailbox id.")
        return ids.parse_mailbox(value) or -1

    def condition(self, node: dict[str, Any]) -> ColumnElement[bool]:
        """One FilterCondition (all its properties must hold)."""
        known = CONDITIONS | (TAB_CONDITIONS if self.tabs else frozenset())
        parts: list[ColumnElement[bool]] = []
        outer = self._narrow
        items = list(node.items())
        narrowing = self._narrows(node)
        if narrowing:  # sealed text conditions last, matched among the others' rows
            items.sort(key=lambda item: item[0] in SEALED_TEXT_CONDITIONS)
        for key, value in items:
            if narrowing and key in SEALED_TEXT_CONDITIONS:
                self._narrow = and_(true(), *([] if outer is None else [outer]), *parts)
            if key not in known:
                raise MethodError("unsupportedFilter", f"The filter {key!r} is not supported.")
            if key not in IMMUTABLE_CONDITIONS:
                self.mutable = True
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
                sender = Message.from_name + " <" + Message.from_email + ">"
                parts.append(self._substrings(sender, value, key))
            elif key in ("to", "cc", "bcc"):
                parts.append(self._address(key, value, key))
            elif key == "subject":
                parts.append(self._substrings(Message.subject, value, key))
            elif key == "header":
                parts.append(self._header(value))
            elif key == "category":
                if value not in CATEGORIES:
                    raise invalid_arguments(f"category must be one of {', '.join(CATEGORIES)}.")
                parts.append(
                    exists().where(Thread.id == Message.thread_id, Thread.category == value)
                )
        self._narrow = outer
        return and_(true(), *parts)

    def _narrows(self, node: object) -> bool:
        """Whether ``node`` has a sealed text condition and the owner sealed mail to match."""
        return _mentions_sealed_text(node, 0) and self.sealed.present

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
        compiled: list[ColumnElement[bool]] = []
        outer = self._narrow
        if operator == "AND" and self._narrows(node):
            # Sealed text conditions last, each matched among the rows its siblings allow.
            for child in sorted(conditions, key=lambda c: _mentions_sealed_text(c, 0)):
                if _mentions_sealed_text(child, 0):
                    self._narrow = and_(true(), *([] if outer is None else [outer]), *compiled)
                compiled.append(self._node(child, depth + 1))
            self._narrow = outer
        else:
            compiled = [self._node(c, depth + 1) for c in conditions]
        if operator == "AND":
            return and_(true(), *compiled)
        if operator == "OR":
            return or_(false(), *compiled)
        if operator == "NOT":
            return not_(or_(false(), *compiled))
        raise invalid_arguments(f"Unknown filter operator {operator!r}.")


def _mentions_sealed_text(node: object, depth: int) -> bool:
    """Whether a filter (sub)tree has a from, to, cc, bcc or subject condition."""
    if not isinstance(node, dict) or depth > MAX_FILTER_DEPTH + 1:
        return False
    if "operator" not in node:
        return not SEALED_TEXT_CONDITIONS.isdisjoint(node)
    conditions = node.get("conditions")
    if not isinstance(conditions, list):
        return False
    return any(_mentions_sealed_text(child, depth + 1) for child in conditions)


def parse_comparators(sort: object) -> list[Comparator]:
    """The validated comparators of a ``sort`` argument (none: newest first)."""
    return parse_sort(sort, EMAIL_SORTS)


def is_immutable(compiler: EmailFilter, comparators: Sequence[Comparator]) -> bool:
    """Whether the filter and sort use only properties an email never changes."""
    return not compiler.mutable and all(c.property in IMMUTABLE_SORTS for c in comparators)


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
        compiler: EmailFilter,
        condition: ColumnElement[bool],
        *,
        comparators: Sequence[Comparator],
        collapse: bool,
        user_id: int,
    ) -> None:
        self.session = session
        self.compiler = compiler
        self.condition = condition
        self.comparators = list(comparators)
        self.collapse = collapse
        self.user_id = user_id
        self.simple_mailbox = compiler.simple_mailbox
        keyset = newest_first_only(self.comparators)
        self.keyset = keyset is not None  # the list view: keyset pages by (received_at, id)
        self.ascending = bool(keyset)
        # Without a text comparator the database orders (and pages) the results itself.
        self.in_python = any(c.property in TEXT_SORTS for c in self.comparators)
        self._ordered: list[int] | None = None

    def _flag(self, comparator: Comparator) -> ColumnElement[int]:
        """A keyword comparator's value as 0/1."""
        if comparator.property == "hasKeyword":
            flag = self.compiler.keyword(Message, comparator.keyword)
        else:
            mode = "all" if comparator.property == "allInThreadHaveKeyword" else "some"
            flag = self.compiler.thread_keyword(comparator.keyword, mode)
        return case((flag, 1), else_=0)

    def _order(self) -> list[Any]:
        """ORDER BY of a sort without text comparators (ties by id, as in emailsort)."""
        clauses: list[Any] = []
        for comparator in self.comparators:
            name, ascending = comparator.property, comparator.ascending
            if name in KEYWORD_SORTS:
                column: Any = self._flag(comparator)
            else:
                column = {"receivedAt": Message.received_at, "size": Message.size}.get(
                    name, Message.sent_at
                )
            ordered = column.asc() if ascending else column.desc()
            if name == "sentAt":  # a missing date is the smallest, as in emailsort
                ordered = ordered.nulls_first() if ascending else ordered.nulls_last()
            clauses.append(ordered)
        clauses.append(Message.id.asc() if self.comparators[-1].ascending else Message.id.desc())
        return clauses

    # -- receivedAt alone: keyset pages ---------------------------------------

    def _pages(self, first_size: int) -> Iterator[tuple[int, int | None]]:
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
            rows = self.session.execute(query.order_by(*self._order()).limit(size)).all()
            for row in rows:
                yield row.id, row.thread_id
            if len(rows) < size:
                return
            last = (rows[-1].received_at, rows[-1].id)
            size = min(size * 4, 20_000)

    # -- a sort with a text comparator: every match, ordered in Python --------

    def _sorted(self) -> Iterator[tuple[int, int | None]]:
        columns: list[Any] = [Message.id, Message.thread_id]
        needed = {c.property for c in self.comparators}
        # Dates are compared as the driver returns them (ISO text on SQLite, aware
        # datetimes on PostgreSQL): both order correctly, and converting every row
        # into an aware datetime would cost more than the sort itself.
        simple: dict[str, list[Any]] = {
            "receivedAt": [type_coerce(Message.received_at, NullType()).label("received_at")],
            "size": [Message.size],
            "sentAt": [type_coerce(Message.sent_at, NullType()).label("sent_at")],
            "subject": [Message.subject],
            "from": [Message.from_name, Message.from_email],
            "to": [Message.recipients],
        }
        for name, wanted in simple.items():
            if name in needed:
                columns.extend(wanted)
        for index, comparator in enumerate(self.comparators):
            if comparator.property in KEYWORD_SORTS:
                columns.append(self._flag(comparator).label(f"k{index}"))
        texts = [column.key for name in TEXT_SORTS & needed for column in simple[name]]
        sealed = bool(texts) and self.compiler.sealed.present
        if sealed:  # sealed rows' sort columns are opened below
            columns += [Message.user_id, Message.sealed]
        # Core rows (no ORM loading): every matching email is read here.
        rows: list[Any] = list(
            self.session.connection().execute(select(*columns).where(self.condition)).all()
        )
        if sealed:
            rows = opened(self.session, rows, texts)
        for row in order_rows(rows, self.comparators):
            yield row.id, row.thread_id

    def _collapsed(self, rows: Iterator[tuple[int, int | None]]) -> Iterator[int]:
        seen: set[int] = set()
        for message_id, thread in rows:
            if self.collapse:
                key = thread if thread is not None else -message_id
                if key in seen:
                    continue
                seen.add(key)
            yield message_id

    def ordered(self) -> list[int]:
        """Every result id in order, for a sort with a text comparator (kept once read)."""
        if self._ordered is None:
            self._ordered = list(self._collapsed(self._sorted()))
        return self._ordered

    # -- any other sort without text: offset pages ordered by the database ---

    def _offset_pages(self, first_size: int) -> Iterator[tuple[int, int | None]]:
        offset, size = 0, max(first_size, 50)
        query = select(Message.id, Message.thread_id).where(self.condition).order_by(*self._order())
        while True:
            rows = self.session.execute(query.offset(offset).limit(size)).all()
            for row in rows:
                yield row.id, row.thread_id
            if len(rows) < size:
                return
            offset += size
            size = min(size * 4, 20_000)

    def iterate(self, first_size: int = 200) -> Iterator[int]:
        """Result ids in order (collapsed to one per thread when asked)."""
        if self.in_python:
            return iter(self.ordered())
        if self.keyset:
            return self._collapsed(self._pages(first_size))
        return self._collapsed(self._offset_pages(first_size))

    # -- totals and pages -----------------------------------------------------

    def total(self) -> int:
        """The number of results."""
        if self.in_python:
            return len(self.ordered())
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
            return self._around(anchor, anchor_offset, limit, total)
        if position < 0:
            assert total is not None
            position = max(0, total + position)
        if self.in_python:
            return QueryResult(self.ordered()[position : position + limit], position, total)
        if not self.collapse and limit > 0:
            found = self.session.scalars(
                select(Message.id)
                .where(self.condition)
                .order_by(*self._order())
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

    def _around(
        self, anchor: int, anchor_offset: int, limit: int, total: int | None
    ) -> QueryResult:
        """RFC 8620 §5.5: from the anchor's index plus the offset (at least 0)."""
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

    def ids_up_to(self, last: int | None) -> list[int]:
        """Result ids in order, up to and including ``last`` (all of them if it is not found)."""
        found: list[int] = []
        for message_id in self.iterate(1000):
            found.append(message_id)
            if message_id == last:
                break
        return found
