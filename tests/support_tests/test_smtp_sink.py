"""The SMTP sink of the sending tests: plain, STARTTLS or implicit TLS with AUTH, scripts."""

from __future__ import annotations

import smtplib
import ssl
from pathlib import Path

import pytest

from tests.jmap.conftest import self_signed
from tests.support.smtp_sink import SmtpSink

MESSAGE = b"Subject: hi\r\nMessage-ID: <1@x>\r\n\r\nbody\r\n"


def test_plain_sink_keeps_what_it_accepted_and_answers_its_script() -> None:
    """Scripted replies come first; later messages are accepted and kept."""
    with SmtpSink() as sink:
        sink.script(["451 4.3.0 try later"])
        with smtplib.SMTP(sink.host, sink.port) as client:
            with pytest.raises(smtplib.SMTPDataError) as refused:
                client.sendmail("a@x.example", ["b@y.example"], MESSAGE)
            client.sendmail("a@x.example", ["b@y.example"], MESSAGE)
    assert refused.value.smtp_code == 451
    assert sink.attempts == 2
    assert [(m.mail_from, m.rcpt_tos) for m in sink.messages] == [("a@x.example", ("b@y.example",))]


@pytest.mark.parametrize("implicit", [False, True])
def test_tls_sink_requires_auth(tmp_path: Path, implicit: bool) -> None:
    """STARTTLS or implicit TLS, then AUTH with the one login the sink knows."""
    cert, key = self_signed(tmp_path)
    context = ssl.create_default_context(cafile=str(cert))
    sink = SmtpSink(login="u", password="p", certfile=cert, keyfile=key, implicit_tls=implicit)
    with sink:
        client = (
            smtplib.SMTP_SSL(sink.host, sink.port, context=context)
            if implicit
            else smtplib.SMTP(sink.host, sink.port)
        )
        with client:
            if not implicit:
                client.starttls(context=context)
            with pytest.raises(smtplib.SMTPAuthenticationError):
                client.login("u", "wrong")
            client.login("u", "p")
            client.sendmail("a@x.example", ["b@y.example"], MESSAGE)
    assert [m.login for m in sink.messages] == ["u"]
