"""``mailroom account add gmail`` / ``microsoft`` as a user meets them, in a subprocess.

The test plays the browser: it reads the printed URL from the command's output
and follows it with httpx; the command then stores the account. Mistakes end
with one sentence on stderr and exit status 1, never a traceback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from mailroom.cli.main import cli
from mailroom.config import Settings
from mailroom.oauth.source import TokenSource
from mailroom.store.engine import Store
from mailroom.store.models import Account
from tests.oauth.browser import open_in_browser
from tests.oauth.conftest import CLIENT_ID, CLIENT_SECRET, PUBLIC_CLIENT_ID
from tests.oauth.server import AuthServer


def _environment(settings: Settings, store: Store) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("MAILROOM_")}
    assert settings.master_key is not None
    return {
        **base,
        "MAILROOM_DATA_DIR": str(settings.data_dir),
        "MAILROOM_DATABASE_URL": store.engine.url.render_as_string(hide_password=False),
        "MAILROOM_MASTER_KEY": settings.master_key.get_secret_value(),
        "MAILROOM_ALLOWED_PRIVATE_HOSTS": "127.0.0.1",
    }


def _start(settings: Settings, store: Store, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "mailroom", "account", "add", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_environment(settings, store),
    )


def _printed_url(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    for line in process.stdout:
        if line.strip().startswith("http"):
            return line.strip()
    raise AssertionError(
        f"no URL printed; stderr: {process.stderr.read() if process.stderr else ''}"
    )


def _finish(process: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=120)
    return process.returncode, out, err


def _one_sentence(returncode: int, err: str) -> str:
    assert returncode == 1, err
    assert "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert line.startswith("mailroom: ")
    return line


def _secret_file(tmp_path: Path) -> Path:
    path = tmp_path / "client_secret.json"
    console = {"installed": {"client_id": CLIENT_ID, "client_secret": CLIENT_SECRET}}
    path.write_text(json.dumps(console))
    return path


def _gmail_args(
    auth_server: AuthServer, secret_file: Path, *extra: str, address: str = "ann@gmail.example"
) -> list[str]:
    return [
        "gmail",
        "--name",
        "work",
        "--address",
        address,
        "--client-id",
        CLIENT_ID,
        "--client-secret-file",
        str(secret_file),
        "--oauth-url",
        auth_server.url,
        *extra,
    ]


def test_gmail_account_add_runs_the_browser_flow(
    store: Store, settings: Settings, auth_server: AuthServer, tmp_path: Path
) -> None:
    """The command prints the URL, waits, and stores an active account with working tokens."""
    process = _start(settings, store, *_gmail_args(auth_server, _secret_file(tmp_path)))
    page = open_in_browser(_printed_url(process))
    assert "Signed in" in page.text
    returncode, out, err = _finish(process)
    assert returncode == 0, err
    assert "Connected: the Gmail account 'work' (ann@gmail.example)" in out
    with store.session() as session:
        (account,) = session.query(Account).all()
        account_id = account.id
        assert (account.provider, account.status) == ("gmail", "active")
    (access,) = auth_server.access_tokens
    assert TokenSource(store, account_id, settings).access_token() == access


def test_microsoft_account_add_with_a_public_client(
    store: Store, settings: Settings, auth_server: AuthServer
) -> None:
    """No secret file: a public client; the tenant chosen lands in the token URL."""
    process = _start(
        settings,
        store,
        "microsoft",
        "--name",
        "office",
        "--address",
        "ann@contoso.example",
        "--client-id",
        PUBLIC_CLIENT_ID,
        "--tenant",
        "organizations",
        "--oauth-url",
        auth_server.url,
    )
    open_in_browser(_printed_url(process))
    returncode, out, err = _finish(process)
    assert returncode == 0, err
    assert "Connected: the Microsoft account 'office'" in out
    assert auth_server.token_paths == ["/organizations/oauth2/v2.0/token"]
    with store.session() as session:
        (account,) = session.query(Account).all()
        assert account.provider == "microsoft"
        assert account.settings["oauth"]["token_url"].endswith("/organizations/oauth2/v2.0/token")


def test_a_tampered_state_is_one_sentence_and_stores_nothing(
    store: Store, settings: Settings, auth_server: AuthServer, tmp_path: Path
) -> None:
    """A state changed on the way back: refused in one sentence, no account, no exchange."""
    auth_server.tamper_state = True
    process = _start(settings, store, *_gmail_args(auth_server, _secret_file(tmp_path)))
    open_in_browser(_printed_url(process))
    line = _one_sentence(*_finish(process)[::2])
    assert "does not belong to this connection attempt" in line
    assert auth_server.token_requests == []
    with store.session() as session:
        assert session.query(Account).count() == 0


def test_a_wrong_client_secret_is_the_token_endpoints_answer_in_one_sentence(
    store: Store, settings: Settings, auth_server: AuthServer, tmp_path: Path
) -> None:
    """invalid_client from the token endpoint tells the owner to check the id and secret."""
    wrong = tmp_path / "secret.txt"
    wrong.write_text("not-the-secret\n")
    process = _start(settings, store, *_gmail_args(auth_server, wrong))
    open_in_browser(_printed_url(process))
    line = _one_sentence(*_finish(process)[::2])
    assert "does not accept this client id or client secret" in line


def test_nobody_signing_in_times_out_in_one_sentence(
    store: Store, settings: Settings, auth_server: AuthServer, tmp_path: Path
) -> None:
    """--wait 1 and no browser: the command gives up with a plain sentence."""
    process = _start(
        settings, store, *_gmail_args(auth_server, _secret_file(tmp_path), "--wait", "1")
    )
    line = _one_sentence(*_finish(process)[::2])
    assert "No answer came from the browser" in line


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (None, "does not exist"),
        (b"\xff\xfe\x00", "is not readable"),
        (b"\n", "holds no client secret"),
        (b'{"installed": {"client_id": "someone-else", "client_secret": "x"}}', "belongs to"),
        (b'{"other": {}}', 'has no "installed" or "web" client'),
        (b"{not json", "neither the JSON file"),
    ],
)
def test_secret_file_mistakes_are_one_sentence_before_the_browser(
    settings: Settings,
    auth_server: AuthServer,
    tmp_path: Path,
    content: bytes | None,
    words: str,
) -> None:
    """A missing, unreadable, empty or foreign secret file stops the command before any URL."""
    path = tmp_path / "secret"
    if content is not None:
        path.write_bytes(content)
    assert settings.master_key is not None
    result = CliRunner().invoke(
        cli,
        ["--data-dir", str(settings.data_dir), "account", "add", *_gmail_args(auth_server, path)],
        env={
            "MAILROOM_MASTER_KEY": settings.master_key.get_secret_value(),
            "MAILROOM_DATABASE_URL": None,
            "MAILROOM_MASTER_KEY_FILE": None,
        },
    )
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result
    (line,) = result.output.strip().splitlines()
    assert line.startswith("mailroom: ") and words in line
    assert auth_server.authorize_requests == []


def test_other_mistakes_are_one_sentence_before_the_browser(
    settings: Settings, auth_server: AuthServer, tmp_path: Path
) -> None:
    """No master key, a bad address, a bad tenant, reconnecting an unknown account: one sentence."""
    secret = _secret_file(tmp_path)
    key = settings.master_key.get_secret_value() if settings.master_key else ""
    cases = [
        ({}, _gmail_args(auth_server, secret), "No master key is set"),
        (
            {"MAILROOM_MASTER_KEY": key},
            _gmail_args(auth_server, secret, address="nobody"),
            "is not a mail address",
        ),
        (
            {"MAILROOM_MASTER_KEY": key},
            [
                "microsoft",
                "--name",
                "o",
                "--address",
                "a@b.example",
                "--client-id",
                "x",
                "--tenant",
                "../evil",
            ],
            "is not a Microsoft tenant",
        ),
        (
            {"MAILROOM_MASTER_KEY": key},
            _gmail_args(auth_server, secret, "--reconnect"),
            "There is no user called",
        ),
    ]
    for env, args, words in cases:
        result = CliRunner().invoke(
            cli,
            ["--data-dir", str(settings.data_dir), "account", "add", *args],
            env={
                "MAILROOM_MASTER_KEY": None,
                "MAILROOM_MASTER_KEY_FILE": None,
                "MAILROOM_DATABASE_URL": None,
                **env,
            },
        )
        assert result.exit_code == 1, result.output
        (line,) = result.output.strip().splitlines()
        assert line.startswith("mailroom: ") and words in line, line
    assert auth_server.authorize_requests == []
