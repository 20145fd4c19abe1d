"""The search page: ``GET /search?q=QUERY`` (``start`` pages on, ``account`` filters).

The query is parsed (:mod:`mailroom.searching.syntax`), turned into the
user's filter (:mod:`mailroom.searching.filters`) and run
(:mod:`mailroom.searching.results`); the threads are listed with the rows
every mailbox uses, each with its subject and a snippet marked where the
words occur. A search that cannot be understood is the page with that one
sentence (status 400); an empty one shows what can be typed.
"""

from __future__ import annotations

from dataclasses import replace

from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import Response

from mailroom.listing import PAGE_SIZE, LabelCount, ThreadRow
from mailroom.searching.filters import to_filter
from mailroom.searching.results import Found, find_threads
from mailroom.searching.syntax import QueryError, parse
from mailroom.store.reader import as_reader
from mailroom.web.pages.common import context, signed_in
from mailroom.web.pages.layout import Layout, layout, render
from mailroom.web.sessions import SignedIn


@signed_in
def search(request: Request, user: SignedIn) -> Response:
    """GET /search: the threads matching ``q``."""
    query = request.query_params.get("q", "").strip()
    given = request.query_params.get("start", "")
    start = int(given) if given.isdigit() and len(given) < 7 else 0
    with context(request).store.session() as session:
        frame = layout(as_reader(session), request, user, "search")
        try:
            parsed = parse(query)
            if parsed is None:
                return render(frame, "search.html", query=query, found=None)
            wanted = to_filter(
                parsed,
                now=frame.now,
                zone=frame.zone,
                labels=_label_paths(frame),
                roles=frame.roles,
            )
            found = find_threads(
                session, user.user_id, wanted, account_id=frame.account_id, start=start
            )
        except QueryError as error:
            return render(frame, "search.html", 400, query=query, found=None, error=str(error))
    return render(
        frame,
        "search.html",
        query=query,
        found=found,
        page={"rows": _marked(found)},
        pager=_pager(frame, query, found),
        empty=f"No conversation matches {query}.",
    )


def _label_paths(frame: Layout) -> dict[str, int]:
    """Path -> id of every user label in the sidebar's tree."""
    paths: dict[str, int] = {}
    pending: list[LabelCount] = list(frame.user_labels)
    while pending:
        label = pending.pop()
        paths[label.path] = label.id
        pending.extend(label.children)
    return paths


def _marked(found: Found) -> list[ThreadRow]:
    """The rows with the marked subject and the snippet in place of the preview.

    Both are HTML the search escaped itself (``Markup``), so the row template
    prints them as they are; everything else in a row is escaped as usual.
    """
    rows = []
    for row in found.rows:
        match = found.matches.get(row.id)
        if match is not None:
            subject = Markup(match.subject_html) if match.subject_html else row.subject
            row = replace(row, subject=subject, preview=Markup(match.snippet_html))
        rows.append(row)
    return rows


def _pager(frame: Layout, query: str, found: Found) -> dict[str, str | None]:
    """The links to the previous and the next page of results (None where there is none)."""
    earlier = max(0, found.start - PAGE_SIZE)
    return {
        "newer": frame.href("/search", q=query, start=str(earlier) if earlier else None)
        if found.start > 0
        else None,
        "older": frame.href("/search", q=query, start=str(found.start + PAGE_SIZE))
        if found.more
        else None,
    }
