"""``SearchSnippet/get`` (RFC 8621 §5): where the search words occur, marked.

The words are those of the filter's ``text``, ``subject`` and ``body``
conditions, split the way the full-text index splits them (the last word
also matches as a prefix). ``subject`` and ``preview`` are HTML-escaped
with the matches wrapped in ``<mark>``; ``null`` where nothing matches.
"""

from __future__ import annotations

import html
import re
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from mailroom.jmap import ids
from mailroom.jmap.dispatcher import Context
from mailroom.jmap.emailquery import MAX_FILTER_TERMS
from mailroom.jmap.errors import MethodError, invalid_arguments
from mailroom.jmap.scope import owned_by
from mailroom.store.models import Message, MessageBody
from mailroom.store.search import query_terms

PREVIEW_CHARS = 255


def _terms(node: object, out: list[str]) -> None:
    if isinstance(node, dict):
        if "operator" in node:
            conditions = node.get("conditions")
            if not isinstance(conditions, list):
                raise invalid_arguments("A FilterOperator needs a list of conditions.")
            if node["operator"] != "NOT":
                for condition in conditions:
                    _terms(condition, out)
            return
        for key in ("text", "subject", "body"):
            value = node.get(key)
            if isinstance(value, str):
                words = query_terms(value)
                out.extend(words[:-1])
                if words:
                    out.append(words[-1] + "*")


def _pattern(terms: list[str]) -> re.Pattern[str] | None:
    if not terms:
        return None
    alternatives = sorted(
        (re.escape(t[:-1]) + r"\w*" if t.endswith("*") else re.escape(t) + r"\b" for t in terms),
        key=len,
        reverse=True,
    )
    return re.compile(r"(?<!\w)(?:" + "|".join(alternatives) + ")", re.IGNORECASE)


def _mark(text: str, pattern: re.Pattern[str]) -> str | None:
    pieces: list[str] = []
    last = 0
    for match in pattern.finditer(text):
        pieces.append(html.escape(text[last : match.start()]))
        pieces.append("<mark>" + html.escape(match.group()) + "</mark>")
        last = match.end()
    if not pieces:
        return None
    pieces.append(html.escape(text[last:]))
    return "".join(pieces)


def _excerpt(text: str, pattern: re.Pattern[str]) -> str | None:
    match = pattern.search(text)
    if match is None:
        return None
    start = max(0, match.start() - 60)
    window = " ".join(text[start : start + PREVIEW_CHARS].split())
    return _mark(window, pattern)


def snippet_get(context: Context, session: Session, args: dict[str, Any]) -> dict[str, Any]:
    """SearchSnippet/get."""
    user_id = context.check_account(args)
    wanted = args.get("emailIds")
    if not isinstance(wanted, list) or not all(isinstance(v, str) for v in wanted):
        raise invalid_arguments("emailIds must be a list of Email ids.")
    if len(wanted) > context.limits.max_objects_in_get:
        raise MethodError("requestTooLarge", "Too many emailIds in one call.")
    terms: list[str] = []
    _terms(args.get("filter"), terms)
    if len(terms) > MAX_FILTER_TERMS:
        # One regular expression alternative per word: keep it as bounded as Email/query.
        raise MethodError(
            "unsupportedFilter",
            f"The filter has more than {MAX_FILTER_TERMS} words; simplify the search.",
        )
    pattern = _pattern(terms)
    parsed = {value: ids.parse_email(value) for value in wanted}
    rows = {
        row.id: row
        for row in session.execute(
            select(Message.id, Message.subject, MessageBody.text_body)
            .outerjoin(MessageBody, MessageBody.message_id == Message.id)
            .where(
                Message.id.in_([m for m in parsed.values() if m is not None]),
                owned_by(Message.user_id, user_id),
            )
        )
    }
    found: list[dict[str, Any]] = []
    missing: list[str] = []
    for value, message_id in parsed.items():
        row = rows.get(message_id) if message_id is not None else None
        if row is None:
            missing.append(value)
            continue
        found.append(
            {
                "emailId": value,
                "subject": _mark(row.subject, pattern) if pattern else None,
                "preview": _excerpt(row.text_body or "", pattern) if pattern else None,
            }
        )
    return {"accountId": context.account_id, "list": found, "notFound": missing}
