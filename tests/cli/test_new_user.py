"""What a new user meets: a known store, readable output, one sentence per problem."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from mailroom.cli import inspect
from mailroom.cli.context import head_revision
from mailroom.cli.main import COMMANDS, cli
from mailroom.jobs.status import record_failure
from mailroom.owners import get_or_create_account, get_or_create_user
from mailroom.providers.netguard import BlockedHostError, UnresolvableHostError, unreachable
from mailroom.store.engine import Store
from mailroom.store.models import Account
from tests.factories import make_message
from tests.helpers import write_maildir

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("starlette", "uvicorn", "huey", "imapclient", "cryptography", "rich.progress", "alembic")


def _url(store: Store) -> str:
    return store.engine.url.render_as_string(hide_password=False)


def invoke(store: Store, *args: str) -> Result:
    """Run the CLI in-process against the test store (SQLite file or PostgreSQL)."""
    where = ["--data-dir", str(store.data_dir)] if store.data_dir else []
    return CliRunner().invoke(
        cli, [*where, "--database-url", _url(store), *args], catch_exceptions=False
    )


def run(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the CLI in a subprocess as a user would, in ``cwd``, without MAILROOM_* settings."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MAILROOM_")}
    return subprocess.run(
        [sys.executable, "-m", "mailroom", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**clean, "HOME": str(cwd), "XDG_DATA_HOME": str(cwd / "xdg"), **(env or {})},
        timeout=120,
    )


# A text part with 8-bit bytes and no charset: stored with a parse note ("repaired").
DAMAGED = (
    b"Message-ID: <damaged@x>\r\nFrom: Eve <eve@example.org>\r\nTo: me@example.org\r\n"
    b"Subject: Caf\xe9\r\nDate: Mon, 1 Jan 2024 10:00:00 +0000\r\n"
    b"Content-Type: text/plain\r\nContent-Transfer-Encoding: 8bit\r\n\r\ncaf\xe9 au lait\r\n"
)


def _mail(tmp_path: Path) -> Path:
    root = write_maildir(
        tmp_path / "mail",
        {
            "read": make_message("read@x", subject="Seen already", body="Old news.\n"),
            "damaged": DAMAGED,
        },
    )
    write_maildir(root, {"work": make_message("work@x", subject="Budget", minutes=5)}, ".Work")
    (root / "cur" / "damaged:2,S").rename(root / "cur" / "damaged:2,")  # unread
    return root


def test_read_commands_import_no_heavy_modules(tmp_path: Path) -> None:
    """list, search, show, explain, labels and rules list load no server, queue, IMAP or cipher."""
    data = tmp_path / "data"
    done = run("--data-dir", str(data), "import", str(_mail(tmp_path)), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    probe = (
        "import json, sys\n"
        "from mailroom.cli.main import main\n"
        "sys.argv = ['mailroom'] + json.loads(sys.argv[1])\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    assert not exc.code, exc.code\n"
        f"print(json.dumps([m for m in {list(HEAVY)!r} if m in sys.modules]))\n"
    )
    commands = [
        ["list", "--limit", "20"],
        ["search", "budget"],
        ["show", "1"],
        ["explain", "1"],
        ["labels"],
        ["rules", "list"],
    ]
    for command in commands:
        done = subprocess.run(
            [sys.executable, "-c", probe, json.dumps(["--data-dir", str(data), *command])],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, (command, done.stderr)
        assert json.loads(done.stdout.splitlines()[-1]) == [], command


def test_head_revision_is_alembics_head() -> None:
    """The migration head read from the files (so reads skip Alembic) is Alembic's own."""
    from alembic.script import ScriptDirectory

    from mailroom.store.migrate import alembic_config

    assert head_revision() == ScriptDirectory.from_config(alembic_config()).get_current_head()


def test_no_store_is_one_sentence_and_nothing_is_created(tmp_path: Path) -> None:
    """A read command where there is no store says so and what to do; it creates nothing."""
    for command in (["list"], ["show", "1"], ["accounts"], ["labels"], ["rules", "list"]):
        done = run(*command, cwd=tmp_path)
        assert done.returncode == 1, command
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
        assert "There is no mailroom store in" in done.stderr
        assert "mailroom import PATH" in done.stderr and "MAILROOM_DATA_DIR" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_dot_env_in_the_working_directory_names_the_store(tmp_path: Path) -> None:
    """MAILROOM_DATA_DIR in ./.env is the store of commands run there, without --data-dir."""
    data = tmp_path / "demo-store"
    assert (
        run("--data-dir", str(data), "import", str(_mail(tmp_path)), cwd=tmp_path).returncode == 0
    )
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / ".env").write_text(f"MAILROOM_DATA_DIR={data}\n")
    listed = run("list", "--format", "jsonl", cwd=checkout)
    assert listed.returncode == 0, listed.stderr
    assert len(listed.stdout.splitlines()) == 3


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_demo_env_writes_the_demo_store_into_dot_env(tmp_path: Path) -> None:
    """`make demo` (via demo-env) writes MAILROOM_DATA_DIR=<abs .mailroom-demo>, keeps others."""
    makefile = str(ROOT / "Makefile")
    (tmp_path / ".env").write_text("MAILROOM_REDIS_URL=redis://x")  # no newline at the end
    for _ in range(2):  # the second run keeps the setting
        done = subprocess.run(
            ["make", "-s", "-f", makefile, "demo-env"], cwd=tmp_path, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
    assert (tmp_path / ".env").read_text().splitlines() == [
        "MAILROOM_REDIS_URL=redis://x",
        f"MAILROOM_DATA_DIR={tmp_path / '.mailroom-demo'}",
    ]
    assert ".env" in (ROOT / ".gitignore").read_text().splitlines()


def test_show_is_readable_and_json_on_request(store: Store, tmp_path: Path) -> None:
    """show prints headers, parse notes and the body as text; --format json is for programs."""
    assert invoke(store, "import", str(_mail(tmp_path))).exit_code == 0
    rows = [
        json.loads(line) for line in invoke(store, "list", "--format", "jsonl").output.splitlines()
    ]
    damaged = next(row["id"] for row in rows if row["message_id"] == "damaged@x")
    shown = invoke(store, "show", str(damaged)).output
    lines = shown.splitlines()
    assert lines[0] == "From:     Eve <eve@example.org>"
    assert "Subject:  Café" in lines and any(line.startswith("Repaired: ") for line in lines)
    assert lines[-1] == "café au lait"
    assert not shown.lstrip().startswith("{")
    detail = json.loads(invoke(store, "show", str(damaged), "--format", "json").output)
    assert detail["parse_notes"] and detail["text"].strip() == "café au lait"


def test_list_filters_and_terminal_limit(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--label, --tab, --unread and --repaired narrow the list; a terminal gets 50, not all."""
    imported = invoke(store, "import", str(_mail(tmp_path)))
    assert "`mailroom list --repaired` lists them" in imported.output  # "1 repaired" explained

    def ids(*args: str) -> set[str]:
        out = invoke(store, "list", "--format", "jsonl", *args).output
        return {json.loads(line)["message_id"] for line in out.splitlines()}

    assert ids() == {"read@x", "damaged@x", "work@x"}
    assert ids("--label", "Work") == {"work@x"}
    assert ids("--label", "work") == {"work@x"}  # case does not matter when unambiguous
    assert ids("--unread") == {"damaged@x"}
    assert ids("--repaired") == {"damaged@x"}
    tab = json.loads(invoke(store, "list", "--format", "jsonl").output.splitlines()[0])["category"]
    assert ids("--tab", tab) and all(
        json.loads(line)["category"] == tab
        for line in invoke(store, "list", "--format", "jsonl", "--tab", tab).output.splitlines()
    )
    unknown = invoke(store, "list", "--label", "Nope")
    assert unknown.exit_code == 1 and "There is no label 'Nope'" in unknown.output
    monkeypatch.setattr(inspect, "TERMINAL_LIMIT", 2)
    monkeypatch.setattr(inspect, "on_terminal", lambda: True)
    table = invoke(store, "list").output
    assert "The newest 2 of 3; --limit N shows more." in table


def test_rules_list_says_each_description_once(store: Store) -> None:
    """An unnamed rule is listed by its description once; a named one by name and description."""
    assert invoke(store, "rules", "add", "--from", "lug", "--label", "Lists").exit_code == 0
    assert (
        invoke(store, "rules", "add", "--name", "mine", "--subject", "hi", "--star").exit_code == 0
    )
    lines = invoke(store, "rules", "list").output.splitlines()
    assert lines[0] == "1: if from contains 'lug': label Lists"
    assert lines[1] == "2: mine: if subject contains 'hi': star"


def test_accounts_table_shows_status_reason_and_fits_100_columns(store: Store) -> None:
    """Each account gets a status, a reason in words (with the retry) and 'not started'."""
    with store.session() as session:
        user = get_or_create_user(session)
        blocked = get_or_create_account(session, user, "intranet", "imap").id
        dns = get_or_create_account(session, user, "typo", "imap").id
        get_or_create_account(session, user, "fine", "imap")
    record_failure(store, blocked, BlockedHostError(unreachable("10.1.2.3")))
    record_failure(store, dns, UnresolvableHostError(unreachable("imap.exmaple.org")))
    with store.session() as session:
        account = session.get(Account, dns)
        assert account is not None
        account.watch_state = "backoff:20000"
    out = invoke(store, "accounts").output
    assert max(len(line) for line in out.splitlines()) <= 100
    assert "backoff:" not in out and "starting" not in out
    flat = " ".join(" ".join(part.strip() for part in line.split("│")) for line in out.splitlines())
    assert "auth_error" in flat and "private address" in flat
    assert "cannot connect: name does not resolve; retrying in 20 s" in " ".join(flat.split())
    assert flat.count("not started") == 3
    rows = [
        json.loads(line)
        for line in invoke(store, "accounts", "--format", "jsonl").output.split("\n")
        if line
    ]
    assert {row["name"]: row["progress"] for row in rows}["fine"] == "not started"


def test_blocked_host_is_said_once_by_sync(tmp_path: Path) -> None:
    """sync of a blocked host prints one line with the real reason (no operator-log copy)."""
    env = {"MAILROOM_MASTER_KEY": "A" * 43 + "=", "MAILROOM_DATA_DIR": str(tmp_path / "d")}
    (tmp_path / "pw").write_text("secret\n")
    added = run(
        *("account", "add", "imap", "--name", "lan", "--host", "127.0.0.1", "--login", "u"),
        *("--password-file", str(tmp_path / "pw")),
        cwd=tmp_path,
        env=env,
    )
    assert added.returncode == 0, added.stderr
    synced = run("sync", "lan", cwd=tmp_path, env=env)
    assert synced.returncode == 1
    assert synced.stderr.splitlines() == [
        "mailroom: lan: host cannot be used: not allowed (private address); ask the operator to "
        "allow-list it in MAILROOM_ALLOWED_PRIVATE_HOSTS"
    ]


def test_every_command_module_imports_first_in_a_fresh_process(tmp_path: Path) -> None:
    """Each command's module loads on its own (no import cycle that only a lucky order hides)."""
    modules = sorted({target.split(":")[0] for target in COMMANDS.values()})
    for module in modules:
        done = subprocess.run(
            [sys.executable, "-c", f"import {module}"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, (module, done.stderr)
    listed = run("--help", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert all(name in listed.stdout for name in COMMANDS)


def test_a_data_dir_with_url_characters_works(tmp_path: Path) -> None:
    """A data dir whose path holds '#', '?', '%' and a space is a store like any other."""
    data = tmp_path / "mail #1?x %41 y"
    added = run(
        "--data-dir", str(data), "import", str(_mail(tmp_path)), "--account", "a", cwd=tmp_path
    )
    assert added.returncode == 0, added.stderr
    assert (data / "mailroom.sqlite3").is_file()
    listed = run("--data-dir", str(data), "list", "--label", "Work", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "Budget" in listed.stdout
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("mail ")] == [data.name]
