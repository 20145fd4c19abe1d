"""Outgoing servers of accounts: the --smtp-* options, the sealed password, transport_for.

Run in-process against both stores; the sends go to a real aiosmtpd sink on loopback.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from sqlalchemy import select

from mailroom.cli.main import cli
from mailroom.config import Settings
from mailroom.errors import ConfigError
from mailroom.outbound.base import SendResult, Transport
from mailroom.outbound.smtp import SmtpTransport
from mailroom.outbound.transports import register_transport, transport_for
from mailroom.owners import get_or_create_user
from mailroom.secrets import SecretBox, generate_key
from mailroom.store.engine import Store
from mailroom.store.models import Account
from tests.support.smtp_sink import SmtpSink

KEY = generate_key()
RAW = b"From: alice@x.example\r\nSubject: hi\r\nMessage-ID: <s@x.example>\r\n\r\nhello\r\n"


def settings(tmp_path: Path) -> Settings:
    """The settings the CLI runs with in these tests."""
    return Settings(data_dir=tmp_path / "data", master_key=KEY, allowed_private_hosts="127.0.0.1")


def run(store: Store, tmp_path: Path, *args: str, stdin: str | None = None) -> Result:
    """The CLI in process against the test store, with a master key."""
    url = store.engine.url.render_as_string(hide_password=False)
    return CliRunner().invoke(
        cli,
        ["--database-url", url, *args],
        input=stdin,
        env={
            "MAILROOM_DATA_DIR": str(tmp_path / "data"),
            "MAILROOM_MASTER_KEY": KEY,
            "MAILROOM_ALLOWED_PRIVATE_HOSTS": "127.0.0.1",
        },
    )


def ok(result: Result) -> str:
    """The output of a command that must succeed."""
    assert result.exit_code == 0, result.output
    return result.output


def refused(result: Result) -> str:
    """The one sentence of a command that must fail plainly."""
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    (line,) = result.output.strip().splitlines()
    assert line.startswith("mailroom: ")
    return line.removeprefix("mailroom: ")


def account(store: Store, name: str) -> Account:
    """The stored account row (detached)."""
    with store.session() as session:
        row = session.scalars(select(Account).where(Account.name == name)).one()
        session.expunge(row)
        return row


def add_imap(
    store: Store,
    tmp_path: Path,
    *smtp: str,
    name: str = "work",
    imap_stdin: bool = False,
    stdin: str | None = None,
) -> Result:
    """``account add imap`` with the IMAP password "imap-pw" from a file (or stdin)."""
    password = tmp_path / "imap.pw"
    password.write_text("imap-pw\n")
    given = ["--password-stdin"] if imap_stdin else ["--password-file", str(password)]
    imap = ["--host", "imap.example.org", "--login", "alice", *given]
    return run(store, tmp_path, "account", "add", "imap", "--name", name, *imap, *smtp, stdin=stdin)


def deliver(store: Store, tmp_path: Path, name: str) -> SendResult:
    """Send RAW through the transport the account gets."""
    with store.session() as session:
        row = session.scalars(select(Account).where(Account.name == name)).one()
        transport = transport_for(session, row, settings(tmp_path))
    try:
        return transport.send("alice@x.example", ["bob@y.example"], RAW, message_id="s@x.example")
    finally:
        transport.close()


def test_an_imap_account_sends_with_its_imap_login_and_password(
    store: Store, tmp_path: Path
) -> None:
    """--smtp-host alone: SMTP logs in as the IMAP login with the IMAP password."""
    with SmtpSink(login="alice", password="imap-pw") as sink:
        out = ok(
            add_imap(
                store,
                tmp_path,
                "--smtp-host",
                sink.host,
                "--smtp-port",
                str(sink.port),
                "--smtp-security",
                "none",
            )
        )
        assert f"it sends mail through 127.0.0.1:{sink.port} (none, login alice)" in out
        row = account(store, "work")
        assert row.settings["smtp"] == {
            "host": "127.0.0.1",
            "port": sink.port,
            "security": "none",
            "login": "alice",
        }
        assert row.smtp_secret is None
        result = deliver(store, tmp_path, "work")
    assert list(result.accepted) == ["bob@y.example"]
    assert [m.login for m in sink.messages] == ["alice"]


def test_a_separate_smtp_password_is_sealed_for_smtp_only(store: Store, tmp_path: Path) -> None:
    """--smtp-login and --smtp-password-stdin: sealed with account:<id>:smtp, used to log in."""
    with SmtpSink(login="bob", password="smtp-pw") as sink:
        smtp = ["--smtp-host", "localhost", "--smtp-port", str(sink.port)]
        smtp += ["--smtp-security", "none", "--smtp-login", "bob", "--smtp-password-stdin"]
        ok(add_imap(store, tmp_path, *smtp, stdin="smtp-pw\n"))
        row = account(store, "work")
        box = SecretBox.from_settings(settings(tmp_path))
        assert row.smtp_secret is not None
        assert box.open(row.smtp_secret, f"account:{row.id}:smtp") == b"smtp-pw"
        with pytest.raises(ConfigError):
            box.open(row.smtp_secret, f"account:{row.id}")  # not the IMAP password's context
        assert box.open(row.secret or b"", f"account:{row.id}") == b"imap-pw"
        # localhost may resolve to ::1 too, which the allow-list (127.0.0.1) does not hold.
        ok(run(store, tmp_path, "account", "update", "work", "--smtp-host", "127.0.0.1"))
        deliver(store, tmp_path, "work")
    assert [m.login for m in sink.messages] == ["bob"]


def test_both_passwords_cannot_come_from_standard_input(store: Store, tmp_path: Path) -> None:
    """One stdin, two passwords: a plain sentence, and no account is added."""
    smtp = ["--smtp-host", "smtp.example.org", "--smtp-password-stdin"]
    line = refused(add_imap(store, tmp_path, *smtp, imap_stdin=True, stdin="imap-pw\n"))
    assert line == (
        "Only one password can come from standard input; give the SMTP password with "
        "--smtp-password-file."
    )
    assert "work" not in ok(run(store, tmp_path, "accounts", "--format", "jsonl"))


def test_bad_smtp_options_add_no_account(store: Store, tmp_path: Path) -> None:
    """A mistake in the --smtp-* options is found before the account is stored."""
    line = refused(add_imap(store, tmp_path, "--smtp-host", "smtp.example.org", "--smtp-port", "0"))
    assert line == "The SMTP port 0 is not a TCP port (1-65535)."
    line = refused(add_imap(store, tmp_path, "--smtp-port", "587"))
    assert line == "Give the outgoing server with --smtp-host, e.g. smtp.example.org."
    assert ok(run(store, tmp_path, "accounts", "--format", "jsonl")) == ""


def test_update_changes_only_what_is_given(store: Store, tmp_path: Path) -> None:
    """A changed security brings its default port; other values stay; --no-smtp forgets all."""
    ok(add_imap(store, tmp_path, "--smtp-host", "smtp.example.org"))
    assert account(store, "work").settings["smtp"]["port"] == 587
    out = ok(run(store, tmp_path, "account", "update", "work", "--smtp-security", "tls"))
    assert out == "The account 'work' sends mail through smtp.example.org:465 (tls, login alice).\n"
    ok(run(store, tmp_path, "account", "update", "work", "--smtp-port", "2465"))
    ok(run(store, tmp_path, "account", "update", "work", "--smtp-login", "alice@x.example"))
    assert account(store, "work").settings["smtp"] == {
        "host": "smtp.example.org",
        "port": 2465,
        "security": "tls",
        "login": "alice@x.example",
    }
    secret = tmp_path / "smtp.pw"
    secret.write_text("new\n")
    ok(run(store, tmp_path, "account", "update", "work", "--smtp-password-file", str(secret)))
    assert account(store, "work").smtp_secret is not None
    assert account(store, "work").settings["smtp"]["port"] == 2465
    out = ok(run(store, tmp_path, "account", "update", "work", "--no-smtp"))
    assert out == "The account 'work' has no outgoing server now.\n"
    row = account(store, "work")
    assert "smtp" not in row.settings and row.smtp_secret is None
    assert row.settings["host"] == "imap.example.org"  # the IMAP settings are untouched


@pytest.mark.parametrize(
    ("args", "sentence"),
    [
        (("nobody", "--smtp-host", "x.example"), "'me' has no account called 'nobody'."),
        (("work",), "Nothing to change; give --smtp-host and the other --smtp-* options."),
        (
            ("work", "--no-smtp", "--smtp-host", "x.example"),
            "Give either --no-smtp or --smtp-* options, not both.",
        ),
        (
            ("work", "--smtp-host", "smtp.example.org", "--smtp-security", "none"),
            "Unencrypted SMTP is only allowed to this machine, not to smtp.example.org; "
            "use --smtp-security tls or starttls.",
        ),
        (
            ("work", "--smtp-host", "smtp.example.org", "--smtp-login", ""),
            None,  # allowed: no login
        ),
    ],
)
def test_update_mistakes_are_one_sentence(
    store: Store, tmp_path: Path, args: Sequence[str], sentence: str | None
) -> None:
    """Unknown account, nothing to change, contradicting options, plain SMTP elsewhere."""
    ok(add_imap(store, tmp_path))
    result = run(store, tmp_path, "account", "update", *args)
    if sentence is None:
        ok(result)
        assert account(store, "work").settings["smtp"]["login"] is None
    else:
        assert refused(result) == sentence


def test_a_local_account_with_an_outgoing_server(store: Store, tmp_path: Path) -> None:
    """account add local names a source and a server; a login needs its own password."""
    maildir = tmp_path / "Maildir"
    for sub in ("cur", "new", "tmp"):
        (maildir / sub).mkdir(parents=True)
    local = ["account", "add", "local", "--name", "files", "--path", str(maildir)]
    line = refused(
        run(store, tmp_path, *local, "--smtp-host", "smtp.example.org", "--smtp-login", "me")
    )
    assert line == (
        "The SMTP login 'me' needs a password; give it with --smtp-password-file or "
        "--smtp-password-stdin."
    )
    with SmtpSink() as sink:
        smtp = ["--smtp-host", "127.0.0.1", "--smtp-port", str(sink.port), "--smtp-security"]
        out = ok(run(store, tmp_path, *local, *smtp, "none"))
        assert "`mailroom import" in out
        deliver(store, tmp_path, "files")
    assert [m.rcpt_tos for m in sink.messages] == [("bob@y.example",)]
    listed = [
        json.loads(line)
        for line in ok(run(store, tmp_path, "accounts", "--format", "jsonl")).splitlines()
    ]
    assert [(row["name"], row["outgoing"]) for row in listed] == [
        ("files", f"127.0.0.1:{sink.port}")
    ]
    assert refused(
        run(store, tmp_path, "account", "add", "local", "--name", "x", "--path", "/nonexistent")
    ).startswith("/nonexistent does not exist")


def test_accounts_tell_whether_an_outgoing_server_is_set(store: Store, tmp_path: Path) -> None:
    """The table has an outgoing column; jsonl has "outgoing" (null when none)."""
    ok(add_imap(store, tmp_path, name="plain"))
    ok(add_imap(store, tmp_path, "--smtp-host", "smtp.example.org", name="sending"))
    lines = ok(run(store, tmp_path, "accounts", "--format", "jsonl")).splitlines()
    listed = {row["name"]: row["outgoing"] for row in map(json.loads, lines)}
    assert listed == {"plain": None, "sending": "smtp.example.org:587"}
    table = ok(run(store, tmp_path, "accounts"))
    assert "outgoing" in table and "smtp.example.org:587" in table


def test_an_account_without_outgoing_server_names_the_fix(store: Store, tmp_path: Path) -> None:
    """transport_for: one sentence naming `mailroom account update`."""
    ok(add_imap(store, tmp_path))
    with pytest.raises(ConfigError) as missing:
        deliver(store, tmp_path, "work")
    assert str(missing.value) == (
        "The account 'work' has no outgoing mail server; set one with "
        "`mailroom account update work --smtp-host HOST`."
    )


def test_a_disconnected_account_sends_nothing_and_keeps_no_smtp_password(
    store: Store, tmp_path: Path
) -> None:
    """disconnect forgets the SMTP password with the IMAP one; sending is refused plainly."""
    secret = tmp_path / "smtp.pw"
    secret.write_text("smtp-pw\n")
    ok(
        add_imap(
            store, tmp_path, "--smtp-host", "smtp.example.org", "--smtp-password-file", str(secret)
        )
    )
    ok(run(store, tmp_path, "account", "disconnect", "work"))
    assert account(store, "work").smtp_secret is None
    with pytest.raises(ConfigError, match="is disconnected"):
        deliver(store, tmp_path, "work")


class ApiTransport:
    """A provider's own transport (as Gmail API send will be): records what it was given."""

    def __init__(self, account_name: str) -> None:
        self.account_name = account_name
        self.closed = False

    def send(
        self, envelope_from: str, recipients: Sequence[str], raw: bytes, *, message_id: str
    ) -> SendResult:
        """Accept every recipient."""
        return SendResult(message_id, accepted=dict.fromkeys(recipients, "api: sent"))

    def close(self) -> None:
        """Nothing is kept."""
        self.closed = True


def test_a_registered_provider_transport_is_used_unless_smtp_is_set(
    store: Store, tmp_path: Path
) -> None:
    """register_transport: accounts of that provider send through it; SMTP settings win."""

    def factory(session: Any, row: Account, given: Settings) -> Transport:
        return ApiTransport(row.name)

    register_transport("apimail", factory)
    with store.session() as session:
        user = get_or_create_user(session, "me")
        session.add(Account(user_id=user.id, name="api", provider="apimail", settings={}))
    with store.session() as session:
        row = session.scalars(select(Account).where(Account.name == "api")).one()
        transport = transport_for(session, row, settings(tmp_path))
        assert isinstance(transport, ApiTransport) and transport.account_name == "api"
        row.settings = {"smtp": {"host": "smtp.example.org", "port": 587, "security": "starttls"}}
        assert isinstance(transport_for(session, row, settings(tmp_path)), SmtpTransport)


def test_damaged_outgoing_settings_are_reported_and_can_be_replaced(
    store: Store, tmp_path: Path
) -> None:
    """A broken smtp entry: transport_for names the fix; account update replaces it."""
    ok(add_imap(store, tmp_path))
    with store.session() as session:
        row = session.scalars(select(Account).where(Account.name == "work")).one()
        row.settings = {**row.settings, "smtp": {"port": "many"}}
    with pytest.raises(ConfigError) as damaged:
        deliver(store, tmp_path, "work")
    assert str(damaged.value) == (
        "The outgoing server settings of the account 'work' are damaged; set them again with "
        "`mailroom account update work --smtp-host HOST`."
    )
    ok(run(store, tmp_path, "account", "update", "work", "--smtp-host", "smtp.example.org"))
    assert account(store, "work").settings["smtp"]["port"] == 587
