"""Checking an outgoing server's settings: one sentence per mistake, defaults per security."""

from __future__ import annotations

import pytest

from mailroom.errors import ConfigError
from mailroom.outbound.smtp_settings import SmtpSettings, check_smtp, is_loopback


@pytest.mark.parametrize(("security", "port"), [("tls", 465), ("starttls", 587), ("none", 25)])
def test_each_security_has_its_default_port(security: str, port: int) -> None:
    """465 for implicit TLS, 587 for STARTTLS (submission), 25 for plain to this machine."""
    assert check_smtp("localhost", security=security).port == port


def test_values_are_trimmed_and_an_empty_login_means_none() -> None:
    """Spaces around the host and login go; '' as login sends without AUTH."""
    assert check_smtp(" smtp.example.org ", login=" alice ") == SmtpSettings(
        "smtp.example.org", 587, "starttls", "alice"
    )
    assert check_smtp("smtp.example.org", login="").login is None


@pytest.mark.parametrize(
    ("kwargs", "sentence"),
    [
        (
            {"host": "smtp.example.org", "security": "ssl"},
            "The SMTP security must be one of tls, starttls, none, not 'ssl'.",
        ),
        (
            {"host": "smtp.example.org", "port": 0},
            "The SMTP port 0 is not a TCP port (1-65535).",
        ),
        (
            {"host": "smtp.example.org", "port": 65536},
            "The SMTP port 65536 is not a TCP port (1-65535).",
        ),
        (
            {"host": "smtp.example.org", "security": "none"},
            "Unencrypted SMTP is only allowed to this machine, not to smtp.example.org; "
            "use --smtp-security tls or starttls.",
        ),
        (
            {"host": "10.0.0.5", "security": "none"},
            "Unencrypted SMTP is only allowed to this machine, not to 10.0.0.5; "
            "use --smtp-security tls or starttls.",
        ),
        (
            {"host": "smtp example.org"},
            "'smtp example.org' is not a host name; give the outgoing server, "
            "e.g. smtp.example.org.",
        ),
    ],
)
def test_mistakes_are_one_sentence(kwargs: dict[str, object], sentence: str) -> None:
    """Unknown security, a port out of range, plain SMTP to another machine, a bad host."""
    host = str(kwargs.pop("host"))
    with pytest.raises(ConfigError) as wrong:
        check_smtp(host, **kwargs)  # type: ignore[arg-type]
    assert str(wrong.value) == sentence


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("localhost", True),
        ("LOCALHOST.", True),
        ("mail.localhost", True),
        ("127.0.0.1", True),
        ("127.5.5.5", True),
        ("::1", True),
        ("[::1]", True),
        ("10.0.0.1", False),
        ("localhost.example.org", False),
        ("smtp.example.org", False),
    ],
)
def test_what_counts_as_this_machine(host: str, loopback: bool) -> None:
    """localhost names and loopback addresses only."""
    assert is_loopback(host) is loopback
