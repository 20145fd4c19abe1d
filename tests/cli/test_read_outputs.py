"""The exact output of `explain`, `rules list` and `categories list`, on both stores.

These commands read with plain SQL (``store.reader``): with the standard library's
sqlite3 on a SQLite file, in a SQLAlchemy session on PostgreSQL. JSON settings,
booleans and ids come back differently from the two drivers; the output must not.
"""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner, Result
from sqlalchemy import select, update

from mailroom.cli.main import cli
from mailroom.store.engine import Store
from mailroom.store.models import Message, Rule, User
from tests.factories import make_message
from tests.helpers import write_maildir


def invoke(store: Store, *args: str) -> Result:
    """Run the CLI in-process against the test store (SQLite file or PostgreSQL)."""
    url = store.engine.url.render_as_string(hide_password=False)
    return CliRunner().invoke(
        cli, ["--data-dir", str(store.data_dir), "--database-url", url, *args]
    )


def _imported(store: Store, tmp_path: Path) -> dict[str, int]:
    """Three messages imported for the owner `me`; message id by Message-ID."""
    messages = {
        "list": make_message(
            "list@x", subject="Weekly digest", headers={"List-Id": "<walrus.lists.example>"}
        ),
        "own": make_message("own@x", sender="Me <Owner@Example.org>", minutes=1),
        "shop": make_message("shop@x", subject="Your invoice", sender="shop@store.example"),
    }
    done = invoke(store, "import", str(write_maildir(tmp_path / "mail", messages)))
    assert done.exit_code == 0, done.output
    with store.session() as session:
        rows = session.execute(select(Message.message_id_header, Message.id)).all()
        session.execute(update(User).values(settings={"addresses": ["owner@example.org"]}))
    return {header: message_id for header, message_id in rows}


def test_explain_says_why_on_both_stores(store: Store, tmp_path: Path) -> None:
    """A list's mail is Forums; the owner's own mail Primary; a switched-off tab says so."""
    ids = _imported(store, tmp_path)
    assert invoke(store, "categories", "off", "updates").exit_code == 0
    lines = {
        header: invoke(store, "explain", str(message_id)).output.splitlines()
        for header, message_id in ids.items()
    }
    assert lines["list@x"][0] == "Forums: decided by forums (list-id: <walrus.lists.example>)."
    assert lines["own@x"][0] == "Primary: decided by own_message (sent by the owner)."
    assert lines["shop@x"][0] == (
        "Primary: decided by switched_off (subject mentions 'invoice'); "
        "would be Updates, but that tab is switched off."
    )
    assert all(
        "a conversation takes the tab of its newest message unless pinned." in found[1]
        for found in lines.values()
    )
    missing = invoke(store, "explain", "999999")
    assert missing.exit_code == 1
    assert missing.output == (
        "mailroom: There is no message 999999; `mailroom list` shows the ids.\n"
    )


def test_rules_and_categories_list_on_both_stores(store: Store, tmp_path: Path) -> None:
    """Rules in order, one switched off and one no longer valid; tabs with their state."""
    _imported(store, tmp_path)
    assert invoke(store, "rules", "add", "--from", "news@", "--label", "News").exit_code == 0
    named = ("rules", "add", "--name", "Bills", "--subject", "invoice", "--archive")
    assert invoke(store, *named).exit_code == 0
    with store.session() as session:
        session.execute(update(Rule).where(Rule.name == "Bills").values(enabled=False))
        user = session.scalars(select(User.id).where(User.name == "me")).one()
        session.add(
            Rule(
                user_id=user,
                name="old",
                conditions={"from": "x", "colour": "red"},
                actions=[{"type": "archive"}],
                position=3,
            )
        )
    assert invoke(store, "rules", "list").output.splitlines() == [
        "1: if from contains 'news@': label News",
        "2 (off): Bills: if subject contains 'invoice': archive",
        "3: skipped, This rule is invalid: conditions.colour is not a rule condition or action.",
    ]
    assert invoke(store, "categories", "off", "social").exit_code == 0
    assert invoke(store, "categories", "list").output == (
        "primary: on\npromotions: on\nsocial: off\nupdates: on\nforums: on\n"
    )
