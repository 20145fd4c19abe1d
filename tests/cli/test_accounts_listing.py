"""`mailroom accounts` reads plain SQL and shows what it showed when it asked each provider.

The expected table and JSON lines below are what the command printed before it read
through ``mailroom.reading`` (when it asked each provider's importer through the
registry), for the same accounts: local and IMAP accounts in every state.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from click.testing import CliRunner, Result

from mailroom.cli.main import cli
from mailroom.jobs.status import record_failure
from mailroom.owners import get_or_create_account, get_or_create_user
from mailroom.providers import facts, registry
from mailroom.providers.base import AuthError
from mailroom.providers.netguard import UnresolvableHostError, unreachable
from mailroom.store.engine import Store
from mailroom.store.models import Folder
from tests.factories import make_message
from tests.helpers import write_maildir

FINISHED = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def invoke(store: Store, *args: str) -> Result:
    """Run the CLI in-process against the test store (SQLite file or PostgreSQL)."""
    url = store.engine.url.render_as_string(hide_password=False)
    where = ["--data-dir", str(store.data_dir)] if store.data_dir else []
    return CliRunner().invoke(cli, [*where, "--database-url", url, *args], catch_exceptions=False)


def _imap(
    store: Store,
    owner: str,
    name: str,
    *,
    floors: tuple[int | None, ...] = (),
    done: int = 0,
    total: int = 0,
    finished: datetime | None = None,
    watch_state: str = "idle",
) -> int:
    """An IMAP account as the provider leaves it: folder marks (import floors) and counters."""
    with store.session() as session:
        user = get_or_create_user(session, owner)
        account = get_or_create_account(session, user, name, "imap")
        account.import_done, account.import_total = done, total
        account.import_finished_at, account.watch_state = finished, watch_state
        for index, floor in enumerate(floors):
            state = {} if floor is None else {"import_floor_uid": floor, "last_seen_uid": 200}
            session.add(
                Folder(
                    account_id=account.id,
                    path=f"F{index}",
                    uidvalidity=None if floor is None else 7,
                    state=state,
                )
            )
        session.flush()
        return account.id


def populate(store: Store, tmp_path: Path) -> None:
    """Local and IMAP accounts of two owners, one in each state an account can be in."""
    mail = write_maildir(tmp_path / "mail", {"1": make_message("a@x"), "2": make_message("b@x")})
    assert invoke(store, "import", str(mail), "--account", "files").exit_code == 0
    _imap(store, "me", "fresh")  # added, never synced
    _imap(store, "me", "halfway", floors=(1, 76, 1), done=45, total=120)
    _imap(store, "me", "new-folder", floors=(1, None), done=3, total=3)  # not contacted yet
    _imap(store, "me", "synced", floors=(1, 1), done=3, total=3, finished=FINISHED)
    _imap(store, "me", "watching", floors=(1,), finished=FINISHED, watch_state="watching")
    refused = _imap(store, "me", "refused")
    record_failure(store, refused, AuthError("LOGIN refused"))
    flaky = _imap(store, "me", "flaky", floors=(50,), done=9, total=60, watch_state="backoff:20000")
    record_failure(store, flaky, UnresolvableHostError(unreachable("imap.exmaple.org")))
    _imap(store, "me", "gone", floors=(9,), done=1, total=10)
    assert invoke(store, "account", "disconnect", "gone").exit_code == 0
    _imap(store, "ann", "work", floors=(1,), done=2, total=2, finished=FINISHED)


# What the command printed before (jsonl), for the accounts of ``populate``, by owner, name.
KEYS = ("owner", "name", "provider", "status", "status_reason", "watch_state", "reason")
KEYS += ("importing", "import_done", "import_total", "progress")
DNS = "cannot connect: name does not resolve"
BEFORE = [
    ("ann", "work", "imap", "active", None, "idle", "", False, 2, 2, "done"),
    ("me", "files", "local", "active", None, "idle", "", False, 0, 0, "done"),
    ("me", "flaky", "imap", "active", DNS, "backoff:20000", f"{DNS}; retrying in 20 s")
    + (True, 9, 60, "9/60 (15%)"),
    ("me", "fresh", "imap", "active", None, "idle", "", True, 0, 0, "not started"),
    ("me", "gone", "imap", "disconnected", "disconnected by the owner", "idle")
    + ("disconnected by the owner", False, 1, 10, "done"),
    ("me", "halfway", "imap", "active", None, "idle", "", True, 45, 120, "45/120 (38%)"),
    ("me", "new-folder", "imap", "active", None, "idle", "", True, 3, 3, "3/3 (100%)"),
    ("me", "refused", "imap", "auth_error", "LOGIN refused", "idle", "LOGIN refused")
    + (True, 0, 0, "not started"),
    ("me", "synced", "imap", "active", None, "idle", "", False, 3, 3, "done"),
    ("me", "watching", "imap", "active", None, "watching", "", False, 0, 0, "done"),
]
# And its table (each cell's wrapped lines joined): owner, account, provider, status, import,
# reason.
BEFORE_TABLE = [
    ("ann", "work", "imap", "active", "done", "-"),
    ("me", "files", "local", "active", "done", "-"),
    ("me", "flaky", "imap", "active", "9/60 (15%)", f"{DNS}; retrying in 20 s"),
    ("me", "fresh", "imap", "active", "not started", "-"),
    ("me", "gone", "imap", "disconnected", "done", "disconnected by the owner"),
    ("me", "halfway", "imap", "active", "45/120 (38%)", "-"),
    ("me", "new-folder", "imap", "active", "3/3 (100%)", "-"),
    ("me", "refused", "imap", "auth_error", "not started", "LOGIN refused"),
    ("me", "synced", "imap", "active", "done", "-"),
    ("me", "watching", "imap", "active, watching", "done", "-"),
]


def _jsonl(result: Result) -> list[dict[str, object]]:
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.output.splitlines()]


def _cells(table: str) -> list[dict[str, str]]:
    """The rows of a rich table by column name, a wrapped cell's lines joined by spaces."""
    lines = table.splitlines()
    names = [cell.strip() for cell in lines[1].split("┃")[1:-1]]
    rows: list[list[str]] = []
    for line in lines[3:-1]:
        cells = [cell.strip() for cell in line.split("│")[1:-1]]
        if cells[0]:
            rows.append(cells)
        else:  # the wrapped rest of the row above
            rows[-1] = [f"{old} {new}".strip() for old, new in zip(rows[-1], cells, strict=True)]
    return [dict(zip(names, row, strict=True)) for row in rows]


def test_jsonl_is_what_it_was_for_every_state(store: Store, tmp_path: Path) -> None:
    """Every key the command printed before, for every account, on both stores."""
    populate(store, tmp_path)
    rows = _jsonl(invoke(store, "accounts", "--format", "jsonl"))
    assert [tuple(row[key] for key in KEYS) for row in rows] == BEFORE


def test_the_table_is_what_it_was(store: Store, tmp_path: Path) -> None:
    """The table for people has the same cells and still fits 100 columns."""
    populate(store, tmp_path)
    result = invoke(store, "accounts")
    assert result.exit_code == 0
    assert max(len(line) for line in result.output.splitlines()) <= 100
    columns = ("owner", "account", "provider", "status", "import", "reason")
    cells = [tuple(row[name] for name in columns) for row in _cells(result.output)]
    assert cells == BEFORE_TABLE


def test_owner_narrows_and_an_unknown_owner_is_one_sentence(store: Store, tmp_path: Path) -> None:
    """--owner lists that user's accounts only; an unknown user gets the usual sentence."""
    populate(store, tmp_path)
    mine = _jsonl(invoke(store, "accounts", "--owner", "ann", "--format", "jsonl"))
    assert [row["name"] for row in mine] == ["work"]
    missing = invoke(store, "accounts", "--owner", "nobody")
    assert missing.exit_code == 1
    assert missing.output == (
        "mailroom: There is no user called 'nobody'; create it with `mailroom user add`.\n"
    )


def test_every_registered_provider_declares_its_facts() -> None:
    """The listing knows a provider from its declared facts; one left out would show "done"."""
    for name in registry.names():
        declared = facts.facts_of(name)
        assert declared is not None, f"{name} is not declared in mailroom.providers.facts"
        if declared.paged_import:
            assert registry.get(name).importer is not None
    assert facts.importing("imap", "active", None)
    assert not facts.importing("imap", "disconnected", None)
    assert not facts.importing("imap", "active", FINISHED)
    assert not facts.importing("local", "active", None)
    assert not facts.importing("undeclared", "active", None)
