"""Read commands on the embedded store start without SQLAlchemy, and still migrate first."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import click
import pytest

from mailroom.cli.lazy import source_help
from mailroom.cli.main import COMMANDS, cli
from tests.factories import make_message
from tests.helpers import write_maildir

# Runs the CLI, then says on stderr which heavy libraries the process had loaded.
PROBE = """
import atexit, sys
HEAVY = ("sqlalchemy", "pydantic", "pydantic_settings", "alembic", "rich", "mailroom.store.engine",
         "mailroom.providers.registry", "mailroom.providers.imap", "mailroom.providers.local")
atexit.register(lambda: print("LOADED=" + ",".join(m for m in HEAVY if m in sys.modules),
                              file=sys.stderr))
from mailroom.cli.main import main
sys.argv = ["mailroom", *sys.argv[1:]]
main()
"""


def run(data_dir: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MAILROOM_DATA_DIR": str(data_dir), "MAILROOM_MASTER_KEY": "A" * 43 + "="}
    return subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        capture_output=True,
        text=True,
        env=env,
        input=stdin,
        timeout=120,
    )


def loaded(done: subprocess.CompletedProcess[str]) -> set[str]:
    line = next(line for line in done.stderr.splitlines() if line.startswith("LOADED="))
    return {name for name in line.removeprefix("LOADED=").split(",") if name}


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    messages = {
        "1": make_message("one@x", subject="Walrus news", body="The walrus swims."),
        "2": make_message("two@x", subject="Re: Walrus news", in_reply_to="one@x"),
    }
    root = write_maildir(tmp_path / "mail", messages)
    done = run(tmp_path / "data", "import", str(root))
    assert done.returncode == 0, done.stderr
    return tmp_path / "data"


def test_list_show_search_load_neither_sqlalchemy_nor_pydantic(data_dir: Path) -> None:
    listed = run(data_dir, "list", "--format", "jsonl")
    assert listed.returncode == 0, listed.stderr
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [row["subject"] for row in rows] == ["Re: Walrus news", "Walrus news"]
    assert rows[0]["thread_id"] == rows[1]["thread_id"] and rows[0]["labels"] == ["Inbox"]
    assert loaded(listed) == set()

    shown = run(data_dir, "show", str(rows[1]["id"]), "--format", "json")
    assert json.loads(shown.stdout)["text"].strip() == "The walrus swims."
    assert loaded(shown) == set()

    found = run(data_dir, "search", "walrus", "--format", "jsonl")
    assert len(found.stdout.splitlines()) == 2
    assert loaded(found) == set()

    missing = run(data_dir, "show", "999")
    assert missing.returncode == 1
    assert "There is no message 999; `mailroom list` shows the ids." in missing.stderr
    assert "Traceback" not in missing.stderr

    table = run(data_dir, "list")  # the table for people is drawn without rich (cli/table.py)
    assert "Walrus news" in table.stdout and loaded(table) == set()


def test_accounts_loads_neither_sqlalchemy_nor_a_provider(data_dir: Path) -> None:
    """`accounts` reads the account rows only: no provider is asked, for local or IMAP."""
    added = run(
        data_dir,
        *("account", "add", "imap", "--name", "work", "--host", "imap.example.org"),
        *("--login", "me", "--password-stdin"),
        stdin="secret\n",
    )
    assert added.returncode == 0, added.stderr
    listed = run(data_dir, "accounts", "--format", "jsonl")
    assert listed.returncode == 0, listed.stderr
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [(row["provider"], row["progress"]) for row in rows] == [
        ("local", "done"),
        ("imap", "not started"),
    ]
    assert loaded(listed) == set()
    table = run(data_dir, "accounts")
    assert "not started" in table.stdout and loaded(table) == set()


def test_explain_rules_categories_tokens_and_failed_load_no_heavy_module(data_dir: Path) -> None:
    """The other read commands read with plain SQL too: no SQLAlchemy, ORM or provider.

    `rules list` validates each stored rule again (one that no longer validates is
    listed with its problem), and without pydantic.
    """
    for change in (
        ("rules", "add", "--subject", "walrus", "--label", "Walruses"),
        ("token", "create", "me", "--name", "laptop"),
        ("categories", "off", "social"),
    ):
        done = run(data_dir, *change)
        assert done.returncode == 0, done.stderr
    listed = [
        json.loads(line) for line in run(data_dir, "list", "--format", "jsonl").stdout.splitlines()
    ]

    explained = run(data_dir, "explain", str(listed[1]["id"]))
    assert explained.returncode == 0, explained.stderr
    assert explained.stdout.splitlines()[0] == "Primary: decided by default."
    assert loaded(explained) == set()
    missing = run(data_dir, "explain", "999")
    assert missing.returncode == 1 and "There is no message 999" in missing.stderr
    assert loaded(missing) == set()

    with sqlite3.connect(data_dir / "mailroom.sqlite3") as db:  # a rule that no longer validates
        db.execute(
            "INSERT INTO rules (user_id, name, conditions, actions, position, enabled, created_at) "
            "VALUES (1, 'old', '{\"colour\": \"red\"}', '[]', 2, 1, '2026-12-01')"
        )
    rules = run(data_dir, "rules", "list")
    assert rules.stdout == (
        "1: if subject contains 'walrus': label Walruses\n"
        "2: skipped, This rule is invalid: conditions.colour is not a rule condition or action.\n"
    )
    assert loaded(rules) == set()

    tabs = run(data_dir, "categories", "list")
    assert "social: off\n" in tabs.stdout and "primary: on\n" in tabs.stdout
    assert loaded(tabs) == set()

    tokens = run(data_dir, "token", "list", "me")
    assert tokens.stdout.splitlines()[1].split()[:2] == ["1", "laptop"]
    assert loaded(tokens) == set()

    failed = run(data_dir, "outbound", "failed", "--json")
    assert failed.returncode == 0 and failed.stdout == ""
    assert loaded(failed) == set()

    held = run(data_dir, "assistant", "stats", "--owner", "me", "--format", "json")
    assert held.returncode == 0, held.stderr
    assert json.loads(held.stdout)["released"] == 0 and loaded(held) == set()

    audited = run(data_dir, "audit", "--since", "1d", "--format", "jsonl")
    assert audited.returncode == 0, audited.stderr
    assert "token.create" in [json.loads(line)["action"] for line in audited.stdout.splitlines()]
    assert loaded(audited) == set()


def test_a_store_behind_the_schema_is_migrated_before_it_is_read(data_dir: Path) -> None:
    from alembic import command

    from mailroom.store.engine import open_store
    from mailroom.store.migrate import alembic_config

    store = open_store(f"sqlite:///{data_dir / 'mailroom.sqlite3'}", data_dir)
    command.downgrade(alembic_config(store), "-1")
    store.dispose()

    listed = run(data_dir, "list", "--format", "jsonl")
    assert listed.returncode == 0, listed.stderr
    assert len(listed.stdout.splitlines()) == 2
    assert "alembic" in loaded(listed)  # the full path ran and migrated
    again = run(data_dir, "list", "--format", "jsonl")
    assert again.stdout == listed.stdout and loaded(again) == set()


def test_no_store_is_the_usual_sentence(tmp_path: Path) -> None:
    done = run(tmp_path / "empty", "list")
    assert done.returncode == 1
    assert "There is no mailroom store in" in done.stderr and "Traceback" not in done.stderr


def test_help_lists_every_command_without_importing_them(tmp_path: Path) -> None:
    """`mailroom --help` lists every command with its summary, read from the sources."""
    done = run(tmp_path / "none", "--help")
    assert done.returncode == 0, done.stderr
    assert loaded(done) == set()
    listed = done.stdout.split("Commands:\n", 1)[1]
    assert {line.split()[0] for line in listed.splitlines() if line.strip()} == set(COMMANDS)


def test_help_summaries_read_from_the_source_are_the_commands_own() -> None:
    """The summary --help takes from a command's source is the one the command gives."""
    ctx = click.Context(cli)
    from_source = 0
    for name, target in COMMANDS.items():
        text = source_help(target)
        real = cli.get_command(ctx, name)
        assert real is not None
        if text is None:
            continue  # imported for --help, as its help is not a docstring
        from_source += 1
        stand_in = click.Command(name, help=text)
        for limit in (30, 45, 200):
            assert stand_in.get_short_help_str(limit) == real.get_short_help_str(limit), name
    assert from_source > len(COMMANDS) / 2


def test_webhooks_outbound_stats_and_gmail_skipped_load_no_heavy_module(data_dir: Path) -> None:
    """The operator's other lists read with plain SQL too: no SQLAlchemy, ORM or provider."""
    with sqlite3.connect(data_dir / "mailroom.sqlite3") as db:
        db.execute(
            "INSERT INTO webhook_endpoints (user_id, url, events, active, created_at) "
            "VALUES (1, 'https://hooks.example.org/in', '[\"messageNew\"]', 1, '2026-12-01')"
        )
        db.execute(
            "INSERT INTO webhook_deliveries (endpoint_id, event_id, event_type, body, state, "
            "attempts, next_attempt_at, last_code, last_error, created_at) VALUES (1, 'e1', "
            "'messageNew', '{}', 'dead', 10, '2026-12-01', 503, 'busy', '2026-12-01')"
        )
    endpoints = run(data_dir, "webhooks", "list", "--owner", "me")
    assert endpoints.stdout == "1  me  https://hooks.example.org/in  (messageNew; active)\n"
    dead = run(data_dir, "webhooks", "dead", "--json")
    assert json.loads(dead.stdout)["lastError"] == "busy"
    stats = run(data_dir, "outbound", "stats", "--json")
    assert json.loads(stats.stdout)["direct"] == dict.fromkeys(
        ("queued", "deferred", "sending", "sent", "failed"), 0
    )
    skipped = run(data_dir, "gmail", "skipped")
    assert skipped.stdout == "'me' has no Gmail accounts.\n"
    lanes = run(data_dir, "outbound", "stats")  # tables are drawn without rich
    assert lanes.stdout.splitlines()[1].split("┃")[1:3] == [" lane   ", " queued "]
    labels = run(data_dir, "labels")
    assert "│ Inbox " in labels.stdout
    for done in (endpoints, dead, stats, skipped, lanes, labels):
        assert done.returncode == 0, done.stderr
        assert loaded(done) == set()
