"""One page of search results: matching threads, newest match first, with snippets.

The filter (:mod:`.filters`) runs on :class:`~mailroom.jmap.emailquery.EmailSearch`
with threads collapsed, so each thread appears once, at its newest matching
message, and the first page reads little more than its own rows. Pages are
offsets (``start``), bounded by :data:`MAX_START`. The rows are
:class:`~mailroom.listing.ThreadRow` as every listing has them; each comes
with a :class:`Match`: the thread's subject with the searched words marked,
and a snippet of the matching message (where the words occur, marked; its
preview when they occur elsewhere, e.g. for ``from:``). Both are HTML,
escaped first and then wrapped in ``<mark>``, as ``SearchSnippet/get`` makes
them. A message whose threading failed has no thread row and is left out.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_
from sqlalchemy.orm import Session

from mailroom.crypto.mail_reading import columns_of
from mailroom.jmap.emailquery import EmailFilter, EmailSearch, parse_comparators
from mailroom.jmap.errors import MethodError
from mailroom.jmap.mapping import role_labels
from mailroom.jmap.methods.snippet import mark_patterns, mark_preview, mark_subject
from mailroom.listing import PAGE_SIZE, ThreadRow, thread_rows
from mailroom.reading import message_column
from mailroom.searching.filters import Filter
from mailroom.searching.syntax import QueryError
from mailroom.store.models import Message
from mailroom.store.reader import as_reader, in_list

MAX_START = 5000  # how deep a search pages (each page re-reads the matches before it)


@dataclass(frozen=True, slots=True)
class Match:
    """Where a thread matched, as escaped HTML with ``<mark>`` around the words."""

    message_id: int  # the newest matching message of the thread
    subject_html: str | None  # the thread's subject, marked; None if no word is in it
    snippet_html: str  # an excerpt of the message, marked, or its preview


@dataclass(frozen=True, slots=True)
class Found:
    """A page of results."""

    rows: list[ThreadRow]
    matches: dict[int, Match]  # by thread id
    start: int
    more: bool  # whether a later page has results


def find_threads(
    session: Session,
    user: int,
    wanted: Filter,
    *,
    account_id: int | None = None,
    start: int = 0,
    size: int = PAGE_SIZE,
) -> Found:
    """The page of threads matching ``wanted`` from result ``start`` on (optionally only
    messages of one account); QueryError if the search engine refuses the filter."""
    start = max(0, min(start, MAX_START))
    compiler = EmailFilter(session, user, role_labels(session, user), tabs=False)
    try:
        condition = compiler.compile(wanted)
        if account_id is not None:
            condition = and_(condition, Message.account_id == account_id)
        search = EmailSearch(
            session,
            compiler,
            condition,
            comparators=parse_comparators(None),
            collapse=True,
            user_id=user,
        )
        ids = search.page(
            position=start, anchor=None, anchor_offset=0, limit=size + 1, want_total=False
        ).ids
    except MethodError as error:
        raise QueryError(error.description or "This search is too complex; simplify it.") from None
    more = len(ids) > size
    rows, matches = _rows(session, user, ids[:size], wanted)
    return Found(rows, matches, start, more)


def _rows(
    session: Session, user: int, message_ids: list[int], wanted: Filter
) -> tuple[list[ThreadRow], dict[int, Match]]:
    if not message_ids:
        return [], {}
    reader = as_reader(session)
    subject_pattern, preview_pattern = mark_patterns(wanted)
    listed, params = in_list("message", message_ids)
    messages: dict[int, tuple[int, str]] = {}
    for message, thread, preview, sealed in reader.rows(
        "SELECT messages.id, messages.thread_id, messages.preview, messages.sealed FROM messages"
        f" WHERE messages.id IN {listed} AND messages.user_id = :user",
        {**params, "user": user},
    ):
        if thread is not None:
            preview = message_column(reader, user, int(message), "preview", preview, sealed)
            messages[int(message)] = (int(thread), preview or "")
    texts: dict[int, dict[str, Any]] = {}
    if preview_pattern is not None:  # the body only when the words may be in it (opened)
        texts = columns_of(session, list(messages), ["text_body"], owner=user)
    ordered = [messages[m][0] for m in message_ids if m in messages]
    threads: dict[int, Any] = {}
    if ordered:
        listed, params = in_list("thread", ordered)
        for row in reader.rows(
            "SELECT id, subject, message_count, unread_count, last_message_at, category "
            f"FROM threads WHERE id IN {listed} AND user_id = :user",
            {**params, "user": user},
        ):
            threads[int(row[0])] = row
    rows = thread_rows(reader, user, [threads[t] for t in ordered if t in threads])
    subjects = {row.id: row.subject for row in rows}  # a sealed thread's opened
    matches: dict[int, Match] = {}
    for message, (thread, preview) in messages.items():
        text = texts.get(message, {}).get("text_body") or ""
        subject = subjects.get(thread, "")
        matches[thread] = Match(
            message,
            mark_subject(subject, subject_pattern),
            mark_preview(text, preview_pattern) or html.escape(preview),
        )
    return rows, matches
