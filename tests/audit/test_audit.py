"""The audit log on both stores: sign-ins over real HTTP, tokens, accounts, keys, the command."""

from __future__ import annotations

import base64
import getpass
import json
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select, text
from sqlalchemy.exc import DBAPIError

from mailroom.audit import Origin, entries
from mailroom.cli.audit import parse_since
from mailroom.errors import ConfigError
from mailroom.jmap.auth import create_token, revoke_token
from mailroom.owners import disconnect_account, get_account
from mailroom.store.engine import Store
from mailroom.store.models import AuditEntry
from tests.cli.test_tokens import run
from tests.helpers import make_account
from tests.web.conftest import PASSWORD, add_user, browser, csrf_of, sign_in

WRONG = "not the password"


def _log(store: Store) -> list[tuple[str, str | None, str, str | None, str]]:
    """Every audit row, oldest first: action, user, via, origin, detail."""
    with store.session() as session:
        rows = session.scalars(select(AuditEntry).order_by(AuditEntry.id)).all()
        return [(r.action, r.user_name, r.via, r.origin, r.detail) for r in rows]


def _basic(name: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{name}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def test_web_and_jmap_sign_ins_are_recorded_with_the_client_address(
    store: Store, server: str
) -> None:
    """Right and wrong passwords on the web form and JMAP Basic, and the lock-out's start."""
    add_user(store, "alice")
    # A name that is no user is recorded without the name (it may be a password).
    for name, password, status in [
        ("alice", PASSWORD, 303),
        ("alice", WRONG, 401),
        ("hunter2", WRONG, 401),
    ]:
        with browser(server) as client:
            assert sign_in(client, server, name, password).status_code == status
    session_url = f"{server}/.well-known/jmap"
    assert httpx.get(session_url, headers=_basic("alice", PASSWORD)).status_code == 200
    # Credentials this process verified already (on the web form) are not checked again.
    for _ in range(4):  # the test policy locks a name at its fifth failure (one was on the web)
        assert httpx.get(session_url, headers=_basic("alice", WRONG)).status_code == 401
    # Refusals while locked are not recorded one by one.
    assert httpx.get(session_url, headers=_basic("alice", WRONG)).status_code == 429
    log = [row for row in _log(store) if row[0].startswith("signin.")]
    assert [(action, user, via) for action, user, via, _, _ in log] == [
        ("signin.ok", "alice", "web"),
        ("signin.failed", "alice", "web"),
        ("signin.failed", None, "web"),
        ("signin.failed", "alice", "jmap"),
        ("signin.failed", "alice", "jmap"),
        ("signin.failed", "alice", "jmap"),
        ("signin.failed", "alice", "jmap"),
        ("signin.locked", "alice", "jmap"),
    ]
    assert {origin for _, _, _, origin, _ in log} == {"127.0.0.1"}
    assert log[2][4] == "no such user" and all("hunter2" not in str(row) for row in log)
    assert "user name reached 5 failed sign-ins" in log[-1][4]


def test_a_web_sign_out_is_recorded_once(store: Store, server: str) -> None:
    """Sign-out is audited with the client address; a forged or repeated sign-out is not."""
    add_user(store, "alice")
    with browser(server) as client:
        assert sign_in(client, server, "alice").status_code == 303
        csrf = csrf_of(client.get("/").text)
        assert client.post("/signout", data={"csrf": "forged"}).status_code == 403
        assert client.post("/signout", data={"csrf": csrf}).status_code == 303
        client.cookies.clear()
        assert client.post("/signout", data={"csrf": csrf}).status_code == 303
    log = [row for row in _log(store) if row[0] == "signout"]
    assert [(action, user, via, origin) for action, user, via, origin, _ in log] == [
        ("signout", "alice", "web", "127.0.0.1")
    ]


def test_token_changes_are_recorded_in_the_action_transaction(store: Store) -> None:
    """create and revoke are recorded with the token's id; a rolled-back create leaves no row."""
    add_user(store, "alice")
    web = Origin.network("web", "192.0.2.7")
    with store.session() as session:
        create_token(session, "alice", "phone", origin=web)
    with store.session() as session:
        (token_id,) = session.scalars(text("SELECT id FROM api_tokens")).all()
        revoke_token(session, token_id)
    with pytest.raises(RuntimeError), store.session() as session:
        create_token(session, "alice", "laptop")
        raise RuntimeError("the action fails after the token was made")
    cli_origin = Origin.cli()
    assert cli_origin.where is not None and cli_origin.where.startswith(getpass.getuser() + "@")
    assert _log(store)[1:] == [
        ("token.create", "alice", "web", "192.0.2.7", f"token {token_id} (phone)"),
        ("token.revoke", "alice", "cli", cli_origin.where, f"token {token_id} (phone)"),
    ]


def test_rows_are_never_updated(store: Store) -> None:
    """The database itself refuses an UPDATE of an audit row on both stores."""
    add_user(store, "alice")
    refused = pytest.raises(DBAPIError, match="audit_log rows are never updated")
    with refused, store.session() as session:
        session.execute(text("UPDATE audit_log SET user_name = 'mallory'"))
    assert _log(store)[0][1] == "alice"


def test_accounts_users_and_keys_are_recorded_by_the_commands(store: Store, tmp_path: Path) -> None:
    """user add, account add local, account disconnect and keys init each leave their row."""
    maildir = tmp_path / "mail"
    for sub in ("cur", "new", "tmp"):
        (maildir / sub).mkdir(parents=True)
    assert (
        run(store, tmp_path, "user", "add", "bob", "--password-stdin", stdin="pw\n").exit_code == 0
    )
    assert (
        run(store, tmp_path, "user", "add", "bob", "--password-stdin", stdin="pw2\n").exit_code == 0
    )
    added = run(
        store,
        tmp_path,
        "account",
        "add",
        "local",
        "--name",
        "home",
        "--path",
        str(maildir),
        "--owner",
        "bob",
    )
    assert added.exit_code == 0, added.output
    assert run(store, tmp_path, "account", "disconnect", "home", "--owner", "bob").exit_code == 0
    assert run(store, tmp_path, "account", "disconnect", "home", "--owner", "bob").exit_code == 0
    key_file = tmp_path / "keys" / "master.key"
    assert run(store, tmp_path, "keys", "init", "--file", str(key_file)).exit_code == 0
    log = _log(store)
    assert [(action, user, via) for action, user, via, _, _ in log] == [
        ("user.create", "bob", "cli"),
        ("user.password", "bob", "cli"),
        ("account.add", "bob", "cli"),
        ("account.disconnect", "bob", "cli"),  # once: the second changed nothing
        ("key.init", None, "cli"),
    ]
    account_id = log[2][4].rsplit("id ", 1)[1].rstrip(")")
    assert log[2][4] == f"local account 'home' (id {account_id})" == log[3][4]
    assert log[4][4] == f"master key file {key_file}"


def test_web_disconnect_is_recorded_from_the_client(store: Store) -> None:
    """A disconnect given a web origin records it (the accounts page passes the address)."""
    make_account(store, owner="carol", name="work")
    with store.session() as session:
        disconnect_account(get_account(session, "carol", "work"), Origin.network("web", "::1"))
    (row,) = _log(store)
    assert row[:4] == ("account.disconnect", "carol", "web", "::1")


def test_the_audit_command_filters_by_user_time_and_count(store: Store, tmp_path: Path) -> None:
    """--user, --since and --limit narrow the newest-first listing; jsonl for programs."""
    for name in ("alice", "bob", "alice2"):
        add_user(store, name)
    with store.session() as session:
        create_token(session, "alice", "one")
        create_token(session, "alice", "two")
    listed = run(store, tmp_path, "audit", "--user", "alice", "--format", "jsonl")
    assert listed.exit_code == 0, listed.output
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [(r["action"], r["detail"][-5:]) for r in rows] == [
        ("token.create", "(two)"),
        ("token.create", "(one)"),
        ("user.create", ""),
    ]
    limited = run(store, tmp_path, "audit", "--limit", "2")
    assert len(limited.stdout.splitlines()) == 2 and "(two)" in limited.stdout
    assert run(store, tmp_path, "audit", "--since", "2999-01-01").stdout.startswith(
        "The audit log has no entries matching that."
    )
    assert len(run(store, tmp_path, "audit", "--since", "1h").stdout.splitlines()) == 5
    with store.session() as session:
        assert len(entries(session, user="bob")) == 1


def test_since_takes_dates_times_and_durations() -> None:
    """A date, a time and a duration are read; anything else is one sentence."""
    assert parse_since("2026-12-01").isoformat() == "2026-12-01T00:00:00+00:00"
    assert parse_since("2026-12-01T08:30").hour == 8
    with pytest.raises(ConfigError, match="neither a date"):
        parse_since("yesterday")
