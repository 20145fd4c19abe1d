"""``SearchSnippet/get`` (RFC 8621 §5): where the search words occur, marked.

The filter is checked exactly as ``Email/query`` checks it (the same
errors). The subject is marked with the tokens of the ``text`` conditions
(whole words, the last one also as a prefix, as the full-text index
matches them), of ``subject`` and of ``header: ["Subject", text]``
(substrings, as those conditions match); the preview with the tokens of
``text`` and ``body``. Quoted phrases are marked whole. Conditions under
``NOT`` mark nothing; ``from``/``to``/``cc``/``bcc`` and other headers match
text a snippet does not show. Both strings are HTML-escaped first and then
wrapped in ``<mark>``; the preview is at most 255 octets including the
markup and never cuts an entity or a mark. ``null`` where nothing matches.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from mailroom.crypto.mail_reading import columns_of
from mailroom.jmap import ids
from mailroom.jmap.dispatcher import Context
from mailroom.jmap.emailquery import MAX_FILTER_TERMS, EmailFilter
from mailroom.jmap.errors import MethodError, invalid_arguments
from mailroom.jmap.mapping import role_labels
from mailroom.jmap.methods.common import TABS
from mailroom.jmap.scope import owned_by
from mailroom.jmap.sealed_columns import opened
from mailroom.jmap.textsearch import Token, split_text
from mailroom.store.models import Message

PREVIEW_OCTETS = 255  # RFC 8621 §5: the preview MUST NOT be bigger than this
CONTEXT_CHARS = 40  # text shown before the first match


@dataclass
class Marks:
    """The regular expressions of what to mark in the subject and in the preview."""

    subject: list[str] = field(default_factory=list)
    preview: list[str] = field(default_factory=list)


def _word_pattern(tokens: list[Token]) -> list[str]:
    patterns: list[str] = []
    for position, token in enumerate(tokens):
        words = token.words
        if not words:
            continue
        joined = r"\W+".join(re.escape(word) for word in words)
        prefix = not token.phrase and position == len(tokens) - 1 and len(words) == 1
        patterns.append(r"(?<!\w)" + joined + (r"\w*" if prefix else r"(?!\w)"))
    return patterns


def _substring_pattern(tokens: list[Token]) -> list[str]:
    return [re.escape(token.text) for token in tokens if token.text]


def _collect(node: object, marks: Marks) -> None:
    if not isinstance(node, dict):
        return
    if "operator" in node:
        if node.get("operator") != "NOT":
            for condition in node.get("conditions") or []:
                _collect(condition, marks)
        return
    text = node.get("text")
    if isinstance(text, str):
        words = _word_pattern(split_text(text))
        marks.subject.extend(words)
        marks.preview.extend(words)
    body = node.get("body")
    if isinstance(body, str):
        marks.preview.extend(_word_pattern(split_text(body)))
    subject = node.get("subject")
    if isinstance(subject, str):
        marks.subject.extend(_substring_pattern(split_text(subject)))
    header = node.get("header")
    if isinstance(header, list) and len(header) == 2 and str(header[0]).lower() == "subject":
        marks.subject.extend(_substring_pattern(split_text(str(header[1]))))


def _compile(patterns: list[str]) -> re.Pattern[str] | None:
    if not patterns:
        return None
    if len(patterns) > MAX_FILTER_TERMS:
        # One alternative per token: keep it as bounded as Email/query.
        raise MethodError(
            "unsupportedFilter",
            f"The filter has more than {MAX_FILTER_TERMS} words; simplify the search.",
        )
    ordered = sorted(set(patterns), key=len, reverse=True)
    return re.compile("|".join(f"(?:{p})" for p in ordered), re.IGNORECASE)


def mark_patterns(node: object) -> tuple[re.Pattern[str] | None, re.Pattern[str] | None]:
    """What a filter marks: the pattern for subjects and the one for previews (None: nothing)."""
    marks = Marks()
    _collect(node, marks)
    return _compile(marks.subject), _compile(marks.preview)


def _pieces(text: str, pattern: re.Pattern[str]) -> list[tuple[str, bool]]:
    """``text`` cut into (piece, matched) runs."""
    pieces: list[tuple[str, bool]] = []
    last = 0
    for match in pattern.finditer(text):
        if match.end() == match.start():
            continue
        if match.start() > last:
            pieces.append((text[last : match.start()], False))
        pieces.append((match.group(), True))
        last = match.end()
    if last < len(text):
        pieces.append((text[last:], False))
    return pieces


def _render(pieces: list[tuple[str, bool]], budget: int | None) -> str:
    """Escaped and marked; within ``budget`` octets if given, cut only between characters."""
    out: list[str] = []
    used = 0
    for piece, matched in pieces:
        if matched:
            rendered = "<mark>" + html.escape(piece) + "</mark>"
            size = len(rendered.encode())
            if budget is not None and used + size > budget:
                break
            out.append(rendered)
            used += size
            continue
        for char in piece:
            rendered = html.escape(char)
            size = len(rendered.encode())
            if budget is not None and used + size > budget:
                return "".join(out)
            out.append(rendered)
            used += size
    return "".join(out)


def mark_subject(subject: str, pattern: re.Pattern[str] | None) -> str | None:
    """The escaped subject with its matches marked, or None without a match."""
    if pattern is None or pattern.search(subject) is None:
        return None
    return _render(_pieces(subject, pattern), None)


def mark_preview(body: str, pattern: re.Pattern[str] | None) -> str | None:
    """An escaped, marked excerpt of the body from just before the first match."""
    if pattern is None:
        return None
    match = pattern.search(body)
    if match is None:
        return None
    start = max(0, match.start() - CONTEXT_CHARS)
    if start > 0:  # begin at a word
        space = body.find(" ", start, match.start())
        start = space + 1 if space != -1 else match.start()
    window = " ".join(body[start : start + PREVIEW_OCTETS * 2].split())
    return _render(_pieces(window, pattern), PREVIEW_OCTETS)


def _check_filter(context: Context, session: Session, user_id: int, node: object) -> None:
    """Reject the filter exactly as Email/query would."""
    compiler = EmailFilter(
        session, user_id, role_labels(session, user_id), tabs=TABS in context.using
    )
    compiler.compile(node)


def snippet_get(context: Context, session: Session, args: dict[str, Any]) -> dict[str, Any]:
    """SearchSnippet/get."""
    user_id = context.check_account(args)
    wanted = args.get("emailIds")
    if not isinstance(wanted, list) or not all(isinstance(v, str) for v in wanted):
        raise invalid_arguments("emailIds must be a list of Email ids.")
    if len(wanted) > context.limits.max_objects_in_get:
        raise MethodError("requestTooLarge", "Too many emailIds in one call.")
    node = args.get("filter")
    _check_filter(context, session, user_id, node)
    subject_pattern, preview_pattern = mark_patterns(node)
    parsed = {value: ids.parse_email(value) for value in wanted}
    wanted_ids = [m for m in parsed.values() if m is not None]
    query = select(Message.id, Message.user_id, Message.sealed, Message.subject)
    selected = session.execute(
        query.where(Message.id.in_(wanted_ids), owned_by(Message.user_id, user_id))
    ).all()
    rows = {row.id: row for row in opened(session, selected, ["subject"])}
    texts: dict[int, dict[str, Any]] = {}
    if preview_pattern is not None:
        texts = columns_of(session, list(rows), ["text_body"])
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
                "subject": mark_subject(row.subject or "", subject_pattern),
                "preview": mark_preview(
                    texts.get(row.id, {}).get("text_body") or "", preview_pattern
                ),
            }
        )
    return {"accountId": context.account_id, "list": found, "notFound": missing}
