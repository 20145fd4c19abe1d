"""Full-text search over subject, participants and body.

SQLite uses an FTS5 table whose rowid is the message id; PostgreSQL a
``tsvector`` table with a GIN index (``simple`` configuration, no stemming,
because mail comes in every language). Both are written in the same
transaction as the message, so a flushed batch is searchable at once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

# SQLAlchemy is imported where the index is written: the read commands use
# match_clause only and must not pay for it (store.reader).
if TYPE_CHECKING:
    from sqlalchemy.orm import Session

BODY_LIMIT = 200_000  # characters of body indexed per message; the rest is rarely searched
_WORD = re.compile(r"\w[\w.@+-]*\w|\w", re.UNICODE)


@dataclass(frozen=True, slots=True)
class SearchDocument:
    """The searchable text of one message."""

    message_id: int
    subject: str
    participants: str
    body: str


def index_documents(session: Session, documents: list[SearchDocument]) -> None:
    """Add (or replace) the search entries of these messages."""
    from sqlalchemy import text

    if not documents:
        return
    dialect = session.get_bind().dialect.name
    rows = [
        {
            "id": doc.message_id,
            "subject": doc.subject,
            "participants": doc.participants,
            "body": doc.body[:BODY_LIMIT],
        }
        for doc in documents
    ]
    if dialect == "sqlite":
        session.execute(text("DELETE FROM message_search WHERE rowid = :id"), rows)
        session.execute(
            text(
                "INSERT INTO message_search (rowid, subject, participants, body) "
                "VALUES (:id, :subject, :participants, :body)"
            ),
            rows,
        )
    else:
        session.execute(
            text(
                "INSERT INTO message_search (message_id, document) VALUES (:id, "
                "setweight(to_tsvector('simple', :subject), 'A') || "
                "setweight(to_tsvector('simple', :participants), 'B') || "
                "setweight(to_tsvector('simple', :body), 'C')) "
                "ON CONFLICT (message_id) DO UPDATE SET document = EXCLUDED.document"
            ),
            rows,
        )


def query_terms(query: str) -> list[str]:
    """The words of a user's query, as both engines will match them (all must occur)."""
    return [word.lower() for word in _WORD.findall(query)]


def match_clause(dialect: str, query: str) -> tuple[str, dict[str, str]] | None:
    """A SQL condition on ``messages.id`` matching ``query``, or None for an empty query.

    Every word must occur (AND); the last word also matches as a prefix.
    """
    terms = query_terms(query)
    if not terms:
        return None
    if dialect == "sqlite":
        quoted = ['"' + term.replace('"', '""') + '"' for term in terms]
        quoted[-1] += "*"
        return (
            "messages.id IN (SELECT rowid FROM message_search WHERE message_search MATCH :fts)",
            {"fts": " AND ".join(quoted)},
        )
    parts = [re.sub(r"[^\w@.+-]", "", term) for term in terms]
    parts = [part for part in parts if part]
    if not parts:
        return None
    tsquery = " & ".join("'" + part + "'" for part in parts[:-1])
    last = "'" + parts[-1] + "':*"
    tsquery = f"{tsquery} & {last}" if tsquery else last
    return (
        "messages.id IN (SELECT message_id FROM message_search "
        "WHERE document @@ to_tsquery('simple', :fts))",
        {"fts": tsquery},
    )
