"""Bounces: delivery status notifications (RFC 3464) that arrive as mail, tied to what was sent.

:func:`recognise_bounces` runs on newly stored mail after the ingest commit
(an enricher of the follow-up job, registered by
:mod:`mailroom.outbound.after_mail`). Only the mail of users who have sent
something through mailroom, received after their first submission, is even
looked at; of that, a message is a report when

* it is ``multipart/report; report-type=delivery-status`` or carries a
  ``message/delivery-status`` part (also ``message/global-delivery-status``,
  RFC 6533) — the standard form; or
* it returns a message (a ``message/rfc822`` or ``text/rfc822-headers``
  part) and says it is a bounce: a null ``Return-Path``, a mailer-daemon or
  postmaster sender, or a subject such as "Undelivered Mail" — the common
  non-standard form (qmail, older Exchange).

:func:`read_report` reads one (a pure function of the bytes): the per-recipient
fields (``Final-Recipient``/``Original-Recipient``, ``Action``, ``Status``,
``Diagnostic-Code``) and the Message-IDs it may be about (an
``Original-Message-ID`` field, the returned headers' ``Message-ID``, the
report's own ``In-Reply-To``). Each id is looked up as
``submissions.message_key`` among the same user's submissions, in every form
the key may be stored in (:func:`mailroom.store.keys.id_key` of it, and for a
sealed submission the owner's keyed hash of that under each stored key
version, :func:`mailroom.outbound.sealed_queue.key_forms`); for each one
found, one ``bounces`` row (unique per submission and message: seeing the
report again adds nothing; its recipients sealed when the submission is) and, per
recipient, ``delivery_status`` changes (RFC 8621 §7): ``failed`` is
``delivered: "no"``, ``delivered`` and ``expanded`` are ``"yes"``,
``relayed`` is ``"unknown"``, ``delayed`` leaves ``"queued"``; ``smtpReply``
becomes the report's diagnostic. An ``EmailSubmission`` "updated" change goes
with it. A non-standard report names no recipients: the submission's
recipients its text mentions failed (or its only recipient).

Hostile reports never cost anything but themselves: only the first
:data:`MAX_REPORT_BYTES` are read, at most :data:`MAX_RECIPIENTS` recipients,
every text decoded leniently, and each message is handled in its own
transaction, a failure logged and skipped.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from email.message import Message as MimeMessage
from email.parser import BytesParser, HeaderParser
from email.policy import compat32
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from mailroom.crypto.mail_reading import columns_of, open_blob
from mailroom.crypto.message_fields import open_rows
from mailroom.mime.charsets import decode_bytes
from mailroom.mime.msgids import normalize_message_id, parse_id_list
from mailroom.mime.structure import Part, build_tree, header_params, iter_parts, payload_bytes
from mailroom.outbound.queueing import record_submission_change
from mailroom.outbound.sealed_queue import key_forms, write_sealed
from mailroom.store.bulk import insert_ignoring_conflicts
from mailroom.store.engine import Store
from mailroom.store.models import Blob, Bounce, Message, MessageBody, Submission

__all__ = [
    "MAX_RECIPIENTS",
    "MAX_REPORT_BYTES",
    "RecipientReport",
    "Report",
    "looks_like_bounce",
    "read_report",
    "recognise_bounces",
]

log = logging.getLogger(__name__)

MAX_REPORT_BYTES = 2 * 1024 * 1024  # the status part comes early; the returned mail may be huge
MAX_RECIPIENTS = 1000
MAX_FIELD = 1000  # characters kept of one field value
# A report arrives after the mail it reports on; a day of slack for clocks and Received dates.
CLOCK_SLACK = timedelta(days=1)

_STATUS_TYPES = ("message/delivery-status", "message/global-delivery-status")
_RETURNED_TYPES = (
    "message/rfc822",
    "message/global",
    "text/rfc822-headers",
    "message/global-headers",
)
_DAEMON = re.compile(r"^(mailer[-_]?daemon|mail[-_]?daemon|postmaster|mailer)(\+.*)?@", re.I)
_BOUNCE_SUBJECT = re.compile(
    r"undeliver|undelivered|delivery (status|failure|has failed|notification)|"
    r"mail delivery (failed|failure|system)|returned mail|failure notice|"
    r"could not be delivered|delivery problem|nicht zugestellt|unzustellbar|non remis",
    re.I,
)
_DELAY_SUBJECT = re.compile(r"delay|not yet been delivered|will retry|warning", re.I)
_DELIVERED = {"failed": "no", "delivered": "yes", "expanded": "yes", "relayed": "unknown"}
_SMTP_REPLY = re.compile(r"^[245]\d\d[ -]")
_PARSER = BytesParser(policy=compat32)


@dataclass(frozen=True, slots=True)
class RecipientReport:
    """What a report says of one recipient (RFC 3464 §2.3, values trimmed)."""

    recipient: str
    original: str
    action: str
    status: str
    diagnostic: str

    def as_row(self) -> dict[str, str]:
        """The ``bounces.recipients`` entry."""
        return {
            "recipient": self.recipient,
            "action": self.action,
            "status": self.status,
            "diagnostic": self.diagnostic,
        }


@dataclass(frozen=True, slots=True)
class Report:
    """A delivery report: the ids of the mail it may be about, and what it says per recipient.

    ``standard`` is False for a bounce without a ``message/delivery-status``
    part; ``text`` is then its human-readable part (the first 64 KiB), in
    which the recipients are looked for.
    """

    message_ids: tuple[str, ...]
    recipients: tuple[RecipientReport, ...]
    standard: bool
    text: str = ""
    delayed: bool = False


def looks_like_bounce(
    headers: Sequence[Sequence[str]], attachment_types: Iterable[str], from_email: str
) -> bool:
    """Whether a stored message may be a delivery report (cheap: stored headers and parts)."""
    types = {t.lower() for t in attachment_types}
    content_type = _header(headers, "content-type").lower()
    if content_type.startswith("multipart/report") or types & set(_STATUS_TYPES):
        return True
    if not types & set(_RETURNED_TYPES):
        return False
    return _says_bounce(_header(headers, "return-path"), from_email, _header(headers, "subject"))


def read_report(raw: bytes) -> Report | None:
    """The delivery report in ``raw`` (module docstring), or None when it is none."""
    notes: list[str] = []
    msg = _PARSER.parsebytes(raw[:MAX_REPORT_BYTES])
    root = build_tree(msg, notes)
    parts = iter_parts(root)
    status = next((p for p in parts if p.ctype in _STATUS_TYPES), None)
    returned = next((p for p in parts if p.ctype in _RETURNED_TYPES), None)
    report_type = header_params(str(msg.get("content-type", ""))).get("report-type", "")
    standard = status is not None or (
        root.ctype == "multipart/report" and report_type.lower() == "delivery-status"
    )
    subject = _text(msg.get("subject"))
    if not standard:
        sender = _text(msg.get("from"))
        if returned is None or not _says_bounce(_text(msg.get("return-path")), sender, subject):
            return None
    per_message: dict[str, str] = {}
    recipients: list[RecipientReport] = []
    if status is not None:
        per_message, recipients = _status_fields(payload_bytes(status, notes))
    ids = [
        *_ids(per_message.get("original-message-id", "")),
        *_ids(_text(msg.get("original-message-id"))),
        *(_returned_ids(returned, notes) if returned is not None else []),
        *parse_id_list(_text(msg.get("in-reply-to"))),
    ]
    return Report(
        message_ids=tuple(dict.fromkeys(ids)),
        recipients=tuple(recipients),
        standard=standard,
        text="" if standard else _human_text(parts, notes),
        delayed=not standard and bool(_DELAY_SUBJECT.search(subject)),
    )


def recognise_bounces(store: Store, message_ids: Sequence[int]) -> None:
    """Attach the delivery reports among these stored messages to their submissions.

    The enricher of newly stored mail. Never raises for a message: a report that
    cannot be read is logged and skipped.
    """
    with store.session() as session:
        candidates = _candidates(session, message_ids)
    for message_id in candidates:
        try:
            with store.session() as session:
                _attach(session, message_id)
        except Exception:  # one hostile report must not cost the others
            log.exception("Reading message %s as a delivery report failed", message_id)


# -- finding candidates --------------------------------------------------------


def _candidates(session: Session, message_ids: Sequence[int]) -> list[int]:
    """The ids among ``message_ids`` that may be reports on something their user sent."""
    if not message_ids:
        return []
    first_sent = (
        select(func.min(Submission.queued_at))
        .where(Submission.user_id == Message.user_id)
        .scalar_subquery()
    )
    rows = session.execute(
        select(
            Message.id,
            Message.user_id,
            Message.sealed,
            Message.from_email,
            Message.received_at,
            first_sent.label("since"),
        )
        .join(MessageBody, MessageBody.message_id == Message.id)
        .where(Message.id.in_(sorted(set(message_ids))), first_sent.is_not(None))
    ).all()
    bodies = columns_of(session, [row[0] for row in rows], ["headers", "attachments"])
    found: list[int] = []
    for row in open_rows(session, rows, ["from_email"]):
        message_id, from_email = row["id"], row["from_email"]
        received_at, since = row["received_at"], row["since"]
        if received_at + CLOCK_SLACK < since:
            continue
        headers = bodies.get(message_id, {}).get("headers")
        attachments = bodies.get(message_id, {}).get("attachments")
        types = [str(a.get("content_type", "")) for a in attachments or [] if isinstance(a, dict)]
        if looks_like_bounce(headers or [], types, from_email or ""):
            found.append(message_id)
    return found


def _header(headers: Sequence[Sequence[str]], name: str) -> str:
    for pair in headers:
        if len(pair) == 2 and str(pair[0]).lower() == name:
            return str(pair[1])
    return ""


def _says_bounce(return_path: str, sender: str, subject: str) -> bool:
    """A null return path, a mailer-daemon-like sender or a bounce subject."""
    if return_path.strip().replace(" ", "") == "<>":
        return True
    address = _address_in(sender)
    return bool(_DAEMON.match(address) or _BOUNCE_SUBJECT.search(subject))


# -- reading a report ----------------------------------------------------------


def _text(value: object) -> str:
    """A header value as text, undecodable bytes replaced, trimmed to :data:`MAX_FIELD`."""
    if value is None:
        return ""
    text = str(value)
    return text.encode("utf-8", "replace").decode("utf-8", "replace")[:MAX_FIELD]


def _ids(value: str) -> list[str]:
    found = normalize_message_id(value) if value else None
    return [found] if found else []


def _address_in(value: str) -> str:
    """The bare address of ``"Name <a@b>"``, ``"rfc822; a@b"`` or ``"a@b"``, lower-cased."""
    text = value.strip()
    if "<" in text and ">" in text:
        text = text[text.rfind("<") + 1 : text.rfind(">")]
    return text.strip().strip("<>").strip().lower()


def _typed_address(value: str) -> str:
    """The address of an RFC 3464 ``address-type; address`` value."""
    _type, sep, address = value.partition(";")
    return _address_in(address if sep else value)


def _blocks(text: str) -> list[dict[str, str]]:
    """The header blocks of a ``message/delivery-status`` body, field names lower-cased."""
    blocks: list[dict[str, str]] = []
    current: dict[str, str] = {}
    last: str | None = None
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if not line.strip():
            if current:
                blocks.append(current)
            current, last = {}, None
            if len(blocks) > MAX_RECIPIENTS:
                break
            continue
        if line[0] in " \t" and last is not None:
            current[last] = (current[last] + " " + line.strip())[:MAX_FIELD]
            continue
        name, sep, value = line.partition(":")
        if not sep:
            continue
        last = name.strip().lower()
        current.setdefault(last, value.strip()[:MAX_FIELD])
    if current:
        blocks.append(current)
    return blocks


def _status_fields(data: bytes) -> tuple[dict[str, str], list[RecipientReport]]:
    """(per-message fields, per-recipient reports) of a delivery-status part."""
    text, _note = decode_bytes(data, "utf-8")
    blocks = _blocks(text)
    per_message: dict[str, str] = {}
    recipients: list[RecipientReport] = []
    for block in blocks:
        final = block.get("final-recipient", "")
        original = block.get("original-recipient", "")
        if not (final or original):
            if not recipients:
                per_message.update(block)
            continue
        diagnostic = block.get("diagnostic-code", "")
        kind, sep, reply = diagnostic.partition(";")
        recipients.append(
            RecipientReport(
                recipient=_typed_address(final or original),
                original=_typed_address(original) if original else "",
                action=(block.get("action", "").split() or ["unknown"])[0].lower(),
                status=block.get("status", "").split(" ")[0],
                diagnostic=(reply if sep else kind).strip(),
            )
        )
        if len(recipients) >= MAX_RECIPIENTS:
            break
    return per_message, recipients


def _returned_ids(part: Part, notes: list[str]) -> list[str]:
    """The Message-ID of the returned message or headers."""
    if part.ctype.startswith("message/") and part.ctype != "message/global-headers":
        payload = getattr(part.msg, "_payload", None)
        inner = payload[0] if isinstance(payload, list) and payload else None
        if isinstance(inner, MimeMessage):
            return _ids(_text(inner.get("message-id")))
    text, _note = decode_bytes(payload_bytes(part, notes)[:65536], part.charset)
    headers = HeaderParser(policy=compat32).parsestr(text, headersonly=True)
    return _ids(_text(headers.get("message-id")))


def _human_text(parts: list[Part], notes: list[str]) -> str:
    """The first text/plain part (a non-standard bounce's explanation), at most 64 KiB."""
    for part in parts:
        if part.ctype == "text/plain" and part.children is None:
            text, _note = decode_bytes(payload_bytes(part, notes)[:65536], part.charset)
            return text
    return ""


# -- attaching a report ---------------------------------------------------------


def _attach(session: Session, message_id: int) -> None:
    """Read one stored message as a report and attach it to the submissions it is about."""
    row = session.execute(
        select(Message.user_id, Blob.sha256, Blob.data, Blob.user_id.label("sealed_for"))
        .join(Blob, Blob.sha256 == Message.raw_sha256)
        .where(Message.id == message_id)
    ).one_or_none()
    if row is None:
        return
    raw = open_blob(session, row.sha256, row.data, row.sealed_for)
    if raw is None:
        return
    report = read_report(raw)
    if report is None or not report.message_ids:
        return
    keys = key_forms(session, row.user_id, report.message_ids)
    submissions = session.scalars(
        select(Submission)
        .where(Submission.user_id == row.user_id, Submission.message_key.in_(keys))
        .order_by(Submission.id)
        .with_for_update()
    ).all()
    for submission in submissions:  # opened as they load, when sealed
        recipients = _recipients_of(report, submission)
        listed = [r.as_row() for r in recipients]
        inserted = insert_ignoring_conflicts(
            session,
            Bounce,
            [
                {
                    "submission_id": submission.id,
                    "message_id": message_id,
                    "recipients": [] if submission.sealed else listed,
                }
            ],
            conflict=["submission_id", "message_id"],
            returning=["id"],
        )
        if not inserted:
            continue  # this report was attached before
        if submission.sealed:
            rows = {inserted[0][0]: {"recipients": listed}}
            write_sealed(session, Bounce, submission.user_id, rows)
        # A sealed submission's new status is sealed before the flush writes it.
        submission.delivery_status = _updated_status(submission, recipients)
        session.flush()
        record_submission_change(session, submission.user_id, [submission.id])


def _envelope_recipients(submission: Submission) -> list[str]:
    envelope: dict[str, Any] = submission.envelope or {}
    found = [
        str(item.get("email", ""))
        for item in envelope.get("rcptTo") or []
        if isinstance(item, dict) and item.get("email")
    ]
    return found or list((submission.delivery_status or {}).keys())


def _recipients_of(report: Report, submission: Submission) -> list[RecipientReport]:
    """The report's recipients; for a non-standard one, those of the submission it mentions."""
    if report.standard:
        return list(report.recipients)
    rcpts = _envelope_recipients(submission)
    text = report.text.lower()
    mentioned = [r for r in rcpts if r.lower() in text] or (rcpts if len(rcpts) == 1 else [])
    action, status = ("delayed", "4.0.0") if report.delayed else ("failed", "5.0.0")
    return [
        RecipientReport(r.lower(), "", action, status, _line_naming(report.text, r))
        for r in mentioned
    ]


def _line_naming(text: str, address: str) -> str:
    """The line of a bounce's text that names ``address`` and the one after (its reason)."""
    lines = [line.strip() for line in text.splitlines()]
    for index, line in enumerate(lines):
        if address.lower() in line.lower():
            following = lines[index + 1] if index + 1 < len(lines) else ""
            return " ".join(part for part in (line, following) if part)[:MAX_FIELD]
    return ""


def _updated_status(
    submission: Submission, recipients: list[RecipientReport]
) -> dict[str, Any] | None:
    """``delivery_status`` with what the report says of each recipient it can place."""
    status: dict[str, Any] = {k: dict(v) for k, v in (submission.delivery_status or {}).items()}
    known = {r.lower(): r for r in [*_envelope_recipients(submission), *status]}
    for report in recipients:
        key = known.get(report.original) or known.get(report.recipient)
        if key is None and len(known) == 1:
            key = next(iter(known.values()))  # an alias the server expanded: the only one
        if key is None:
            continue
        entry = status.get(key) or {"smtpReply": "", "delivered": "queued", "displayed": "unknown"}
        delivered = _DELIVERED.get(report.action)
        if delivered is not None:
            entry["delivered"] = delivered
        entry["smtpReply"] = _smtp_reply(report) or entry.get("smtpReply", "")
        status[key] = entry
    return status or submission.delivery_status


def _smtp_reply(report: RecipientReport) -> str:
    """The report's reply as an SMTP reply string (RFC 8621 ``smtpReply``)."""
    if _SMTP_REPLY.match(report.diagnostic):
        return report.diagnostic
    code = {"2": "250", "4": "451", "5": "550"}.get(report.status[:1])
    if code is None:
        return report.diagnostic
    return " ".join(part for part in (code, report.status, report.diagnostic) if part)
