"""Fetching one page of UIDs from a folder and storing it: the step sync and import share.

For a page (at most 50 UIDs of one folder):

1. an *envelope* fetch (UID, FLAGS, INTERNALDATE, RFC822.SIZE, the Message-ID
   header) gives each message's provider id (:mod:`.identity`) without its body,
   named in this process by the owner's :class:`~.namer.ImapNamer` (keyed when
   their mail is sealed; envelopes come from a look-ahead worker without keys);
2. messages already stored under any form of their id (moved here, copied here,
   re-numbered by a UIDVALIDITY change) are only *re-located*: a location row,
   the folder's label, the flags — they are never downloaded again;
3. the rest is downloaded (``BODY.PEEK[]``, in chunks of at most 16 MiB), and
   stored through :func:`mailroom.ingest.commit_batch` — raw bytes kept, pipeline
   run, exactly once by the (account, provider id) constraint — in one
   transaction with the re-locations; the steps run after the commit.

Failure isolation: a command the server refuses for the page is retried one UID
at a time, and a batch the store refuses is retried one message at a time, so a
bad message costs only itself. A UID that vanished meanwhile counts as handled.
A lost connection (``TransientError``) or an unreachable database is not a
message's fault: it propagates and costs no attempt.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.orm import Session

from mailroom.ingest import BatchResult, IncomingMessage, Location, commit_batch
from mailroom.ingest.mirror import AccountScope, ChangeSet, insert_for, known_messages
from mailroom.mime import ParsedMessage
from mailroom.providers.base import TransientError
from mailroom.providers.imap.connection import CommandError, FetchData, ImapConnection, uid_set
from mailroom.providers.imap.gmail_ext import GMAIL_ITEMS, GmailFacts, facts_of, speaks_gmail
from mailroom.providers.imap.gmail_labels import label_ids, mirror_labels, provider_labels
from mailroom.providers.imap.identity import (
    ENVELOPE_ITEMS,
    MESSAGE_ID_KEY,
    hash_id,
    message_id_from_header,
)
from mailroom.providers.imap.mirror import (
    FLAGGED,
    SEEN,
    add_locations,
    keywords_of,
    normalize_flags,
)
from mailroom.providers.imap.namer import ImapNamer
from mailroom.providers.imap.state import MAX_ATTEMPTS, FolderMarks
from mailroom.providers.sealed_ledger import write_ledger
from mailroom.store.engine import Store
from mailroom.store.models import SkippedMessage

__all__ = [
    "Envelope",
    "MessageAbortError",
    "PageOutcome",
    "fetch_envelopes",
    "known_envelopes",
    "run_page",
    "settle_failures",
    "store_page",
]

log = logging.getLogger(__name__)

MAX_FETCH_BYTES = 16 * 1024 * 1024


class MessageAbortError(TransientError):
    """The connection broke while fetching one particular message (in careful mode)."""

    def __init__(self, message: str, uid: int) -> None:
        super().__init__(message)
        self.uid = uid


@dataclass(frozen=True, slots=True)
class Envelope:
    """What a cheap fetch tells about one message."""

    uid: int
    size: int
    message_id: str | None
    flags: frozenset[str]
    internaldate: datetime | None
    gmail: GmailFacts | None = None  # when the server speaks Gmail's extensions

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle as a plain tuple: the look-ahead worker sends a page's envelopes back, and
        the default for slotted dataclasses (``fields()`` per object) cost it more than
        reading them from the socket."""
        return (
            Envelope,
            (self.uid, self.size, self.message_id, self.flags, self.internaldate, self.gmail),
        )

    def provider_id(self, namer: ImapNamer) -> str | None:
        """Gmail's X-GM-MSGID, else from the Message-ID (else the body decides), as
        ``namer`` names new mail."""
        if self.gmail is not None:
            return self.gmail.provider_id
        return namer.name(self.message_id, self.size)

    def provider_ids(self, namer: ImapNamer) -> list[str]:
        """Every provider id this message may be stored under (none: the body decides)."""
        if self.gmail is not None:
            return [self.gmail.provider_id]
        return namer.forms(self.message_id, self.size)


def known_envelopes(
    session: Session, account_id: int, namer: ImapNamer, envelopes: Iterable[Envelope]
) -> dict[int, int]:
    """UID → stored message id of the envelopes stored already, under any form of their id."""
    forms = {env.uid: env.provider_ids(namer) for env in envelopes}
    known = known_messages(session, account_id, [f for found in forms.values() for f in found])
    located: dict[int, int] = {}
    for uid, found in forms.items():
        hit = next((known[form] for form in found if form in known), None)
        if hit is not None:
            located[uid] = hit
    return located


@dataclass
class PageOutcome:
    """What storing a page did."""

    handled: set[int] = field(default_factory=set)  # stored, re-located or gone
    failed: dict[int, str] = field(default_factory=dict)  # uid -> reason
    envelopes: dict[int, Envelope] = field(default_factory=dict)
    created: list[int] = field(default_factory=list)
    relocated: int = 0
    downloaded: int = 0

    @property
    def changed(self) -> bool:
        """Whether the page stored or re-located anything."""
        return bool(self.created or self.relocated)


def _envelope(uid: int, data: FetchData) -> Envelope:
    when = data.get(b"INTERNALDATE")
    if isinstance(when, datetime):
        when = when.astimezone(UTC) if when.tzinfo else when.replace(tzinfo=UTC)
    else:
        when = None
    return Envelope(
        uid=uid,
        size=int(data.get(b"RFC822.SIZE") or 0),
        message_id=message_id_from_header(data.get(MESSAGE_ID_KEY)),
        flags=normalize_flags(data.get(b"FLAGS") or ()),
        internaldate=when,
        gmail=facts_of(data),
    )


def envelope_items(conn: ImapConnection) -> tuple[str, ...]:
    """The FETCH items of an envelope (with Gmail's when the server has them)."""
    return (*ENVELOPE_ITEMS, *GMAIL_ITEMS) if speaks_gmail(conn) else ENVELOPE_ITEMS


def _fetch_each(
    conn: ImapConnection, uids: Sequence[int], items: Sequence[str]
) -> tuple[dict[int, FetchData], dict[int, str]]:
    """Fetch ``items`` for all UIDs at once; on NO, one UID at a time."""
    if not uids:
        return {}, {}
    try:
        return conn.fetch(uid_set(uids), items), {}
    except CommandError:
        if len(uids) == 1:
            raise
    found: dict[int, FetchData] = {}
    failed: dict[int, str] = {}
    for uid in uids:
        try:
            found.update(conn.fetch(str(uid), items))
        except CommandError as exc:
            failed[uid] = str(exc)
    return found, failed


def fetch_envelopes(
    conn: ImapConnection, uids: Sequence[int]
) -> tuple[dict[int, Envelope], dict[int, str]]:
    """Envelopes of the UIDs (missing ones were expunged) and the UIDs that failed."""
    try:
        data, failed = _fetch_each(conn, uids, envelope_items(conn))
    except CommandError as exc:
        return {}, {uids[0]: str(exc)}
    wanted = set(uids)
    return {uid: _envelope(uid, d) for uid, d in data.items() if uid in wanted}, failed


def _size_chunks(sizes: dict[int, int], uids: Sequence[int]) -> list[list[int]]:
    chunks: list[list[int]] = []
    chunk: list[int] = []
    total = 0
    for uid in uids:
        size = sizes.get(uid, 0)
        if chunk and total + size > MAX_FETCH_BYTES:
            chunks.append(chunk)
            chunk, total = [], 0
        chunk.append(uid)
        total += size
    if chunk:
        chunks.append(chunk)
    return chunks


def fetch_envelopes_and_bodies(
    conn: ImapConnection, uids: Sequence[int]
) -> tuple[dict[int, Envelope], dict[int, bytes], dict[int, str]]:
    """Envelopes and bodies in one round trip per chunk (sizes are asked first)."""
    try:
        sizes_data, failed = _fetch_each(conn, uids, ("UID", "RFC822.SIZE"))
    except CommandError as exc:
        return {}, {}, {uids[0]: str(exc)}
    sizes = {uid: int(d.get(b"RFC822.SIZE") or 0) for uid, d in sizes_data.items()}
    wanted = [u for u in uids if u in sizes]
    envelopes: dict[int, Envelope] = {}
    bodies: dict[int, bytes] = {}
    for chunk in _size_chunks(sizes, wanted):
        try:
            data, bad = _fetch_each(conn, chunk, (*envelope_items(conn), "BODY.PEEK[]"))
        except CommandError as exc:
            data, bad = {}, {chunk[0]: str(exc)}
        failed.update(bad)
        for uid, values in data.items():
            if uid not in sizes:
                continue
            envelopes[uid] = _envelope(uid, values)
            raw = values.get(b"BODY[]")
            if isinstance(raw, bytes):
                bodies[uid] = raw
    return envelopes, bodies, failed


def fetch_bodies(
    conn: ImapConnection, envelopes: Sequence[Envelope]
) -> tuple[dict[int, bytes], dict[int, str]]:
    """The raw bytes of messages, in chunks of at most MAX_FETCH_BYTES."""
    bodies: dict[int, bytes] = {}
    failed: dict[int, str] = {}
    chunk: list[int] = []
    size = 0

    def flush() -> None:
        nonlocal chunk, size
        if not chunk:
            return
        try:
            data, bad = _fetch_each(conn, chunk, ("UID", "BODY.PEEK[]"))
        except CommandError as exc:
            data, bad = {}, {chunk[0]: str(exc)}
        failed.update(bad)
        for uid, values in data.items():
            raw = values.get(b"BODY[]")
            if isinstance(raw, bytes):
                bodies[uid] = raw
            elif uid in chunk and uid not in bad:
                failed[uid] = "the server sent no message body"
        chunk, size = [], 0

    for env in envelopes:
        if chunk and size + env.size > MAX_FETCH_BYTES:
            flush()
        chunk.append(env.uid)
        size += env.size
    flush()
    return bodies, failed


_SYSTEMIC = (OperationalError, InterfaceError)


def _systemic(exc: BaseException) -> bool:
    return isinstance(exc, _SYSTEMIC) or (
        isinstance(exc, DBAPIError) and bool(getattr(exc, "connection_invalidated", False))
    )


def _store(
    store: Store,
    scope: AccountScope,
    folder_id: int,
    uidvalidity: int,
    relocations: Sequence[tuple[int, int, frozenset[str] | None]],
    items: Sequence[IncomingMessage],
    defined: frozenset[str] | None = None,
    gmail_labels: Mapping[int, set[int]] | None = None,
) -> BatchResult:
    def relocate(session: Session) -> None:
        changes = ChangeSet()
        add_locations(session, scope, changes, folder_id, uidvalidity, relocations, defined=defined)
        if gmail_labels:
            mirror_labels(session, scope, changes, gmail_labels)
        changes.record(session, scope.user_id)

    return commit_batch(store, scope.account_id, scope.user_id, items, before=relocate)


def store_page(
    conn: ImapConnection,
    store: Store,
    scope: AccountScope,
    folder_id: int,
    uidvalidity: int,
    uids: Sequence[int],
    *,
    optimistic: bool = False,
    given: tuple[dict[int, Envelope], dict[int, bytes], dict[int, str]] | None = None,
    parsed: Mapping[int, ParsedMessage] | None = None,
) -> PageOutcome:
    """Fetch and store the given UIDs of the selected folder; see the module docstring.

    ``optimistic``: fetch envelopes and bodies in one round trip (sizes first, to keep
    chunks bounded), for pages where nothing is expected to be stored already — a
    first import. A message that turns out to be stored is then re-located all the
    same; only its bytes were fetched in vain. ``given``/``parsed``: envelopes, bodies,
    failures and parsed messages fetched ahead of time (:mod:`.prefetch`).
    """
    outcome = PageOutcome()
    if not uids:
        return outcome
    early: dict[int, bytes] = {}
    if given is not None:
        envelopes, early, failed = given
    elif optimistic:
        envelopes, early, failed = fetch_envelopes_and_bodies(conn, list(uids))
    else:
        envelopes, failed = fetch_envelopes(conn, list(uids))
    outcome.envelopes = envelopes
    defined = conn.selected_status.flags if conn.selected_status else None
    outcome.failed.update(failed)
    outcome.handled.update(u for u in uids if u not in envelopes and u not in failed)  # gone

    label_id = scope.folder_labels.get(folder_id)
    with store.session() as session:
        namer = ImapNamer.of(session, scope.user_id)
        known = known_envelopes(session, scope.account_id, namer, envelopes.values())
        # Gmail: the labels X-GM-LABELS gives; a message in All Mail (no folder label)
        # without any is archived.
        known_labels: dict[str, int | None] = {}
        gmail_labels = {
            uid: label_ids(
                session,
                scope.user_id,
                e.gmail.labels,
                in_all_mail=label_id is None,
                known=known_labels,
            )
            for uid, e in envelopes.items()
            if e.gmail is not None
        }
    relocations: list[tuple[int, int, frozenset[str] | None]] = []
    relocated_uids: list[int] = []
    to_download: list[Envelope] = []
    for uid in sorted(envelopes):
        env = envelopes[uid]
        if uid in known:
            relocations.append((known[uid], uid, env.flags))
            relocated_uids.append(uid)
        else:
            to_download.append(env)

    bodies, body_failed = fetch_bodies(conn, [e for e in to_download if e.uid not in early])
    bodies.update((e.uid, early[e.uid]) for e in to_download if e.uid in early)
    outcome.failed.update(body_failed)
    outcome.downloaded = len(bodies) + len([u for u in relocated_uids if u in early])
    items: list[IncomingMessage] = []
    uid_of: dict[str, list[int]] = {}
    hashed: dict[str, int] = {}
    for env in to_download:
        raw = bodies.get(env.uid)
        if raw is None:
            continue
        pid = env.provider_id(namer)
        if pid is None:
            pid = hash_id(raw)
            hashed[pid] = env.uid
        labels = [label_id] if label_id is not None else []
        if FLAGGED in env.flags:
            labels.append(scope.starred_label)
        labels.extend(x for x in sorted(gmail_labels.get(env.uid, ())) if x not in labels)
        items.append(
            IncomingMessage(
                provider_id=pid,
                raw=raw,
                label_ids=labels,
                locations=[Location(folder_id, uidvalidity, env.uid)],
                received_at=env.internaldate,
                seen=SEEN in env.flags,
                keywords=sorted(keywords_of(env.flags)),
                parsed=(parsed or {}).get(env.uid),
                provider_thread_id=env.gmail.thread_id if env.gmail else None,
                provider_labels=provider_labels(env.gmail.labels) if env.gmail else [],
            )
        )
        uid_of.setdefault(pid, []).append(env.uid)
    if hashed:
        with store.session() as session:
            known_hashed = known_messages(session, scope.account_id, hashed)
        for pid, mid in known_hashed.items():
            uid = hashed[pid]
            relocations.append((mid, uid, envelopes[uid].flags))
            relocated_uids.append(uid)
        items = [i for i in items if i.provider_id not in known_hashed]

    relocated_labels = {
        mid: gmail_labels[uid] for mid, uid, _f in relocations if uid in gmail_labels
    }
    try:
        result = _store(
            store, scope, folder_id, uidvalidity, relocations, items, defined, relocated_labels
        )
        results = [result]
    except Exception as exc:
        if _systemic(exc):
            raise
        log.warning("Storing a page of folder %s failed (%s); retrying one by one", folder_id, exc)
        results = []
        try:
            _store(store, scope, folder_id, uidvalidity, relocations, [], defined, relocated_labels)
        except Exception as single:
            if _systemic(single):
                raise
            for _mid, uid, _f in relocations:
                outcome.failed[uid] = f"cannot record the message's location: {single}"
            relocated_uids = []
        for item in items:
            try:
                results.append(_store(store, scope, folder_id, uidvalidity, [], [item]))
            except Exception as single:
                if _systemic(single):
                    raise
                log.exception("Storing message %s failed", item.provider_id)
                for uid in uid_of.get(item.provider_id, []):
                    outcome.failed[uid] = f"cannot store the message: {single}"
    outcome.relocated = len(relocated_uids)
    outcome.handled.update(relocated_uids)
    failed_pids = {pid for r in results for pid, _reason in r.failed}
    for r in results:
        outcome.created.extend(r.created_ids)
        for pid, reason in r.failed:
            for uid in uid_of.get(pid, []):
                outcome.failed[uid] = reason
    for item in items:
        if item.provider_id in failed_pids:
            continue
        for uid in uid_of.get(item.provider_id, []):
            if uid not in outcome.failed:
                outcome.handled.add(uid)
    return outcome


def settle_failures(
    store: Store,
    scope: AccountScope,
    folder_path: str,
    uidvalidity: int,
    marks: FolderMarks,
    outcome: PageOutcome,
) -> set[int]:
    """Count failed attempts; a 5th failure goes to the skipped ledger and counts as handled.

    Returns the UIDs still to be retried (the marks must not pass them).
    """
    marks.clear(outcome.handled)
    retry: set[int] = set()
    given_up: list[tuple[int, str, int]] = []
    for uid, reason in sorted(outcome.failed.items()):
        attempts = marks.fail(uid)
        if attempts < MAX_ATTEMPTS:
            retry.add(uid)
            continue
        marks.failures.pop(uid, None)
        marks.given_up.add(uid)
        outcome.handled.add(uid)
        given_up.append((uid, reason, attempts))
        log.warning(
            "Giving up on UID %s of %s (account %s) after %d attempts: %s",
            uid,
            folder_path,
            scope.account_id,
            attempts,
            reason,
        )
    if given_up:
        with store.session() as session:
            namer = ImapNamer.of(session, scope.user_id)
            where = (scope, folder_path, uidvalidity, namer)
            rows = [
                _skipped(*where, uid, outcome.envelopes.get(uid), reason, attempts)
                for uid, reason, attempts in given_up
            ]
            # The reason quotes the failure (a server's reply, an exception's text): sealed
            # with the headers while mail is sealed.
            write_ledger(
                session, insert_for(session, SkippedMessage).on_conflict_do_nothing(), rows
            )
    return retry


def _skipped(
    scope: AccountScope,
    folder_path: str,
    uidvalidity: int,
    namer: ImapNamer,
    uid: int,
    env: Envelope | None,
    reason: str,
    attempts: int,
) -> dict[str, Any]:
    """The skipped ledger's row of a message given up on (its Message-ID only when clear)."""
    clear_id = env is not None and not namer.keyed
    return {
        "account_id": scope.account_id,
        "provider_id": (env.provider_id(namer) if env else None)
        or f"uid:{folder_path}:{uidvalidity}:{uid}",
        "kind": "unstorable",
        "reason": f"{reason} (gave up after {attempts} attempts)"[:2000],
        "labels": [folder_path],
        "headers": {"message-id": env.message_id or ""} if env is not None and clear_id else {},
        "created_at": datetime.now(UTC),
    }


def _store_carefully(
    conn: ImapConnection,
    store: Store,
    scope: AccountScope,
    folder_id: int,
    uidvalidity: int,
    uids: Sequence[int],
) -> PageOutcome:
    """One UID at a time, each stored at once: a broken connection names its message."""
    total = PageOutcome()
    for uid in uids:
        try:
            one = store_page(conn, store, scope, folder_id, uidvalidity, [uid], optimistic=True)
        except TransientError as exc:
            raise MessageAbortError(str(exc), uid) from None
        total.handled |= one.handled
        total.failed.update(one.failed)
        total.envelopes.update(one.envelopes)
        total.created.extend(one.created)
        total.relocated += one.relocated
        total.downloaded += one.downloaded
    return total


def _save_marks(store: Store, folder_id: int, marks: FolderMarks) -> None:
    from mailroom.store.models import Folder

    with store.session() as session:
        folder = session.get(Folder, folder_id)
        if folder is not None:
            marks.save(folder)


def run_page(
    conn: ImapConnection,
    store: Store,
    scope: AccountScope,
    folder_id: int,
    folder_path: str,
    uidvalidity: int,
    marks: FolderMarks,
    uids: Sequence[int],
    *,
    given: tuple[dict[int, Envelope], dict[int, bytes], dict[int, str]] | None = None,
    parsed: Mapping[int, ParsedMessage] | None = None,
) -> tuple[PageOutcome, set[int]]:
    """Store a page with failure accounting; returns (outcome, UIDs still to retry).

    A broken connection is re-raised (:class:`TransientError`) after the marks are
    saved: a normal page turns ``careful`` on; a careful page counts the attempt
    against the UID it was fetching (the 5th goes to the skipped ledger).
    """
    try:
        if marks.careful:
            outcome = _store_carefully(conn, store, scope, folder_id, uidvalidity, uids)
        else:
            outcome = store_page(
                conn,
                store,
                scope,
                folder_id,
                uidvalidity,
                uids,
                optimistic=conn.hints.get(folder_id, True),
                given=given,
                parsed=parsed,
            )
            # Stay optimistic while pages hold only new mail; a page that re-located
            # messages (moves, copies) makes the next one look at envelopes first.
            conn.hints[folder_id] = outcome.relocated == 0
    except MessageAbortError as exc:
        broken = PageOutcome(failed={exc.uid: f"the connection broke fetching it: {exc}"})
        settle_failures(store, scope, folder_path, uidvalidity, marks, broken)
        _save_marks(store, folder_id, marks)
        raise
    except TransientError:
        marks.careful = True
        _save_marks(store, folder_id, marks)
        raise
    marks.careful = False
    retry = settle_failures(store, scope, folder_path, uidvalidity, marks, outcome)
    return outcome, retry
