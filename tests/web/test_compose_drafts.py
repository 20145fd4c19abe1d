"""The compose page's drafts, over real HTTP on both stores: saved as one draft that each
save replaces, reopened, answers (reply, reply to all, forward) and attachments."""

from __future__ import annotations

import html
import re
from email.message import EmailMessage

from mailroom.mime import parse_message
from mailroom.web.compose.drafts import raw_of
from tests.factories import make_message
from tests.helpers import ingest
from tests.outbound.after_support import ME
from tests.web.compose_support import Composer, composer, draft_id

__all__ = ["composer"]  # the fixture, imported for pytest


def _mail(message_id: str, subject: str, body: str, **headers: str) -> bytes:
    message = EmailMessage()
    message["Message-ID"] = f"<{message_id}>"
    message["Date"] = "Mon, 01 Jun 2026 09:00:00 +0000"
    message["Subject"] = subject
    for name, value in headers.items():
        message[name.replace("_", "-")] = value
    message.set_content(body)
    return message.as_bytes()


def _raw(composer: Composer, email_id: int) -> bytes:
    with composer.store.session() as session:
        raw = raw_of(session, composer.user_id, email_id)
    assert raw is not None
    return raw


def _field(page: str, name: str) -> str:
    found = re.search(rf'name="{name}"[^>]*value="([^"]*)"', page)
    assert found is not None, name
    return html.unescape(found.group(1))


def test_saving_as_one_types_keeps_one_draft_that_each_save_replaces(composer: Composer) -> None:
    """Every autosave stores the form anew and destroys the draft it replaces."""
    first = composer.post(htmx=True, action="save", to="bob@example.net", subject="Pla", body="Hi")
    assert first.status_code == 200
    earlier = int(_field(first.text, "draft"))
    assert composer.drafts() == [earlier]
    second = composer.post(
        htmx=True,
        action="save",
        draft=str(earlier),
        to="bob@example.net",
        subject="Plans",
        body="Hi Bob",
    )
    later = int(_field(second.text, "draft"))
    assert later != earlier and composer.drafts() == [later]
    parsed = parse_message(_raw(composer, later))
    assert parsed.subject == "Plans" and parsed.text_body.strip() == "Hi Bob"
    assert [a.email for a in parsed.from_] == [ME]
    assert "Draft saved" in second.text


def test_an_empty_form_saves_nothing_and_a_draft_reopens_as_typed(composer: Composer) -> None:
    """No draft for an untouched form; ?draft=ID shows a saved one with every field."""
    assert composer.post(htmx=True, action="save").status_code == 200
    assert composer.drafts() == []
    saved = draft_id(
        composer.client.post(
            "/compose",
            data={
                "csrf": composer.csrf(),
                "action": "save",
                "to": '"Smith, Bob" <bob@x.org>',
                "cc": "carol@y.org",
                "bcc": "dan@z.org",
                "subject": "Q3",
                "body": "Numbers",
            },
        )
    )
    page = composer.client.get(f"/compose?draft={saved}").text
    assert _field(page, "to") == '"Smith, Bob" <bob@x.org>'
    assert (_field(page, "cc"), _field(page, "bcc"), _field(page, "subject")) == (
        "carol@y.org",
        "dan@z.org",
        "Q3",
    )
    assert "Numbers</textarea>" in page


def test_only_the_users_own_draft_is_ever_replaced(composer: Composer) -> None:
    """A form naming a message that is no draft (an Inbox message) leaves that message alone."""
    inbox = ingest(
        composer.store,
        (composer.user_id, composer.account_id, _inbox(composer)),
        [("keep", make_message("keep@x", subject="Keep me"))],
    ).created_ids[0]
    composer.post(action="save", draft=str(inbox), subject="New")
    assert _raw(composer, inbox)  # still there
    assert composer.client.get(f"/compose?draft={inbox}").status_code == 404


def _inbox(composer: Composer) -> int:
    from mailroom.labels.resolver import system_label

    with composer.store.session() as session:
        return system_label(session, composer.user_id, "inbox").id


def test_reply_and_reply_all_quote_thread_and_address_the_right_people(
    composer: Composer,
) -> None:
    """Reply goes to Reply-To (else From); reply to all adds To and Cc without my address."""
    parent = ingest(
        composer.store,
        (composer.user_id, composer.account_id, _inbox(composer)),
        [
            (
                "p",
                _mail(
                    "parent-1@example.net",
                    "Trip",
                    "Shall we go?\nOn Monday.\n",
                    From="Alice <alice@example.net>",
                    To=f"Me <{ME}>, Bob <bob@example.net>",
                    Cc="carol@example.net",
                    References="<root@example.net>",
                ),
            )
        ],
    ).created_ids[0]
    reply = composer.client.get(f"/compose?reply={parent}").text
    assert _field(reply, "to") == "Alice <alice@example.net>" and _field(reply, "cc") == ""
    assert _field(reply, "subject") == "Re: Trip"
    assert _field(reply, "in_reply_to").strip() == "<parent-1@example.net>"
    assert _field(reply, "references").split() == ["<root@example.net>", "<parent-1@example.net>"]
    assert (
        "&gt; Shall we go?\n&gt; On Monday." in reply
        and "Alice &lt;alice@example.net&gt; wrote:" in reply
    )
    everyone = composer.client.get(f"/compose?reply_all={parent}").text
    assert _field(everyone, "to") == "Alice <alice@example.net>"
    assert _field(everyone, "cc") == "Bob <bob@example.net>, carol@example.net"
    saved = draft_id(
        composer.client.post(
            "/compose",
            data={
                "csrf": composer.csrf(),
                "action": "save",
                "to": "alice@example.net",
                "subject": "Re: Trip",
                "body": "Yes",
                "in_reply_to": "<parent-1@example.net>",
                "references": "<root@example.net> <parent-1@example.net>",
            },
        )
    )
    parsed = parse_message(_raw(composer, saved))
    assert parsed.in_reply_to == ["parent-1@example.net"]
    assert parsed.references == ["root@example.net", "parent-1@example.net"]


def test_forward_carries_the_attachments_and_attachments_can_be_added_and_removed(
    composer: Composer,
) -> None:
    """A forward lists the message's attachments; an upload joins them; Remove drops one."""
    original = ingest(
        composer.store,
        (composer.user_id, composer.account_id, _inbox(composer)),
        [
            (
                "f",
                _with_pdf(
                    _mail(
                        "fwd-1@example.net",
                        "Report",
                        "See attached.\n",
                        From="Alice <alice@example.net>",
                        To=ME,
                    )
                ),
            )
        ],
    ).created_ids[0]
    page = composer.client.get(f"/compose?forward={original}").text
    assert _field(page, "subject") == "Fwd: Report" and "report.pdf" in page
    assert "---------- Forwarded message ----------" in page
    token = _field(page, "att")
    answer = composer.post(
        files={"upload": ("notes.txt", b"my notes", "text/plain")},
        action="attach",
        to="bob@example.net",
        subject="Fwd: Report",
        att=token,
    )
    saved = draft_id(answer)
    parsed = parse_message(_raw(composer, saved))
    assert sorted(a.filename for a in parsed.attachments) == ["notes.txt", "report.pdf"]
    page = composer.client.get(f"/compose?draft={saved}").text
    tokens = re.findall(r'name="att" value="([^"]*)"', page)
    pdf = next(html.unescape(t) for t in tokens if t.endswith("report.pdf"))
    removed = draft_id(
        composer.post(
            action=f"remove:{pdf.split('|')[0]}",
            draft=str(saved),
            to="bob@example.net",
            att="\n".join(html.unescape(t) for t in tokens),
        )
    )
    assert [a.filename for a in parse_message(_raw(composer, removed)).attachments] == ["notes.txt"]
    assert composer.drafts() == [removed]


def _with_pdf(raw: bytes) -> bytes:
    from email import message_from_bytes, policy

    message = message_from_bytes(raw, policy=policy.default)
    assert isinstance(message, EmailMessage)
    message.add_attachment(
        b"%PDF-1.4 report", maintype="application", subtype="pdf", filename="report.pdf"
    )
    return message.as_bytes()


def test_attachments_past_the_size_limit_are_refused_in_one_sentence(composer: Composer) -> None:
    """More than the largest message the server sends is refused; the form stays."""
    answer = composer.post(
        files={"upload": ("big.bin", b"x" * 250_000, "application/octet-stream")},
        action="attach",
        to="bob@example.net",
        subject="Big",
    )
    assert answer.status_code == 422
    assert 'class="error">The attachments may come to at most 200 KB.<' in answer.text
    assert composer.drafts() == []


def test_a_form_without_the_csrf_token_is_refused(composer: Composer) -> None:
    """Another site's page cannot save or send as the user."""
    answer = composer.client.post("/compose", data={"action": "save", "subject": "x"})
    assert answer.status_code == 403 and composer.drafts() == []
