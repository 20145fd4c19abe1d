"""The compose page: new mail, reply, reply to all, forward, drafts, attachments, Send, Undo.

==========================================  ===================================================
``GET  /compose``                           a new message; ``?draft=ID`` one of the user's
                                            drafts; ``?reply=ID``, ``?reply_all=ID``,
                                            ``?forward=ID`` an answer to a message
``POST /compose``                           the form, with ``action``: ``save`` (the draft,
                                            as the user types: htmx, answered with the new
                                            draft id), ``attach`` (the ``upload`` files),
                                            ``remove:<blob id>``, ``send``
``GET  /compose/sent/{id}``                 "Sending… Undo" while the undo window lasts,
                                            then how the submission went
``POST /compose/sent/{id}/undo``            cancels it and goes back to the draft
==========================================  ===================================================

Drafts are stored as JMAP ``Email/set`` stores them (:mod:`mailroom.web.compose.drafts`):
one draft per compose window, replaced on every save. Send saves the draft and
hands it to :class:`mailroom.jmap.submitting.Submitter` — the checks and the
queueing of JMAP's EmailSubmission — with the web's undo window
(``MAILROOM_WEB_UNDO_SECONDS``, at least the JMAP one): the submission waits
``scheduled`` and Undo cancels it (``cancel_submission``) while no lane has
taken it. Filing moves the sent draft to Sent. Every refusal is one sentence
on the page, the form kept as typed.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import anyio.from_thread
from sqlalchemy import select
from sqlalchemy.orm import Session
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from mailroom.jmap import ids
from mailroom.jmap.auth import Principal
from mailroom.jmap.email_form import MAX_SIZE_ATTACHMENTS_PER_EMAIL
from mailroom.jmap.errors import Refused
from mailroom.jmap.submission_envelope import is_mailbox
from mailroom.jmap.submission_policy import SubmissionPolicy
from mailroom.jmap.submitting import Submitter
from mailroom.jmap.uploads import own_upload, store_blob
from mailroom.outbound.queueing import WAITING, cancel_submission
from mailroom.outbound.sending_as import sending_identities
from mailroom.store.models import Identity, Submission, User, utcnow
from mailroom.store.reader import as_reader
from mailroom.web.compose.drafts import DraftError, attachments_of, load_draft, raw_of, save_draft
from mailroom.web.compose.form import Attached, Composition
from mailroom.web.compose.replies import MODES, answer
from mailroom.web.pages.common import context, page, same_token, signed_in
from mailroom.web.pages.layout import layout, render
from mailroom.web.sessions import SignedIn

MAX_FIELD_BYTES = 2 * 1024 * 1024  # one text field (the body) of the form
MAX_FILES = 20  # files in one upload
UNDONE = "Sending was undone; the message is back in your drafts."


class _Problem(Exception):
    """What the user must change, in one sentence."""


def _identities(session: Session, user_id: int) -> dict[str, Identity]:
    user = session.get(User, user_id)
    assert user is not None  # the signed-in user's own row
    return sending_identities(session, user)


def _chosen(composition: Composition, identities: dict[str, Identity]) -> Identity:
    if not identities:
        raise _Problem(
            "You have no account with an address to send from; add one on the Accounts page."
        )
    for identity in identities.values():
        if identity.id == composition.identity:
            return identity
    if composition.identity is None:
        return next(iter(identities.values()))
    raise _Problem("Choose one of your addresses to send from.")


def _show(
    request: Request,
    user: SignedIn,
    session: Session,
    composition: Composition,
    *,
    error: str | None = None,
    note: str | None = None,
    status: int = 200,
) -> Response:
    frame = layout(as_reader(session), request, user, "")
    identities = _identities(session, user.user_id)
    if composition.identity is None and identities:
        composition = replace(composition, identity=next(iter(identities.values())).id)
    return render(
        frame,
        "compose.html",
        status,
        form=composition,
        identities=list(identities.values()),
        error=error,
        note=note,
    )


@signed_in
def compose_page(request: Request, user: SignedIn) -> Response:
    """GET /compose: an empty form, a draft, or an answer to a message."""
    params = request.query_params
    with context(request).store.session() as session:
        identities = _identities(session, user.user_id)
        composition: Composition | None = Composition()
        wanted = params.get("draft", "")
        if wanted.isdigit():
            composition = load_draft(session, user.user_id, int(wanted), identities)
        for mode in MODES:
            given = params.get(mode, "")
            if given.isdigit():
                composition = answer(session, user.user_id, int(given), mode, identities)
        if composition is None:
            return _missing(request, user, session, "message")
        note = (
            "Sending was undone; the message is back in your drafts."
            if "undone" in params
            else None
        )
        return _show(request, user, session, composition, note=note)


async def _read_form(request: Request) -> tuple[dict[str, str], list[str], list[UploadFile]]:
    """The form's text fields (first value each), ``att`` values and ``upload`` files."""
    form = await request.form(max_files=MAX_FILES, max_part_size=MAX_FIELD_BYTES)
    fields: dict[str, str] = {}
    attachments: list[str] = []
    files: list[UploadFile] = []
    for key, value in form.multi_items():
        if isinstance(value, UploadFile):
            if key == "upload" and value.filename:
                files.append(value)
        elif key == "att":
            attachments.append(value)
        else:
            fields.setdefault(key, value)
    return fields, attachments, files


_Form = tuple[dict[str, str], list[str], list[UploadFile]]


def _checked_form(request: Request, user: SignedIn) -> _Form | Response:
    """The form (see :func:`_read_form`), or the answer when it is unreadable or forged."""
    try:
        form = anyio.from_thread.run(_read_form, request)
    except Exception:  # noqa: BLE001 - a malformed or cut-off form is one answer
        return page("missing.html", 400, what="form", user=user)
    if not same_token(form[0].get("csrf"), user.csrf_token):
        for upload in form[2]:
            anyio.from_thread.run(upload.close)
        return page("missing.html", 403, what="form (reload the page)", user=user)
    return form


def _missing(request: Request, user: SignedIn, session: Session, what: str) -> Response:
    frame = layout(as_reader(session), request, user, "")
    return render(frame, "missing.html", 404, what=what)


async def _read_files(files: list[UploadFile], limit: int) -> list[tuple[str, str, bytes]] | None:
    """(name, media type, bytes) of each file; None once they pass ``limit`` bytes together."""
    found = []
    total = 0
    for upload in files:
        data = await upload.read(limit - total + 1)
        total += len(data)
        if total > limit:
            return None
        found.append((upload.filename or "attachment", upload.content_type or "", data))
    return found


def _upload(session: Session, user_id: int, files: list[tuple[str, str, bytes]]) -> list[Attached]:
    added = []
    for name, media_type, data in files:
        kind = media_type if "/" in media_type else "application/octet-stream"
        sha256 = store_blob(session, data, user_id)
        own_upload(session, user_id, sha256, len(data), kind, utcnow())
        added.append(Attached(ids.upload_blob_id(sha256), name, kind, len(data)))
    return added


def _check_recipients(composition: Composition) -> None:
    found = composition.recipients()
    for field, text in (("To", composition.to), ("Cc", composition.cc), ("Bcc", composition.bcc)):
        addresses = found[field.lower()]
        bad = next((a.email for a in addresses if not is_mailbox(a.email)), None)
        if bad is not None or (text and not addresses):
            shown = bad or text
            raise _Problem(
                f"{shown!r} in {field} is not an email address; give one such as bob@example.org."
            )
    if not any(found.values()):
        raise _Problem("Add at least one recipient in To, Cc or Bcc.")


def _too_large(limit: int) -> str:
    size = f"{limit // 1_000_000} MB" if limit >= 1_000_000 else f"{limit // 1000} KB"
    return f"The attachments may come to at most {size}."


def _is_empty(composition: Composition) -> bool:
    return not any(
        (
            composition.to,
            composition.cc,
            composition.bcc,
            composition.subject,
            composition.body.strip(),
            composition.attachments,
        )
    )


def _submit(
    session: Session,
    user_id: int,
    policy: SubmissionPolicy,
    identity: Identity,
    saved: Composition,
) -> Submission:
    """Queue the saved draft with the web's undo window; _Problem saying why it may not go."""
    _check_recipients(saved)
    assert saved.draft is not None  # saved
    raw = raw_of(session, user_id, saved.draft)
    assert raw is not None  # just stored
    undo = timedelta(seconds=max(0, policy.settings.web_undo_seconds))
    try:
        with session.begin_nested():
            row = Submitter(session, user_id, policy).submit(identity, saved.draft, raw, undo=undo)
            session.flush()
    except Refused as refusal:
        raise _Problem(str(refusal.error.get("description") or "It cannot be sent.")) from None
    return row


@signed_in
def compose_post(request: Request, user: SignedIn) -> Response:
    """POST /compose: save, attach, remove an attachment or send (module docstring)."""
    form = _checked_form(request, user)
    if isinstance(form, Response):
        return form
    fields, tokens, uploads = form
    web = context(request)
    policy = web.submission
    limit = min(MAX_SIZE_ATTACHMENTS_PER_EMAIL, policy.max_size)
    files = anyio.from_thread.run(_read_files, uploads, limit) if uploads else []
    for upload in uploads:
        anyio.from_thread.run(upload.close)
    composition = Composition.from_fields(fields, tokens)
    action = fields.get("action", "save")
    htmx = request.headers.get("hx-request") == "true"
    principal = Principal(user.user_id, user.name)
    with web.store.session() as session:
        try:
            identity = _chosen(composition, _identities(session, user.user_id))
            if files is None:
                raise _Problem(_too_large(limit))
            if action == "save" and _is_empty(composition) and composition.draft is None:
                return page("_compose_saved.html", form=composition, saved=None)
            if action == "attach":
                composition = composition.with_attachments(
                    [*composition.attachments, *_upload(session, user.user_id, files)]
                )
            elif action.startswith("remove:"):
                gone = action.removeprefix("remove:")
                composition = composition.with_attachments(
                    [a for a in composition.attachments if a.blob_id != gone]
                )
            if sum(a.size for a in composition.attachments) > limit:
                raise _Problem(_too_large(limit))
            draft = save_draft(session, web.store, principal, composition, identity)
        except (_Problem, DraftError) as problem:
            if htmx:
                return page("_compose_saved.html", 422, form=composition, error=str(problem))
            return _show(request, user, session, composition, error=str(problem), status=422)
        saved = replace(
            composition,
            draft=draft,
            attachments=tuple(attachments_of(session, user.user_id, draft)),
        )
        if action == "send":
            try:
                row = _submit(session, user.user_id, policy, identity, saved)
            except _Problem as problem:  # the draft stays saved
                return _show(request, user, session, saved, error=str(problem), status=422)
            return RedirectResponse(f"/compose/sent/{row.id}", status_code=303)
        if htmx and action == "save":
            return page("_compose_saved.html", form=saved, saved=utcnow())
    return RedirectResponse(f"/compose?draft={draft}", status_code=303)


def _submission(session: Session, user_id: int, submission_id: int) -> Submission | None:
    return session.scalar(
        select(Submission).where(Submission.id == submission_id, Submission.user_id == user_id)
    )


def _sent(
    request: Request, user: SignedIn, session: Session, row: Submission, error: str | None = None
) -> Response:
    frame = layout(as_reader(session), request, user, "")
    return render(
        frame,
        "compose_sent.html",
        422 if error else 200,
        submission=row,
        undoable=row.state in WAITING,
        error=error,
    )


@signed_in
def sent_page(request: Request, user: SignedIn) -> Response:
    """GET /compose/sent/N: the state of a message sent from the page."""
    with context(request).store.session() as session:
        row = _submission(session, user.user_id, request.path_params["submission_id"])
        if row is None:
            return _missing(request, user, session, "sent message")
        return _sent(request, user, session, row)


@signed_in
def undo_send(request: Request, user: SignedIn) -> Response:
    """POST /compose/sent/N/undo: cancel it while no lane has taken it; back to the draft."""
    form = _checked_form(request, user)
    if isinstance(form, Response):
        return form
    with context(request).store.session() as session:
        row = _submission(session, user.user_id, request.path_params["submission_id"])
        if row is None:
            return _missing(request, user, session, "sent message")
        if not cancel_submission(session, row):
            return _sent(
                request, user, session, row, "It is being sent or was sent; it cannot be undone."
            )
        email = row.email_id
    target = f"/compose?draft={email}&undone=1" if email is not None else "/compose"
    return RedirectResponse(target, status_code=303)
