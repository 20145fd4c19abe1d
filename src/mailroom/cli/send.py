"""``mailroom send``: queue a message from a script, the body on standard input.

::

    mailroom send --to bob@example.net --subject "Nightly report" < report.txt
    mailroom send --to a@x.org --cc b@y.org --kind invoice --attach invoice.pdf < note.txt

The message is sent as one of the user's identities: ``--from ADDRESS``, or
the default address of ``--account NAME``, or of the user's only account.
It is composed with :mod:`mailroom.mime.compose` (text/plain in UTF-8, with
the ``--attach`` files in a multipart/mixed) and queued with
:func:`mailroom.outbound.queueing.queue_message` in the lane of ``--kind``
(per ``MAILROOM_LANE_KINDS``; unknown kinds go ``calm``) or the ``--lane``
given. The submission id is printed alone on standard output, so a script
can keep it (``id=$(mailroom send ...)``); the lane workers of ``mailroom
serve`` (or ``mailroom worker``) send it, woken at once: the commit enqueues
the lane's job in the queues they share (:func:`mailroom.jobs.sending.waking`).
"""

from __future__ import annotations

import mimetypes
import sys
from pathlib import Path

import click

from mailroom.cli.context import AppContext, pass_app, plain_errors
from mailroom.errors import ConfigError
from mailroom.mime.addresses import parse_address_list
from mailroom.mime.compose import BodyPart, ComposeError, Header, Mailbox, compose
from mailroom.outbound.lanes import LANES
from mailroom.outbound.queueing import queue_message
from mailroom.outbound.sending_as import choose_identity
from mailroom.owners import DEFAULT_OWNER, get_user

MAX_ATTACHMENT_BYTES = 25 * 1024 * 1024  # all attachments together, like the submission port


@click.command("send")
@click.option("--to", "to", multiple=True, help="A recipient (repeat, or separate with commas).")
@click.option("--cc", multiple=True, help="A copy recipient (repeatable).")
@click.option("--bcc", multiple=True, help="A blind copy recipient (repeatable; not shown).")
@click.option("--subject", required=True, help="The subject line.")
@click.option("--from", "sender", default=None, help="One of your addresses to send as.")
@click.option("--account", default=None, help="The account to send from (its own address).")
@click.option("--kind", default=None, help="The kind of mail, which picks the lane.")
@click.option("--lane", type=click.Choice(LANES), default=None, help="The lane, instead of --kind.")
@click.option(
    "--attach",
    multiple=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="A file to attach (repeatable).",
)
@click.option("--owner", default=DEFAULT_OWNER, show_default=True, help="The user who sends.")
@pass_app
@plain_errors
def send_command(
    app: AppContext,
    to: tuple[str, ...],
    cc: tuple[str, ...],
    bcc: tuple[str, ...],
    subject: str,
    sender: str | None,
    account: str | None,
    kind: str | None,
    lane: str | None,
    attach: tuple[Path, ...],
    owner: str,
) -> None:
    """Queue a message (body on standard input) and print its submission id."""
    if kind is not None and lane is not None:
        raise ConfigError("Give either --kind or --lane, not both.")
    recipients = {"To": _mailboxes("to", to), "Cc": _mailboxes("cc", cc)}
    recipients["Bcc"] = _mailboxes("bcc", bcc)
    if not any(recipients.values()):
        raise ConfigError("Give at least one recipient with --to, --cc or --bcc.")
    files = [_attachment(path) for path in attach]
    body = _body(bool(files))
    from mailroom.jobs.sending import waking  # the engine's lane job starts at once

    store = app.existing_store
    with waking(store, app.settings), store.session() as session:
        user = get_user(session, owner)
        identity = choose_identity(session, user, address=sender, account_name=account)
        headers = [
            Header("From", "addresses", (Mailbox(identity.name or None, identity.email),)),
            *(Header(name, "addresses", boxes) for name, boxes in recipients.items() if boxes),
            Header("Subject", "text", subject),
        ]
        text = BodyPart("text/plain", body)
        tree = BodyPart("multipart/mixed", parts=(text, *files)) if files else text
        try:
            message = compose(headers, tree, domain=identity.email.rpartition("@")[2])
        except ComposeError as exc:
            raise ConfigError(str(exc)) from None
        submission = queue_message(
            session,
            settings=app.settings,
            account_id=identity.account_id,
            raw=message.raw,
            kind=kind,
            lane=lane,
            identity_id=identity.id,
        )
        session.flush()
        submission_id = submission.id
    click.echo(str(submission_id))


def _mailboxes(option: str, values: tuple[str, ...]) -> tuple[Mailbox, ...]:
    """The addresses of ``--to``/``--cc``/``--bcc``; a ConfigError for one that is none."""
    found: list[Mailbox] = []
    for value in values:
        addresses = parse_address_list(value)
        bad = next((a.email for a in addresses if not _is_address(a.email)), None)
        if not addresses or bad is not None:
            raise ConfigError(
                f"--{option} {(bad or value)!r} is not an email address; "
                "give one such as bob@example.org."
            )
        found.extend(Mailbox(a.name or None, a.email) for a in addresses)
    return tuple(found)


def _is_address(email: str) -> bool:
    local, at, domain = email.rpartition("@")
    return bool(at and local and "." in domain.strip(".") and " " not in email)


def _attachment(path: Path) -> BodyPart:
    try:
        data = path.expanduser().read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"The file {path} to attach does not exist.") from None
    except OSError as exc:
        raise ConfigError(f"The file {path} to attach is not readable ({exc.strerror}).") from None
    if len(data) > MAX_ATTACHMENT_BYTES:
        raise ConfigError(f"The file {path} is too large to send (over 25 MiB).")
    media_type = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    return BodyPart(media_type, data, name=path.name, disposition="attachment")


def _body(has_files: bool) -> str:
    """The text from standard input; a ConfigError when there is none to read."""
    stdin = sys.stdin
    if stdin is None or stdin.isatty():
        raise ConfigError(
            "Give the message body on standard input, such as `mailroom send ... < body.txt`."
        )
    data = stdin.buffer.read()
    if not data.strip() and not has_files:
        raise ConfigError(
            "The message body on standard input is empty; give some text or --attach a file."
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError("The message body is not UTF-8 text; attach it with --attach.") from None
