"""Looking at the store: ``list``, ``search``, ``show``, ``labels`` and ``explain``."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from mailroom.categories.tabs import CATEGORIES
from mailroom.cli.context import AppContext, echo_json, format_option, pass_app, plain_errors
from mailroom.cli.table import Column, print_table
from mailroom.config import DEFAULT_OWNER
from mailroom.errors import SealedWithoutKeys
from mailroom.reading import (
    MessageFilter,
    count_messages,
    label_counts,
    label_id,
    list_messages,
    message_detail,
    search_ids,
    user_id,
)
from mailroom.store.search import OWNER_HAS_KEY, BlindTerms

# What `list` shows on a terminal when no --limit is given: a screenful, not the store.
TERMINAL_LIMIT = 50


def on_terminal() -> bool:
    """Whether a person reads the output (a screenful is then enough)."""
    return sys.stdout.isatty()


owner_option = click.option(
    "--owner", default=DEFAULT_OWNER, show_default=True, help="Whose mail to look at."
)


def _print(rows: list[dict[str, Any]], output: str) -> None:
    if output == "jsonl":
        for row in rows:
            echo_json(row)
        return
    headers = ("id", "thread", "received", "from", "subject", "tab", "labels")
    print_table(
        [Column(header) for header in headers],
        [
            (
                str(row["id"]),
                str(row["thread_id"]),
                str(row["received_at"])[:16].replace("T", " "),
                str(row["from_name"] or row["from"]),
                # The unread mark is the one a reader needs in a list.
                ("" if row["seen"] else "* ") + str(row["subject"])[:60],
                str(row["category"] or ""),
                ",".join(row["labels"]),
            )
            for row in rows
        ],
    )


list_format = format_option("table", "jsonl", "jsonl prints one JSON object per message.")


@click.command("list")
@owner_option
@list_format
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=None,
    help=f"At most this many (default {TERMINAL_LIMIT} on a terminal, all otherwise).",
)
@click.option("--label", default=None, help="Only messages with this label (e.g. Inbox).")
@click.option("--tab", type=click.Choice(CATEGORIES), default=None, help="Only this inbox tab.")
@click.option("--unread", is_flag=True, help="Only unread messages.")
@click.option(
    "--repaired",
    is_flag=True,
    help="Only messages stored with parse notes (`mailroom show ID` shows them).",
)
@pass_app
@plain_errors
def list_command(
    app: AppContext,
    owner: str,
    output: str,
    limit: int | None,
    label: str | None,
    tab: str | None,
    unread: bool,
    repaired: bool,
) -> None:
    """List messages, newest first (unread ones marked *)."""
    if limit is None and on_terminal():
        limit = TERMINAL_LIMIT
    reader = app.reader
    user = user_id(reader, owner)
    where = MessageFilter(
        label_id=label_id(reader, user, label) if label is not None else None,
        category=tab,
        unread=unread,
        repaired=repaired,
    )
    rows = _opened(app, lambda source: list_messages(source, user, limit=limit, where=where))
    total = count_messages(reader, user, where) if limit is not None else len(rows)
    if output == "jsonl":
        _print(rows, output)
        return
    if not rows:
        click.echo("No message matches." if where != MessageFilter() else "No messages yet.")
        return
    _print(rows, output)
    if total > len(rows):
        click.echo(f"The newest {len(rows)} of {total}; --limit N shows more.")


@click.command("search")
@click.argument("query")
@owner_option
@list_format
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True)
@pass_app
@plain_errors
def search_command(app: AppContext, query: str, owner: str, output: str, limit: int) -> None:
    """Full-text search over subject, participants and body (all words must occur)."""
    reader = app.reader
    user = user_id(reader, owner)
    ids = search_ids(reader, user, query, limit, sealed_search_terms(app, user, query))
    rows = _opened(app, lambda source: list_messages(source, user, ids=ids)) if ids else []
    if not rows and output == "table":
        click.echo(f"No message matches {query!r}.")
        return
    _print(rows, output)


def sealed_search_terms(app: AppContext, user: int, query: str) -> BlindTerms | None:
    """The query hashed for the user's sealed mail, or None when they have none.

    SQLAlchemy and the key wrapper are loaded only for an owner with a data key.
    """
    if not app.reader.rows(OWNER_HAS_KEY, {"owner": user}):
        return None
    from mailroom.crypto.blind_index import blind_terms

    with app.existing_store.session() as session:
        return blind_terms(session, user, query)


def _addresses(pairs: list[Any]) -> str:
    shown = []
    for pair in pairs:
        name, email = (pair[0], pair[1]) if isinstance(pair, list | tuple) else ("", pair)
        shown.append(f"{name} <{email}>" if name else str(email))
    return ", ".join(shown)


def _size(count: int) -> str:
    return f"{count} B" if count < 1024 else f"{count / 1024:.0f} KB"


def show_text(detail: dict[str, Any]) -> str:
    """One message for a person: headers, attachments, parse notes, then the text body."""
    sender = _addresses([[detail["from_name"], detail["from"]]])
    lines = [
        f"From:     {sender}",
        f"To:       {_addresses(detail['to'])}",
    ]
    if detail["cc"]:
        lines.append(f"Cc:       {_addresses(detail['cc'])}")
    lines += [
        f"Date:     {str(detail['received_at'])[:19].replace('T', ' ')} UTC",
        f"Subject:  {detail['subject']}",
        f"Message:  {detail['id']} in thread {detail['thread_id']}, account {detail['account']}"
        f"{'' if detail['seen'] else ', unread'}",
        f"Labels:   {', '.join(detail['labels']) or '(none)'}; tab {detail['category'] or '-'} "
        f"(`mailroom explain {detail['id']}` says why)",
    ]
    for item in detail["attachments"]:
        name = item.get("filename") or f"part {item.get('part', '?')}"
        lines.append(
            f"Attached: {name} ({item.get('content_type', '?')}, {_size(item.get('size') or 0)})"
        )
    for note in detail["parse_notes"]:
        lines.append(f"Repaired: {note}")
    if detail["thread_note"]:
        lines.append(f"Thread:   {detail['thread_note']}")
    body = (detail["text"] or "").lstrip("\n").rstrip()
    if not body:
        body = (
            "(This message has only an HTML part; the web page shows it.)"
            if detail["sanitized_html"]
            else "(This message has no text.)"
        )
    return "\n".join([*lines, "", body])


T = TypeVar("T")


def _opened(app: AppContext, read: Callable[[Any], T]) -> T:
    """``read`` on the command's reader; on sealed mail, which the bare SQLite file reader
    cannot open (it has no keys), again through a session of the store, which has them."""
    try:
        return read(app.reader)
    except SealedWithoutKeys:
        with app.existing_store.session() as session:
            return read(session)


@click.command("show")
@click.argument("message", type=int)
@owner_option
@format_option("text", "json", "json prints one JSON object with every field, for programs.")
@pass_app
@plain_errors
def show_command(app: AppContext, message: int, owner: str, output: str) -> None:
    """Print one message: headers, parse notes and the text body."""
    user = user_id(app.reader, owner)
    detail = _opened(app, lambda source: message_detail(source, user, message))
    if output == "json":
        echo_json(detail)
    else:
        click.echo(show_text(detail))


@click.command("labels")
@owner_option
@pass_app
@plain_errors
def labels_command(app: AppContext, owner: str) -> None:
    """List labels with their thread and unread counts (binned threads left out)."""
    from mailroom.labels.roles import SYSTEM_LABELS

    reader = app.reader
    user = user_id(reader, owner)
    rows = label_counts(reader, user)
    if not set(SYSTEM_LABELS) <= {role for _, role, _, _ in rows}:
        from mailroom.labels.resolver import ensure_system_labels

        with app.existing_store.session() as session:  # a new user: create them once
            ensure_system_labels(session, user)
        rows = label_counts(reader, user)
    print_table(
        [Column("label"), Column("role"), Column("threads"), Column("unread")],
        [(path, role or "", str(threads), str(unread)) for path, role, threads, unread in rows],
    )


@click.command("explain")
@click.argument("message", type=int)
@owner_option
@pass_app
@plain_errors
def explain_command(app: AppContext, message: int, owner: str) -> None:
    """Say which inbox tab a message is in and why (recomputed from stored data)."""
    from mailroom.categories.explaining import explain

    user = user_id(app.reader, owner)
    why = _opened(app, lambda source: explain(source, user, message))
    for line in why.lines():
        click.echo(line)
