"""Search over sealed mail: the blind index finds it through JMAP, the web page, the CLI
and rules, exactly like clear mail for whole words, and keeps no clear word of it."""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any

import httpx
import pytest
from sqlalchemy import select, text

from mailroom.crypto import MasterKeyWrapper
from mailroom.crypto.datakeys import OwnerKeys
from mailroom.crypto.owner_rotation import Rotator, start_rotation
from mailroom.crypto.sealing import MailSealing
from mailroom.crypto.shredding import delete_owner
from mailroom.jmap import ids
from mailroom.jmap.auth import set_password
from mailroom.rules.engine import condition_clauses
from mailroom.rules.model import Conditions
from mailroom.store.engine import Store
from mailroom.store.models import Message
from mailroom.store.search import SearchDocument, index_documents
from mailroom.web.app import create_app
from tests.factories import make_message
from tests.helpers import ingest, make_account
from tests.jmap.conftest import serve

CLI = "import sys; from mailroom.cli.main import main; sys.argv[0] = 'mailroom'; main()"
PASSWORD = "correct horse battery staple"
# A word only the sealed message's body holds, past anything a preview would show.
SEALED_WORD = "quixotically"
CLEAR_WORD = "marmalade"
BOB_WORD = "zeppelins"
FILLER = "Nothing of note in this opening paragraph. " * 12


def _message(message_id: str, subject: str, body: str, minutes: int = 0) -> bytes:
    return make_message(message_id, subject=subject, body=body, minutes=minutes)


@pytest.fixture
def key() -> bytes:
    """The master key the store seals with (the CLI gets the same one from the environment)."""
    return os.urandom(32)


@pytest.fixture
def sealed(store: Store, key: bytes) -> Store:
    """The test store (both kinds) with a key; new mail stays clear until a test seals."""
    store.sealing = MailSealing(MasterKeyWrapper(key), seal_new_mail=False)
    return store


def seal_from_now(store: Store, on: bool = True) -> None:
    assert store.sealing is not None
    store.sealing = MailSealing(store.sealing.wrapper, seal_new_mail=on)


def _ids(store: Store, *headers: str) -> list[int]:
    with store.session() as session:
        return [
            int(
                session.execute(
                    text("SELECT id FROM messages WHERE message_id_header = :h"), {"h": header}
                ).scalar_one()
            )
            for header in headers
        ]


@pytest.fixture
def mixed(sealed: Store) -> dict[str, int]:
    """Alice with one clear and one sealed message about walruses, Bob with a sealed one."""
    alice = make_account(sealed, owner="alice")
    bob = make_account(sealed, owner="bob", name="bobs")
    clear = _message("clear@x", "Walrus minutes", f"{FILLER}The walrus likes {CLEAR_WORD}.\n")
    ingest(sealed, alice, [("c", clear)])
    seal_from_now(sealed)
    secret = _message(
        "sealed@x", "Walrus budget", f"{FILLER}The walrus spends {SEALED_WORD}.\n", minutes=5
    )
    ingest(sealed, alice, [("s", secret)])
    theirs = _message("bob@x", "Bob's walrus", f"Walrus {BOB_WORD} for Bob.\n", minutes=9)
    ingest(sealed, bob, [("b", theirs)])
    with sealed.session() as session:
        set_password(session, "alice", PASSWORD)
    clear_id, sealed_id, bob_id = _ids(sealed, "clear@x", "sealed@x", "bob@x")
    return {
        "alice": alice[0],
        "bob": bob[0],
        "clear": clear_id,
        "sealed": sealed_id,
        "bob_msg": bob_id,
    }


@pytest.fixture
def base(sealed: Store, mixed: dict[str, int]) -> Iterator[str]:
    """The whole application (pages and JMAP) on loopback, over the store with the mail."""
    yield from serve(create_app(sealed))


# -- what is stored --------------------------------------------------------------


def _clear_entry_count(store: Store, message_id: int) -> int:
    column = "rowid" if store.engine.dialect.name == "sqlite" else "message_id"
    with store.session() as session:
        return int(
            session.execute(
                text(f"SELECT count(*) FROM message_search WHERE {column} = :id"),
                {"id": message_id},
            ).scalar_one()
        )


def test_sealed_mail_has_no_clear_search_entry_only_hashed_tokens(
    sealed: Store, mixed: dict[str, int]
) -> None:
    assert _clear_entry_count(sealed, mixed["clear"]) == 1
    assert _clear_entry_count(sealed, mixed["sealed"]) == 0
    assert _clear_entry_count(sealed, mixed["bob_msg"]) == 0
    with sealed.session() as session:
        rows = session.execute(text("SELECT user_id, token, message_id FROM search_tokens")).all()
    by_message: dict[int, set[int]] = {}
    for user, token, message in rows:
        assert isinstance(token, int) and -(2**63) <= token < 2**63, token
        assert user == (mixed["bob"] if message == mixed["bob_msg"] else mixed["alice"])
        by_message.setdefault(message, set()).add(token)
    assert set(by_message) == {mixed["sealed"], mixed["bob_msg"]}  # clear mail has none
    # Both hold "walrus": each owner's hashes are their own.
    assert not by_message[mixed["sealed"]] & by_message[mixed["bob_msg"]]


def test_sqlite_blind_index_is_its_primary_key(sealed: Store) -> None:
    """WITHOUT ROWID: one B-tree fewer to write per token row (sealed ingest speed)."""
    if sealed.engine.dialect.name != "sqlite":
        pytest.skip("rowid tables are SQLite's")
    with sealed.engine.connect() as conn:
        sql = conn.exec_driver_sql(
            "SELECT sql FROM sqlite_master WHERE name = 'search_tokens'"
        ).scalar_one()
    assert "WITHOUT ROWID" in sql.upper()


def test_sqlite_file_holds_no_word_of_the_sealed_body(sealed: Store, mixed: dict[str, int]) -> None:
    if sealed.engine.dialect.name != "sqlite":
        pytest.skip("the file check is SQLite's; PostgreSQL's tables are checked above")
    with sealed.engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    path = Path(str(sealed.engine.url.database))
    stored = b"".join(
        Path(f"{path}{suffix}").read_bytes()
        for suffix in ("", "-wal")
        if Path(f"{path}{suffix}").exists()
    )
    assert CLEAR_WORD.encode() in stored  # the check can fail: clear mail's word is there
    assert SEALED_WORD.encode() not in stored


def test_reindexing_replaces_a_sealed_message_tokens(
    sealed: Store, mixed: dict[str, int], base: str
) -> None:
    seal_from_now(sealed)
    with sealed.session() as session:
        document = SearchDocument(mixed["sealed"], "Walrus budget", "", "only otters now")
        index_documents(session, [document], mixed["alice"])
    assert _jmap_ids(base, {"text": "otters"}) == [mixed["sealed"]]
    assert _jmap_ids(base, {"text": SEALED_WORD}) == []
    assert _clear_entry_count(sealed, mixed["sealed"]) == 0


# -- JMAP ------------------------------------------------------------------------


def _jmap_ids(base: str, condition: dict[str, Any], user: str = "alice") -> list[int]:
    """Email/query over real HTTP; the message ids of what it finds (newest first)."""
    with httpx.Client(auth=(user, PASSWORD), timeout=30) as http:
        session = http.get(f"{base}/.well-known/jmap").json()
        account = next(iter(session["accounts"]))
        request = {
            "using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
            "methodCalls": [
                [
                    "Email/query",
                    {
                        "accountId": account,
                        "filter": condition,
                        "sort": [{"property": "receivedAt", "isAscending": False}],
                    },
                    "q",
                ]
            ],
        }
        answer = http.post(session["apiUrl"], json=request)
        assert answer.status_code == 200, answer.text
        name, result, _ = answer.json()["methodResponses"][0]
        assert name == "Email/query", result
        found = [ids.parse_email(email_id) for email_id in result["ids"]]
        return [int(message_id) for message_id in found if message_id is not None]


def test_jmap_text_filter_finds_sealed_and_clear_mail(
    sealed: Store, mixed: dict[str, int], base: str
) -> None:
    both = [mixed["sealed"], mixed["clear"]]
    assert _jmap_ids(base, {"text": "walrus"}) == both
    assert _jmap_ids(base, {"text": "WALRUS"}) == both
    assert _jmap_ids(base, {"text": SEALED_WORD}) == [mixed["sealed"]]
    assert _jmap_ids(base, {"text": f"walrus {SEALED_WORD}"}) == [mixed["sealed"]]
    assert _jmap_ids(base, {"text": f"{CLEAR_WORD} {SEALED_WORD}"}) == []
    assert _jmap_ids(base, {"text": "budget"}) == [mixed["sealed"]]  # the subject
    assert _jmap_ids(base, {"text": "example"}) == both  # a participant's address part
    assert _jmap_ids(base, {"text": f'"walrus spends {SEALED_WORD}"'}) == [mixed["sealed"]]
    assert _jmap_ids(base, {"body": SEALED_WORD}) == [mixed["sealed"]]
    assert _jmap_ids(base, {"body": "budget"}) == []  # a subject word is not in the body
    assert _jmap_ids(base, {"subject": "budget"}) == [mixed["sealed"]]
    # Whole words only in sealed mail; clear mail still matches the last word as a prefix.
    assert _jmap_ids(base, {"text": "walr"}) == [mixed["clear"]]
    assert _jmap_ids(base, {"operator": "NOT", "conditions": [{"text": SEALED_WORD}]}) == [
        mixed["clear"]
    ]


def test_another_owner_query_never_matches(sealed: Store, mixed: dict[str, int], base: str) -> None:
    with sealed.session() as session:
        set_password(session, "bob", PASSWORD)
    assert _jmap_ids(base, {"text": "walrus"}, user="bob") == [mixed["bob_msg"]]
    assert _jmap_ids(base, {"text": BOB_WORD}, user="bob") == [mixed["bob_msg"]]
    assert _jmap_ids(base, {"text": SEALED_WORD}, user="bob") == []
    assert _jmap_ids(base, {"text": BOB_WORD}) == []
    assert _jmap_ids(base, {"text": "budget"}, user="bob") == []


# -- the web search page ---------------------------------------------------------


def _search_page(base: str, query: str) -> str:
    with httpx.Client(base_url=base, follow_redirects=False, timeout=30) as browser:
        form = browser.get("/signin")
        csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
        assert csrf is not None
        signed = browser.post(
            "/signin",
            data={"name": "alice", "password": PASSWORD, "csrf": csrf.group(1), "next": "/"},
        )
        assert signed.status_code in (302, 303), signed.text
        page = browser.get("/search", params={"q": query})
        assert page.status_code == 200, page.text
        return re.sub(r"<[^>]+>", "", page.text)  # the words, without highlight marks


def test_web_search_page_finds_sealed_mail(sealed: Store, mixed: dict[str, int], base: str) -> None:
    found = _search_page(base, SEALED_WORD)
    assert "Walrus budget" in found and "Walrus minutes" not in found
    both = _search_page(base, "walrus")
    assert "Walrus budget" in both and "Walrus minutes" in both
    assert "Bob&#39;s walrus" not in both and "Bob's walrus" not in both


# -- the CLI ---------------------------------------------------------------------


def _run_cli(store: Store, key: bytes | None, tmp_path: Path, *args: str) -> CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAILROOM_")}
    env["MAILROOM_DATA_DIR"] = str(tmp_path / "cli-data")
    if key is not None:
        env["MAILROOM_MASTER_KEY"] = base64.urlsafe_b64encode(key).decode()
    url = store.engine.url.render_as_string(hide_password=False)
    return subprocess.run(
        [sys.executable, "-c", CLI, "--database-url", url, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def _cli(store: Store, key: bytes, tmp_path: Path, *args: str) -> str:
    done = _run_cli(store, key, tmp_path, *args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _cli_search(store: Store, key: bytes, tmp_path: Path, query: str) -> str:
    return _cli(store, key, tmp_path, "search", query, "--owner", "alice", "--format", "jsonl")


def test_cli_search_finds_sealed_mail(
    sealed: Store, mixed: dict[str, int], key: bytes, tmp_path: Path
) -> None:
    found = _cli_search(sealed, key, tmp_path, SEALED_WORD)
    assert len(found.splitlines()) == 1 and "Walrus budget" in found
    both = _cli_search(sealed, key, tmp_path, "walrus")
    assert len(both.splitlines()) == 2 and "Bob" not in both


def test_cli_search_without_the_key_says_so(
    sealed: Store, mixed: dict[str, int], tmp_path: Path
) -> None:
    """Without the key a search does not quietly leave the sealed mail out: one sentence."""
    done = _run_cli(sealed, None, tmp_path, "search", "walrus", "--owner", "alice")
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "sealed, and no key to open it is configured" in done.stderr, done.stderr


def test_cli_show_opens_a_sealed_message(
    sealed: Store, mixed: dict[str, int], key: bytes, tmp_path: Path
) -> None:
    """`mailroom show` on either store prints the sealed body in clear, never ciphertext."""
    shown = _cli(sealed, key, tmp_path, "show", str(mixed["sealed"]), "--owner", "alice")
    assert f"The walrus spends {SEALED_WORD}." in shown
    assert "mrf1." not in shown


# -- rules and rotation ----------------------------------------------------------


def test_rule_text_condition_matches_sealed_mail(sealed: Store, mixed: dict[str, int]) -> None:

    with sealed.session() as session:
        clauses = condition_clauses(session, Conditions(text=SEALED_WORD), mixed["alice"])
        found = session.scalars(
            select(Message.id).where(Message.user_id == mixed["alice"], *clauses)
        ).all()
    assert list(found) == [mixed["sealed"]]


def test_owner_key_rotation_rehashes_tokens_and_search_keeps_working(
    sealed: Store, mixed: dict[str, int], base: str
) -> None:
    assert sealed.sealing is not None
    wrapper = sealed.sealing.wrapper
    with sealed.session() as session:
        rotation = start_rotation(session, OwnerKeys(session, wrapper), mixed["alice"])
        rotation_id = rotation.id
        before = set(
            session.execute(
                text("SELECT token FROM search_tokens WHERE message_id = :m"),
                {"m": mixed["sealed"]},
            ).scalars()
        )
    # Midway (both versions stored), the old tokens are still found.
    assert _jmap_ids(base, {"text": SEALED_WORD}) == [mixed["sealed"]]
    Rotator(sealed, wrapper, batch=1).run(rotation_id)
    with sealed.session() as session:
        after = set(
            session.execute(
                text("SELECT token FROM search_tokens WHERE message_id = :m"),
                {"m": mixed["sealed"]},
            ).scalars()
        )
        assert OwnerKeys(session, wrapper).versions(mixed["alice"]) == [2]
    assert after and not before & after
    assert _jmap_ids(base, {"text": SEALED_WORD}) == [mixed["sealed"]]
    assert _jmap_ids(base, {"text": "walrus"}) == [mixed["sealed"], mixed["clear"]]


def test_deleting_an_owner_removes_their_tokens_and_keeps_the_other_searchable(
    sealed: Store, mixed: dict[str, int], base: str
) -> None:
    delete_owner(sealed, "bob")
    with sealed.session() as session:
        owners = set(session.execute(text("SELECT DISTINCT user_id FROM search_tokens")).scalars())
    assert owners == {mixed["alice"]}
    assert _jmap_ids(base, {"text": SEALED_WORD}) == [mixed["sealed"]]
