"""`mailroom gmail skipped`: the ledger grouped by kind, as a table or JSON, and forgetting it."""

from __future__ import annotations

import json
from datetime import timedelta

from click.testing import CliRunner, Result

from mailroom.cli.main import cli
from mailroom.owners import get_or_create_account, get_or_create_user
from mailroom.providers.gmail.skipped import (
    CHAT,
    NOT_FOUND,
    SkippedEntry,
    record_skipped,
    skipped_ids,
)
from mailroom.store.engine import Store
from tests.factories import BASE_TIME

CHAT_ID, GONE_ID, OTHER_ID = "17c0ffee00000001", "17c0ffee00000002", "17c0ffee000000ff"


def invoke(store: Store, *args: str) -> Result:
    """Run the CLI in-process against the test store (SQLite file or PostgreSQL)."""
    url = store.engine.url.render_as_string(hide_password=False)
    where = ["--data-dir", str(store.data_dir)] if store.data_dir else []
    return CliRunner().invoke(cli, [*where, "--database-url", url, *args], catch_exceptions=False)


def _accounts(store: Store) -> dict[str, int]:
    """Two Gmail accounts with skipped messages and an IMAP account of the same owner."""
    with store.session() as session:
        user = get_or_create_user(session, "me")
        ids = {
            name: get_or_create_account(session, user, name, provider).id
            for name, provider in (("work", "gmail"), ("home", "gmail"), ("old", "imap"))
        }
        record_skipped(
            session,
            ids["work"],
            [
                SkippedEntry(
                    CHAT_ID,
                    CHAT,
                    "A chat message has no place among mail.",
                    ["CHAT"],
                    {"From": "Ann <ann@example.org>", "To": "me@example.org"},
                ),
                SkippedEntry(GONE_ID, NOT_FOUND, "Gmail listed it but answered 404."),
            ],
            BASE_TIME,
        )
        record_skipped(
            session,
            ids["home"],
            [SkippedEntry(OTHER_ID, NOT_FOUND, "Gmail listed it but answered 404.", ["TRASH"])],
            BASE_TIME + timedelta(hours=1),
        )
    return ids


def test_the_table_groups_by_kind(store: Store) -> None:
    """Without an account every Gmail account's rows show, one titled group per kind."""
    _accounts(store)
    result = invoke(store, "gmail", "skipped")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "Chats: 1"
    assert lines[1].split() == ["account", "id", "from", "labels", "last", "seen", "reason"]
    assert lines[2].split()[:5] == ["work", CHAT_ID, "Ann", "<ann@example.org>", "CHAT"]
    assert "2024-03-01 09:00 UTC" in lines[2]
    assert lines[4] == "Listed but not found (404): 2"
    assert [line.split()[:2] for line in lines[6:]] == [["home", OTHER_ID], ["work", GONE_ID]]


def test_one_account_as_json(store: Store) -> None:
    """Naming an account shows only its rows; JSON carries the whole row."""
    _accounts(store)
    result = invoke(store, "gmail", "skipped", "work", "--format", "json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert [(row["kind"], row["id"]) for row in rows] == [(CHAT, CHAT_ID), (NOT_FOUND, GONE_ID)]
    assert rows[0] == {
        "account": "work",
        "id": CHAT_ID,
        "kind": CHAT,
        "reason": "A chat message has no place among mail.",
        "labels": ["CHAT"],
        "headers": {"from": "Ann <ann@example.org>", "to": "me@example.org"},
        "first_seen": BASE_TIME.isoformat(),
        "last_seen": BASE_TIME.isoformat(),
    }


def test_forget_empties_one_account_only(store: Store) -> None:
    """--forget deletes the named account's rows, so the listing asks Gmail again."""
    ids = _accounts(store)
    result = invoke(store, "gmail", "skipped", "work", "--forget")
    assert (result.exit_code, result.output) == (0, "Forgot 2 skipped messages of 'work'.\n")
    with store.session() as session:
        assert skipped_ids(session, ids["work"], [CHAT_ID, GONE_ID]) == set()
        assert skipped_ids(session, ids["home"], [OTHER_ID]) == {OTHER_ID}
    again = invoke(store, "gmail", "skipped", "work", "--forget", "--format", "json")
    assert json.loads(again.output) == {"account": "work", "forgotten": 0}
    assert invoke(store, "gmail", "skipped", "work").output == "No skipped messages.\n"


def test_clear_errors(store: Store) -> None:
    """An unknown account, a non-Gmail account or --forget without an account: one sentence."""
    _accounts(store)
    unknown = invoke(store, "gmail", "skipped", "nope")
    assert unknown.exit_code == 1
    assert unknown.output == "mailroom: 'me' has no account called 'nope'.\n"
    imap = invoke(store, "gmail", "skipped", "old")
    assert imap.exit_code == 1
    expected = "mailroom: The account 'old' is not a Gmail account (its provider is imap).\n"
    assert imap.output == expected
    bare = invoke(store, "gmail", "skipped", "--forget")
    assert bare.exit_code == 2
    assert "Name the account whose skipped messages to forget." in bare.output
    stranger = invoke(store, "gmail", "skipped", "--owner", "nobody")
    assert stranger.exit_code == 1
    assert "There is no user called 'nobody'" in stranger.output


def test_an_owner_without_gmail_accounts(store: Store) -> None:
    """An owner with no Gmail account is told so instead of an empty table."""
    with store.session() as session:
        get_or_create_user(session, "me")
    result = invoke(store, "gmail", "skipped")
    assert (result.exit_code, result.output) == (0, "'me' has no Gmail accounts.\n")
    as_json = invoke(store, "gmail", "skipped", "--format", "json")
    assert json.loads(as_json.output) == []
