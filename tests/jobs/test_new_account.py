"""An account added while `mailroom serve` runs is synced and imported without a restart.

Against a real `mailroom serve` (embedded: the consumers and the supervisor in the
server process) and a real Dovecot, on both stores. The account is added the two
ways a person does it while the engine runs: through the function the web page
and the CLI call (here from another process, as the CLI does), and through
`mailroom account add imap`. Nothing else happens afterwards — no `mailroom sync`,
no restart — yet every message must arrive: the engine's poll interval (5 minutes)
is far longer than the wait.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import func, select

from mailroom.config import Settings
from mailroom.secrets import generate_key
from mailroom.store.engine import Store
from mailroom.store.models import Account, Message
from tests.factories import make_message
from tests.imap.conftest import add_account, dovecot, new_mailbox
from tests.imap.views import Mailbox
from tests.support.dovecot import DovecotServer
from tests.web.browser.conftest import Served, serve_store

__all__ = ["dovecot"]  # the session's Dovecot, shared with the IMAP tests

MESSAGES = 120  # more than one import page
ARRIVAL_SECONDS = 120  # well below the 300 s poll that used to be the only way in


@pytest.fixture
def master_key() -> str:
    """The master key of the served engine (and of whoever adds the account)."""
    return generate_key()


@pytest.fixture
def served(store: Store, master_key: str, tmp_path: Path) -> Iterator[Served]:
    """`mailroom serve` with a master key and 127.0.0.1 allow-listed (its ./.env)."""
    (tmp_path / ".env").write_text(
        f"MAILROOM_MASTER_KEY={master_key}\nMAILROOM_ALLOWED_PRIVATE_HOSTS=127.0.0.1\n"
    )
    yield from serve_store(store, tmp_path)


@pytest.fixture
def mailbox(dovecot: DovecotServer) -> Mailbox:
    """A fresh Dovecot user holding :data:`MESSAGES` messages."""
    mailbox = new_mailbox(dovecot)
    for number in range(MESSAGES):
        dovecot.deliver(mailbox.user, make_message(f"n{number}@dovecot", subject=f"Old {number}"))
    return mailbox


def _arrived(store: Store, name: str) -> int:
    with store.session() as session:
        return (
            session.scalar(
                select(func.count(Message.id))
                .join(Account, Account.id == Message.account_id)
                .where(Account.name == name)
            )
            or 0
        )


def _wait_for_all(store: Store, served: Served, name: str) -> None:
    deadline = time.monotonic() + ARRIVAL_SECONDS
    while (count := _arrived(store, name)) < MESSAGES:
        assert served.process.poll() is None, "mailroom serve stopped"
        if time.monotonic() > deadline:
            raise AssertionError(f"{count} of {MESSAGES} messages after {ARRIVAL_SECONDS} s")
        time.sleep(0.5)
    assert _arrived(store, name) == MESSAGES  # exactly once


def test_an_account_added_by_the_function_imports(
    store: Store, served: Served, master_key: str, mailbox: Mailbox
) -> None:
    settings = Settings(master_key=master_key, allowed_private_hosts="127.0.0.1")
    add_account(store, settings, mailbox, name="added")
    _wait_for_all(store, served, "added")


def test_an_account_added_by_the_cli_imports(
    store: Store, served: Served, mailbox: Mailbox, tmp_path: Path
) -> None:
    env = {
        **{key: value for key, value in os.environ.items() if not key.startswith("MAILROOM_")},
        "MAILROOM_DATA_DIR": str(served.data_dir),
        "MAILROOM_DATABASE_URL": store.engine.url.render_as_string(hide_password=False),
    }
    command = [
        *(sys.executable, "-m", "mailroom", "account", "add", "imap", "--name", "typed"),
        *("--host", mailbox.server.host, "--port", str(mailbox.server.port), "--tls", "none"),
        *("--login", mailbox.user, "--password-stdin"),
    ]
    done = subprocess.run(
        command, cwd=tmp_path, env=env, input=mailbox.password, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    _wait_for_all(store, served, "typed")
