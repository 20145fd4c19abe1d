"""Search over sealed mail: the blind index finds it through JMAP, the web page, the CLI
and rules, like clear mail (the last word also as a prefix, through the owner's sealed word
list), and keeps no clear word of it."""

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
from alembic import command
from sqlalchemy import func, inspect, select, text

from mailroom.crypto import MasterKeyWrapper
from mailroom.crypto.blind_index import BODY_KIND, HEADER_KIND, token_keys, token_word
from mailroom.crypto.blind_vocabulary import MERGE_FROM, completions, record_words
from mailroom.crypto.datakeys import OwnerKeys
from mailroom.crypto.owner_rotation import Rotator, start_rotation
from mailroom.crypto.sealing import MailSealing, require_cipher
from mailroom.crypto.shredding import delete_owner
from mailroom.ingest.batch import store_batch
from mailroom.ingest.model import IncomingMessage
from mailroom.jmap import ids
from mailroom.jmap.auth import set_password
from mailroom.mime.pool import parse_all
from mailroom.reading import search_ids
from mailroom.rules.engine import condition_clauses
from mailroom.rules.model import Conditions
from mailroom.store.engine import Store
from mailroom.store.migrate import alembic_config
from mailroom.store.models import BlindVocabulary, Message
from mailroom.store.reader import SessionReader
from mailroom.store.search import TOKEN_MARK, SearchDocument, index_documents
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


def _ids(store: Store) -> list[int]:
    """The messages' ids in the order they were stored (a sealed Message-ID is a keyed hash)."""
    with store.session() as session:
        return [int(i) for i in session.scalars(text("SELECT id FROM messages ORDER BY id"))]


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
    clear_id, sealed_id, bob_id = _ids(sealed)
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


def entry_words(store: Store, message_id: int) -> list[str]:
    """The words of a message's ``message_search`` entry (as stored, in order)."""
    with store.session() as session:
        if store.engine.dialect.name == "sqlite":
            row = session.execute(
                text("SELECT subject, participants, body FROM message_search WHERE rowid = :id"),
                {"id": message_id},
            ).one_or_none()
            return " ".join(row).split() if row is not None else []
        found = session.execute(
            text("SELECT tsvector_to_array(document) FROM message_search WHERE message_id = :id"),
            {"id": message_id},
        ).scalar_one_or_none()
        return list(found or [])


def token_words(store: Store, message_id: int) -> set[str]:
    """The blind index's token words in a message's entry."""
    return {word for word in entry_words(store, message_id) if word.startswith(TOKEN_MARK)}


def test_sealed_mail_has_no_clear_search_entry_only_token_words(
    sealed: Store, mixed: dict[str, int]
) -> None:
    clear = entry_words(sealed, mixed["clear"])
    assert "walrus" in clear and not token_words(sealed, mixed["clear"])
    by_message = {}
    for message in (mixed["sealed"], mixed["bob_msg"]):
        words = entry_words(sealed, message)
        assert words and set(words) == token_words(sealed, message)  # no clear word at all
        assert all(re.fullmatch("\ue000[0-9a-f]{16}", word) for word in words), words
        assert len(words) == len(set(words))  # each once: no frequency
        by_message[message] = set(words)
    # Both hold "walrus": each owner's token words are their own.
    assert not by_message[mixed["sealed"]] & by_message[mixed["bob_msg"]]


def test_sqlite_sealed_entry_is_sorted_token_words_per_part(
    sealed: Store, mixed: dict[str, int]
) -> None:
    """Subject and participants' token words in one column, the body's in another, sorted."""
    if sealed.engine.dialect.name != "sqlite":
        pytest.skip("FTS5 columns are SQLite's (PostgreSQL's tsvector has no positions)")
    with sealed.session() as session:
        subject, participants, body = session.execute(
            text("SELECT subject, participants, body FROM message_search WHERE rowid = :id"),
            {"id": mixed["sealed"]},
        ).one()
    assert participants == ""
    for column in (subject, body):
        words = column.split()
        assert words and words == sorted(set(words))
    assert not set(subject.split()) & set(body.split())  # "walrus" is in both, hashed apart


def test_the_old_blind_index_table_is_gone(sealed: Store) -> None:
    with sealed.engine.connect() as conn:
        assert "search_tokens" not in inspect(conn).get_table_names()


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
    words = entry_words(sealed, mixed["sealed"])
    assert len(words) == 5 and set(words) == token_words(sealed, mixed["sealed"])
    # Indexed in clear again (sealing off), the entry holds the words and no token word.
    seal_from_now(sealed, on=False)
    with sealed.session() as session:
        index_documents(session, [document], mixed["alice"])
    assert sorted(word.casefold() for word in entry_words(sealed, mixed["sealed"])) == [
        "budget",
        "now",
        "only",
        "otters",
        "walrus",
    ]
    assert _jmap_ids(base, {"text": "otters"}) == [mixed["sealed"]]


def test_an_entry_made_by_a_parse_worker_is_the_writers(sealed: Store) -> None:
    """A sealing import makes the blind index entries in its parse workers
    (``ParsedMessage.blind_entry``, from the owner's token keys): the stored entry is
    the one the writer would have made. One made under a key version that is no
    longer current (a rotation started meanwhile) is made again by the writer."""
    user_id, account_id, inbox = make_account(sealed, owner="alice")
    seal_from_now(sealed)
    body = f"{FILLER}Crème brûlée, Ünïcode, naïve café; 日本語 and ann@example.com wrote it.\n"
    raws = [
        _message(f"{which}@x", "Ré: Walrus budget été", body, minutes=n)
        for n, which in enumerate(("writer", "worker", "stale"))
    ]
    with sealed.session() as session:
        keys = token_keys(require_cipher(session, "test"), user_id)
    made = parse_all([(raws[1], None)], keys)[0]
    assert made.blind_entry is not None and made.blind_entry[0] == keys.version
    assert parse_all([(raws[1], None)])[0].blind_entry is None
    stale = parse_all([(raws[2], None)], keys)[0]
    stale.blind_entry = (keys.version + 1, "\ue000" + "0" * 16, "")  # no such version yet
    with sealed.session() as session:
        store_batch(
            session,
            account_id,
            user_id,
            [
                IncomingMessage("a", raws[0], label_ids=[inbox]),
                IncomingMessage("b", raws[1], label_ids=[inbox], parsed=made),
                IncomingMessage("c", raws[2], label_ids=[inbox], parsed=stale),
            ],
        )
    by_writer, by_worker, remade = _ids(sealed)
    assert len(token_words(sealed, by_writer)) > 20
    assert entry_words(sealed, by_worker) == entry_words(sealed, by_writer)
    assert entry_words(sealed, remade) == entry_words(sealed, by_writer)


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
    # The last unquoted word matches as a prefix in sealed mail too (its owner's word list).
    assert _jmap_ids(base, {"text": "walr"}) == both
    assert _jmap_ids(base, {"operator": "NOT", "conditions": [{"text": SEALED_WORD}]}) == [
        mixed["clear"]
    ]


def test_the_last_word_matches_sealed_mail_as_a_prefix(
    sealed: Store, mixed: dict[str, int], base: str
) -> None:
    """As clear mail's index does: through the owner's sealed word list, whole words elsewhere."""
    both = [mixed["sealed"], mixed["clear"]]
    assert _jmap_ids(base, {"text": SEALED_WORD[:6]}) == [mixed["sealed"]]
    assert _jmap_ids(base, {"text": f"walrus {SEALED_WORD[:4]}"}) == [mixed["sealed"]]
    assert _jmap_ids(base, {"text": "Budg"}) == [mixed["sealed"]]  # a subject word, any case
    assert _jmap_ids(base, {"body": SEALED_WORD[:5]}) == [mixed["sealed"]]
    assert _jmap_ids(base, {"body": "budg"}) == []  # the body's words only
    assert _jmap_ids(base, {"text": f"{SEALED_WORD[:6]} walrus"}) == []  # not the last word
    assert _jmap_ids(base, {"text": f'"{SEALED_WORD[:6]}"'}) == []  # quoted: the word itself
    assert _jmap_ids(base, {"text": "walrus"}) == both
    assert _jmap_ids(base, {"text": BOB_WORD[:5]}) == []  # another owner's word
    with sealed.session() as session:
        clauses = condition_clauses(session, Conditions(text=SEALED_WORD[:5]), mixed["alice"])
        found = session.scalars(
            select(Message.id).where(Message.user_id == mixed["alice"], *clauses)
        ).all()
    assert list(found) == [mixed["sealed"]]


def test_the_word_list_is_sealed_and_merged(sealed: Store, mixed: dict[str, int]) -> None:
    """Only sealed rows; many batches' rows are merged, and every word is still found."""
    alice = mixed["alice"]
    with sealed.session() as session:
        rows = session.execute(
            select(BlindVocabulary.words, BlindVocabulary.word_count).where(
                BlindVocabulary.user_id == alice
            )
        ).all()
        assert rows and all(count > 0 for _, count in rows)
        assert not any(SEALED_WORD.encode() in words or b"walrus" in words for words, _ in rows)
        assert completions(session, alice, "quix") == [SEALED_WORD]
        record_words(session, alice, ["quixote", "quiz"])  # a row added to an opened list
        assert completions(session, alice, "qui") == ["quixote", SEALED_WORD, "quiz"]
        many = [f"yak{n:04d}" for n in range(1_500)]  # more than are put in place one by one
        record_words(session, alice, many)
        assert completions(session, alice, "yak", limit=2_000) == many
        assert completions(session, alice, "quix") == ["quixote", SEALED_WORD]
        for batch in range(MERGE_FROM + 5):
            record_words(session, alice, [f"zebra{batch:03d}", "zebu"])
        kept = session.scalar(
            select(func.count())
            .select_from(BlindVocabulary)
            .where(BlindVocabulary.user_id == alice)
        )
        assert kept is not None and kept <= MERGE_FROM
        found = completions(session, alice, "zeb")
        assert found == sorted([f"zebra{n:03d}" for n in range(MERGE_FROM + 5)] + ["zebu"])
        assert completions(session, alice, "zeb", limit=3) == found[:3]
        assert completions(session, alice, SEALED_WORD) == []  # the word itself is no completion
        assert completions(session, mixed["bob"], "quix") == []


def test_words_of_a_rolled_back_batch_reach_the_word_list_when_it_is_stored_again(
    sealed: Store, mixed: dict[str, int]
) -> None:
    """The writer forgets which words it reported when their batch rolls back."""
    alice = mixed["alice"]
    raw = _message("again@x", "Walrus notes", "The walrus was flabbergasted.\n", minutes=20)
    account = make_account(sealed, owner="alice")
    with pytest.raises(RuntimeError), sealed.session() as session:
        items = [IncomingMessage("again", raw, label_ids=[account[2]])]
        store_batch(session, account[1], alice, items)
        raise RuntimeError("the batch fails after its entries were made")
    with sealed.session() as session:
        assert completions(session, alice, "flabber") == []
    ingest(sealed, account, [("again", raw)])
    with sealed.session() as session:
        assert completions(session, alice, "flabber") == ["flabbergasted"]


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
    before = token_words(sealed, mixed["sealed"])
    # Midway (both versions stored), the old tokens are still found.
    assert _jmap_ids(base, {"text": SEALED_WORD}) == [mixed["sealed"]]
    Rotator(sealed, wrapper, batch=1).run(rotation_id)
    after = token_words(sealed, mixed["sealed"])
    with sealed.session() as session:
        assert OwnerKeys(session, wrapper).versions(mixed["alice"]) == [2]
    assert after and not before & after and len(after) == len(before)
    assert _jmap_ids(base, {"text": SEALED_WORD}) == [mixed["sealed"]]
    assert _jmap_ids(base, {"text": "walrus"}) == [mixed["sealed"], mixed["clear"]]
    assert _jmap_ids(base, {"text": SEALED_WORD[:6]}) == [mixed["sealed"]]  # word list re-sealed


def test_deleting_an_owner_removes_their_token_words_and_keeps_the_other_searchable(
    sealed: Store, mixed: dict[str, int], base: str
) -> None:
    bob_words = token_words(sealed, mixed["bob_msg"])
    assert bob_words
    delete_owner(sealed, "bob")
    assert entry_words(sealed, mixed["bob_msg"]) == []
    with sealed.session() as session:
        assert not session.scalars(
            select(BlindVocabulary.id).where(BlindVocabulary.user_id == mixed["bob"])
        ).all()
    with sealed.session() as session:
        column = "rowid" if sealed.engine.dialect.name == "sqlite" else "message_id"
        left = set(session.execute(text(f"SELECT {column} FROM message_search")).scalars())
    assert left == {mixed["clear"], mixed["sealed"]}
    if sealed.engine.dialect.name == "sqlite":  # and the merged FTS5 index has none of its words
        with sealed.engine.connect() as conn:
            conn.exec_driver_sql(
                "CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, message_search, 'row')"
            )
            terms = {row[0] for row in conn.exec_driver_sql("SELECT term FROM temp.vocab")}
        assert terms and not terms & bob_words
    assert _jmap_ids(base, {"text": SEALED_WORD}) == [mixed["sealed"]]


# -- token words against clear words ---------------------------------------------


def _alice_token_word(store: Store, owner: int, word: str, kind: str = BODY_KIND) -> str:
    with store.session() as session:
        cipher = require_cipher(session, "test")
        return token_word(bytes.fromhex(cipher.lookup_hash(owner, kind, word)))


def _clear_only(store: Store, owner: int, query: str) -> list[int]:
    """What the clear full-text match alone finds (no blind terms)."""
    with store.session() as session:
        return search_ids(SessionReader(session), owner, query)


def test_token_words_and_clear_words_never_meet(
    sealed: Store, mixed: dict[str, int], base: str
) -> None:
    """A clear message holding a token word, written out, is not found by the hashed query;
    no clear query, not even a prefix of one letter, reaches a token word."""
    alice = mixed["alice"]
    word = _alice_token_word(sealed, alice, SEALED_WORD)
    assert word in token_words(sealed, mixed["sealed"])  # the test can fail: it is there
    hex_part = word[1:]
    seal_from_now(sealed, on=False)
    planted = _message(
        "planted@x", "Planted", f"Look: {word} and {hex_part} and x{word}y.\n", minutes=20
    )
    ingest(sealed, make_account(sealed, owner="alice"), [("p", planted)])
    (planted_id,) = [i for i in _ids(sealed) if i not in mixed.values()]
    # The clear entry keeps no word that starts with the mark.
    assert not token_words(sealed, planted_id)
    assert _jmap_ids(base, {"text": SEALED_WORD}) == [mixed["sealed"]]
    assert _jmap_ids(base, {"body": SEALED_WORD}) == [mixed["sealed"]]
    # The hex digits are a clear word of the planted message only, whole or as a prefix.
    assert _jmap_ids(base, {"text": hex_part}) == [planted_id]
    assert _clear_only(sealed, alice, hex_part[:3]) == [planted_id]
    for letter in "0123456789abcdef":  # the first character of every token word's hex
        assert mixed["sealed"] not in _clear_only(sealed, alice, letter), letter
    if sealed.engine.dialect.name == "sqlite":  # every marked term belongs to sealed mail
        with sealed.engine.connect() as conn:
            conn.exec_driver_sql(
                "CREATE VIRTUAL TABLE temp.inst USING fts5vocab(main, message_search, 'instance')"
            )
            docs = {
                row[0]
                for row in conn.exec_driver_sql(
                    "SELECT DISTINCT doc FROM temp.inst "
                    "WHERE term >= char(57344) AND term < char(57345)"
                )
            }
        assert docs == {mixed["sealed"], mixed["bob_msg"]}


def test_body_filter_asks_for_body_token_words_only(
    sealed: Store, mixed: dict[str, int], base: str
) -> None:
    """A header word hashed as a body word is not in the entry, and the other way round."""
    alice = mixed["alice"]
    words = token_words(sealed, mixed["sealed"])
    assert _alice_token_word(sealed, alice, "budget", HEADER_KIND) in words
    assert _alice_token_word(sealed, alice, "budget", BODY_KIND) not in words
    assert _alice_token_word(sealed, alice, SEALED_WORD, HEADER_KIND) not in words
    assert _jmap_ids(base, {"body": "walrus"}) == [mixed["sealed"], mixed["clear"]]
    assert _jmap_ids(base, {"body": "budget"}) == []
    assert _jmap_ids(base, {"text": "budget"}) == [mixed["sealed"]]
    assert _jmap_ids(base, {"text": f"budget {SEALED_WORD}"}) == [mixed["sealed"]]
    assert _jmap_ids(base, {"body": f"walrus {SEALED_WORD}"}) == [mixed["sealed"]]


# -- migration 0023: search_tokens rows into the full-text index --------------------


def _old_token(store: Store, owner: int, kind: str, word: str) -> int:
    """A token as the blind index before 0023 wrote it: the hash's first 8 bytes, signed."""
    with store.session() as session:
        digest = require_cipher(session, "test").lookup_hash(owner, kind, word)
    return int.from_bytes(bytes.fromhex(digest)[:8], "big", signed=True)


def test_migration_0023_moves_search_token_rows_into_the_index(
    sealed: Store, mixed: dict[str, int], base: str
) -> None:
    config = alembic_config(sealed)
    alice, sealed_id = mixed["alice"], mixed["sealed"]
    before = {m: token_words(sealed, m) for m in (sealed_id, mixed["bob_msg"])}
    command.downgrade(config, "0022")
    try:
        # As the old blind index stored them: one row per word, no entry in message_search.
        with sealed.session() as session:
            rows = session.execute(
                text("SELECT user_id, token, message_id FROM search_tokens")
            ).all()
        assert {(int(u), int(m)) for u, _t, m in rows} == {
            (alice, sealed_id),
            (mixed["bob"], mixed["bob_msg"]),
        }
        alice_tokens = {int(t) for u, t, m in rows if m == sealed_id}
        assert len(alice_tokens) == len(before[sealed_id])
        assert _old_token(sealed, alice, BODY_KIND, SEALED_WORD) in alice_tokens
        assert _old_token(sealed, alice, HEADER_KIND, "budget") in alice_tokens
        assert entry_words(sealed, sealed_id) == [] and entry_words(sealed, mixed["clear"])
    finally:
        command.upgrade(config, "head")
    after = {m: token_words(sealed, m) for m in before}
    assert after == before
    with sealed.engine.connect() as conn:
        assert "search_tokens" not in inspect(conn).get_table_names()
    # All in one column now, found as before: whole words, body only or any part, per owner.
    assert _jmap_ids(base, {"text": SEALED_WORD}) == [sealed_id]
    assert _jmap_ids(base, {"text": "walrus"}) == [sealed_id, mixed["clear"]]
    assert _jmap_ids(base, {"body": "budget"}) == []
    assert _jmap_ids(base, {"text": "budget"}) == [sealed_id]
    assert _jmap_ids(base, {"text": BOB_WORD}) == []
    with sealed.session() as session:
        clauses = condition_clauses(session, Conditions(text=SEALED_WORD), alice)
        found = session.scalars(select(Message.id).where(Message.user_id == alice, *clauses))
        assert list(found) == [sealed_id]


def test_migration_0023_on_old_rows_written_directly(
    sealed: Store, mixed: dict[str, int], base: str
) -> None:
    """Rows the old code wrote (computed here with the old formula) become findable words."""
    config = alembic_config(sealed)
    alice, sealed_id = mixed["alice"], mixed["sealed"]
    command.downgrade(config, "0022")
    try:
        with sealed.session() as session:
            session.execute(
                text("DELETE FROM search_tokens WHERE message_id = :m"), {"m": sealed_id}
            )
        rows = [
            {"u": alice, "t": _old_token(sealed, alice, kind, word), "m": sealed_id}
            for kind, word in ((BODY_KIND, "lemurs"), (BODY_KIND, "sing"), (HEADER_KIND, "gala"))
        ]
        with sealed.session() as session:
            session.execute(
                text("INSERT INTO search_tokens (user_id, token, message_id) VALUES (:u, :t, :m)"),
                rows,
            )
            session.commit()
    finally:
        command.upgrade(config, "head")
    assert len(token_words(sealed, sealed_id)) == 3
    assert _jmap_ids(base, {"text": "lemurs sing"}) == [sealed_id]
    assert _jmap_ids(base, {"body": "lemurs"}) == [sealed_id]
    assert _jmap_ids(base, {"text": "gala"}) == [sealed_id]
    assert _jmap_ids(base, {"body": "gala"}) == []
    assert _jmap_ids(base, {"text": SEALED_WORD}) == []  # its old rows were replaced above
